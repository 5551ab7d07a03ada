"""Bad input in every domain, through the CLI in process: a message naming the key or value and
the reason, exit 2, no traceback, nothing written, within seconds (each case is bounded by the
timeout below). Sizes the machine cannot hold are refused from the config's memory estimate,
with the limit fixed by BIOGPU_MEMORY_LIMIT so the answer is the same on every machine."""

from __future__ import annotations

import pytest

from tests.sims.common.bad_inputs import PRESET, run_cli

pytestmark = pytest.mark.timeout(60)

BIG = 2**63        # one past int64
NAN, INF = ".nan", ".inf"

SSA = {
    "ensemble.realizations=0": "out of range",
    "ensemble.realizations=-1": "out of range",
    "ensemble.realizations=67108865": "out of range",
    "ensemble.realizations=1.5": "expected a whole number",
    "ensemble.realizations=many": "expected a whole number",
    "ensemble.realizations=[1, 2]": "expected a whole number",
    "ensemble.realizations=": "expected a whole number",
    "ensemble.t_end=0": "out of range",
    f"ensemble.t_end={NAN}": "finite number",
    f"ensemble.t_end=-{INF}": "finite number",
    "ensemble.samples=1": "out of range",
    "ensemble.samples=100002": "out of range",
    "ensemble.histogram_bins=1": "out of range",
    "ensemble.histogram_bins=5000": "out of range",
    "ensemble.histogram_species=[Y]": "unknown species 'Y'",
    "ensemble.histogram_species=X": "expected a list",
    "ensemble.snapshot_times=[100]": "outside [0, t_end",
    f"ensemble.snapshot_times=[{NAN}]": "finite number",
    "ensemble.algorithm=tau": "not one of",
    f"ensemble.seed={BIG * 2}": "64-bit integer",
    "model.species.X=-1": "",
    f"model.species.X={BIG}": "64-bit integer",
    "model.species.X=1e30": "expected a whole number",
    "model.species={}": "",
    "model.parameters.k=-1": "",
    f"model.parameters.g={INF}": "finite number",
    "model.reactions=[]": "",
    "model.reactions=[{name: r, reactants: {Z: 1}, products: {}, rate: k}]": "Z",
    "model.reactions=[{name: r, reactants: {X: 1}, products: {}, rate: nope}]": "nope",
    "model.reactions=[{name: r, reactants: {X: -1}, products: {}, rate: k}]": "",
    "model.reactions=[{name: r, reactants: {X: 1}, products: {}}]": "rate",
    "model=7": "expected a mapping",
    "grid={n: 8}": "exactly one of",
    "ensemble=[]": "expected a mapping",
    "colour=red": "unknown key 'colour'",
    "domain=ssb": "unknown domain",
}

CHANNEL_PROTOCOL = "protocols=[{name: a, holding: -100, dt: 0.1, segments: [%s]%s}]"
CHANNEL = {
    "ga.population=1": "out of range",
    "ga.population=4000001": "out of range",
    "ga.generations=0": "out of range",
    f"ga.crossover={NAN}": "finite number",
    "ga.mutation=2": "out of range",
    "ga.creep=-0.1": "out of range",
    f"ga.chi2_threshold={INF}": "finite number",
    f"ga.seed={BIG * 2}": "64-bit integer",
    "data.source=hdf5": "not one of",
    "data.source=csv": "needs a 'path'",
    "data.source=abf": "needs a 'path'",
    f"data.noise_sd={NAN}": "finite number",
    "data.channel=-1": "out of range",
    "data.channel=65": "out of range",
    "model=models/channel/none.yaml": "file not found",
    "protocols=protocols/channel/none.yaml": "file not found",
    "model=''": "'model' is required",
    "protocols=[]": "at least one protocol",
    CHANNEL_PROTOCOL % ("{voltage: step, duration: 1, record: true}",
                        ", steps: {start: 0, stop: 1000000, increment: 0.000001}"): "sweeps; at most",
    CHANNEL_PROTOCOL % ("{voltage: step, duration: 1, record: true}",
                        f", steps: {{start: {NAN}, stop: 10, increment: 1}}"): "finite number",
    CHANNEL_PROTOCOL % ("{voltage: step, duration: 1, record: true}",
                        f", steps: {{start: 0, stop: {INF}, increment: 1}}"): "finite number",
    CHANNEL_PROTOCOL % ("{voltage: step, duration: 1, record: true}",
                        f", step_list: [0, {NAN}]"): "finite number",
    CHANNEL_PROTOCOL % (f"{{voltage: {NAN}, duration: 1, record: true}}", ""): "finite number",
    (CHANNEL_PROTOCOL % ("{voltage: 10, duration: 1000000, record: true}", "")
     ).replace("dt: 0.1", "dt: 0.0009765625"): "of host memory",
    CHANNEL_PROTOCOL % ("{voltage: 10, duration: 0.15, record: true}", ""): "whole number of dt",
    CHANNEL_PROTOCOL % ("{voltage: 10, duration: 1, record: false}", ""): "no segment is recorded",
    CHANNEL_PROTOCOL % ("{voltage: step, duration: 1, record: true}", ""): "exactly when",
    CHANNEL_PROTOCOL % ("{voltage: high, duration: 1, record: true}", ""): "a number (mV) or 'step'",
    CHANNEL_PROTOCOL % ("{voltage: 10, duration: 0, record: true}", ""): "out of range",
    (CHANNEL_PROTOCOL % ("{voltage: 10, duration: 1, record: true}", "")
     ).replace("holding: -100", "holding: 1000"): "out of range",
    CHANNEL_PROTOCOL % ("{voltage: step, duration: 1, record: true}",
                        ", steps: {start: 10, stop: 0, increment: 1}"): "stop is below start",
    CHANNEL_PROTOCOL % ("{voltage: step, duration: 1, record: true}",
                        ", steps: {start: 0, stop: 10, increment: 1}, step_list: [1]"): "not both",
    "ga=[]": "expected a mapping",
    "name=[1]": "expected",
}

CARDIAC = {
    "mesh.kind=cube": "not one of",
    "mesh.nx=0": "out of range",
    "mesh.nx=8193": "out of range",
    "mesh.level=10": "out of range",
    f"mesh.dx_mm={NAN}": "finite number",
    "D=-1": "out of range",
    f"D={INF}": "finite number",
    f"model.parameters.ACh={NAN}": "finite number",
    f"model.parameters.ACh={INF}": "finite number",
    "model.parameters.colour=1": "no variable 'colour'",
    "model.parameters=[1]": "expected a mapping",
    "model.file=nothing.cellml": "neither a shipped model",
    "solver.precision=half": "not one of",
    "solver.lookup_step=0": "out of range",
    f"solver.lookup_v_max={NAN}": "finite number",
    "model.colour=1": "unknown key 'colour'",
    f"protocol.t_end={NAN}": "finite number",
    "protocol.t_end=0": "out of range",
    "protocol.stimuli=[{name: S, start: 1, duration: 2, amplitude: -40, region: {kind: cells, cells: [1e30]}}]":
        "expected a whole number",
    f"protocol.stimuli=[{{name: S, start: 1, duration: 2, amplitude: -40, region: {{kind: cells, cells: [{BIG}]}}}}]":
        "64-bit integer",
    "protocol.stimuli=[{name: S, start: 1, duration: 2, amplitude: -40, region: {kind: cells, cells: [160000]}}]":
        "is not a cell of this sheet",
    "protocol.stimuli=[{name: S, start: 1, duration: 2, amplitude: -40, region: {kind: cells, cells: [-1]}}]":
        "is not a cell of this sheet",
    f"protocol.stimuli=[{{name: S, start: {NAN}, duration: 2, amplitude: -40}}]": "finite number",
    "protocol.stimuli=[{name: S, start: 1, duration: 0, amplitude: -40}]": "out of range",
    "protocol.stimuli=[{name: S, start: 1, duration: 2, amplitude: -40, count: 0}]": "out of range",
    "protocol.stimuli=[{name: S, start: 1, duration: 2, amplitude: -40, region: {kind: rect, x0: 5, x1: 1}}]":
        "rect needs x0 <= x1",
    "protocol.stimuli=[{name: S, start: 1, duration: 2, amplitude: -40, region: {kind: cap, center: [0, 0, 0]}}]":
        "nonzero 3-vector",
    "protocol.stimuli=[{name: S, start: 1, duration: 2, amplitude: -40, region: {kind: blob}}]": "not one of",
    "solver.method=euler": "not one of",
    "solver.dt=5": "would step over it",
    "solver.dt=10": "would step over it",
    "solver.dt=0.3": "not a whole number of solver.dt",
    "solver.dt=0": "out of range",
    f"solver.dt={NAN}": "finite number",
    "solver.precision=float16": "not one of",
    "output.probe_cells=[99999999]": "is not a cell of this sheet",
    "output.probe_cells=[-5]": "is not a cell of this sheet",
    "output.probe_cells=[160000]": "is not a cell of this sheet",
    "output.probe_cells=[1.5]": "expected a whole number",
    f"output.dt_save={NAN}": "finite number",
    "output.random_probes=-1": "out of range",
    "run.checkpoint=[]": "expected",
    "run.checkpoint_every=0": "out of range",
    "mesh.nx=8192 & mesh.ny=8192": "GiB of host memory",
    "protocol.t_end=100000000": "of host memory",
}

NETWORK = {
    "culture.width=0": "out of range",
    "culture.width=4097": "out of range",
    "culture.inhibitory_fraction=1.5": "out of range",
    "culture.starter_fraction=0.99": "add up to more than 1",
    f"culture.seed={BIG}": "does not fit a 64-bit integer",
    "culture.layout=hex": "not one of",
    f"neuron.Cm={NAN}": "finite number",
    "neuron.Cm=0": "out of range",
    f"neuron.Rm={INF}": "finite number",
    "neuron.Inoise_min=1.0e-3": "Inoise_min must not exceed",
    "neuron.Inoise_min=1e-3": "write 1.0e-3",
    "neuron.Rm=1.5e6": "write 1.5e+6",
    "neuron.starter_Vthresh_min=0.5": "starter_Vthresh_min must not exceed",
    "synapses.EE.U=0": "out of range",
    "synapses.EE.delay=0.01": "at most 48 steps",
    f"synapses.II.tau={NAN}": "finite number",
    "synapses.XX={U: 0.5}": "unknown key 'XX'",
    "growth.epsilon=0": "out of range",
    f"growth.rho={NAN}": "finite number",
    "growth.max_radius=31": "out of range",
    "run.epochs=0": "out of range",
    "run.epochs=1000001": "out of range",
    "run.epoch_seconds=1.0e-4": "out of range",
    "run.dt=1": "out of range",
    f"run.dt={NAN}": "finite number",
    "run.epochs=1000000": "exceed 2^30 steps",
    "run.resume=maybe": "expected true or false",
    "analysis.spikes=some": "not one of",
    "analysis.burst_bin=0": "out of range",
    "run.slice_seconds=0": "out of range",
    "culture=[10, 10]": "expected a mapping",
    "culture.width=4096 & culture.height=4096": "GiB of host memory",
}

EPIDERMIS = {
    "tissue.cells=0": "out of range",
    "tissue.cells=2000001": "out of range",
    "tissue.elements=1": "out of range",
    "tissue.elements=41": "exceeds max_elements",
    "tissue.max_elements=39": "must be even",
    "tissue.max_elements=65": "out of range",
    "tissue.layout=hex": "not one of",
    f"tissue.pitch={NAN}": "finite number",
    "tissue.pitch=1": "the periodic box is",
    "tissue.boundary=sphere": "not one of",
    f"tissue.seed={BIG}": "does not fit a 64-bit integer",
    f"tissue.cell_radius={INF}": "finite number",
    "mechanics.intra.xi1=0": "out of range",
    f"mechanics.inter.U0={NAN}": "finite number",
    "mechanics.centre_cutoff=1": "must not be below inter_cutoff",
    "mechanics.c1_height=-1": "out of range",
    f"genes.G={NAN}": "finite number",
    "genes.BN.h=17": "out of range",
    "genes.initial_noise=2": "out of range",
    "growth.interval=0": "out of range",
    "growth.division_axis=diagonal": "not one of",
    f"growth.jitter={INF}": "finite number",
    "run.mode=all": "not one of",
    "run.search=octree": "not one of",
    "run.steps=0": "out of range",
    f"run.steps={2**31}": "out of range",
    "run.dt=2": "out of range",
    "run.relax_steps=-1": "out of range",
    "run.history_every=0": "out of range",
    "run.layer_thickness=0": "out of range",
    "tissue.cells=2000000": "GiB of host memory",
    "tissue.cells=60000 & tissue.layout=random": "the random layout",
    "tissue=5": "expected a mapping",
}

CASES = [(d, s, m) for d, table in (("ssa", SSA), ("channel", CHANNEL), ("cardiac", CARDIAC),
                                    ("network", NETWORK), ("epidermis", EPIDERMIS))
         for s, m in table.items()]


@pytest.mark.parametrize("domain,override,message", CASES,
                         ids=[f"{d}:{s[:60]}" for d, s, _ in CASES])
def test_bad_values_are_refused_with_the_key(domain, override, message, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("BIOGPU_MEMORY_LIMIT", "8G")
    sets = override.split(" & ")
    code, err = run_cli(capsys, PRESET[domain], *sets, out=tmp_path / "out")
    assert code == 2, err
    assert message in err, err
    if "of host memory" not in message:          # a memory refusal names its largest part's key
        key = override.split("=", 1)[0]
        assert key.split(".")[0] in err or "--set" in err or "domain" in err, err
    assert not (tmp_path / "out" / "results.npz").exists()


FILES = {
    "utf-16": ("domain: ssa\n".encode("utf-16"), "not UTF-8 text"),
    "gzip": (b"\x1f\x8b\x08\x00" + bytes(range(256)), "not UTF-8 text"),
    "nul inside": (b"domain: ssa\nname: a\x00b\n", "binary file"),
    "tabs": (b"domain: ssa\nmodel:\n\tspecies: {X: 1}\n", "YAML syntax error"),
    "undefined alias": (b"domain: ssa\nname: *nothing\n", "YAML syntax error"),
    "complex key": (b"domain: ssa\n? [a, b]\n: 1\n", "keys must be plain names"),
    "duplicate key": (b"domain: ssa\ndomain: ssa\n", "duplicate key 'domain'"),
    "set tag": (b"domain: ssa\nname: !!set {a, b}\n", "not a plain YAML value"),
    "binary tag": (b"domain: ssa\nname: !!binary aGVsbG8=\n", "expected text"),
    "custom tag": (b"domain: ssa\nensemble: !mine {}\n", "not a plain YAML value"),
    "deep mapping": (("domain: ssa\nx:\n" + "".join(" " * (i + 1) + f"k{i}:\n" for i in range(300))
                      + " " * 301 + "v: 1\n").encode(), "nested more than 200 levels"),
    "only comments": (b"# nothing here\n", "a run config is a mapping"),
    "a list of configs": (b"- domain: ssa\n- domain: ssa\n", "a run config is a mapping"),
    "two documents": (b"domain: ssa\n---\ndomain: cardiac\n", "YAML syntax error"),
    "text": (b"hello world\n", "a run config is a mapping"),
    "domain missing": (b"name: x\n", "unknown domain None"),
    "domain null": (b"domain: ~\n", "unknown domain None"),
    "domain spaces": (b"domain: ' ssa'\n", "unknown domain"),
    "domain dict": (b"domain: {ssa: 1}\n", "unknown domain"),
    "crlf and bad value": (b"domain: ssa\r\nensemble: {realizations: -1}\r\nmodel: {species: {X: 1}, "
                           b"reactions: [{reactants: {X: 1}, products: {}, rate: 1.0}]}\r\n", "out of range"),
    "windows-1252 quote": (b"domain: ssa\nname: \x93quoted\x94\n", "not UTF-8 text"),
}


@pytest.mark.parametrize("case", list(FILES))
def test_bad_config_files(case, tmp_path, capsys):
    payload, message = FILES[case]
    path = tmp_path / "c.yaml"
    path.write_bytes(payload)
    code, err = run_cli(capsys, path, out=tmp_path / "out")
    assert code == 2 and message in err and str(path) in err, err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("special", ["/dev/zero", "/dev/null", "fifo"])
def test_devices_and_pipes_are_refused_without_reading(special, tmp_path, capsys):
    import os

    path = special
    if special == "fifo":
        path = str(tmp_path / "fifo")
        os.mkfifo(path)
    code, err = run_cli(capsys, path, out=tmp_path / "out")
    assert code == 2 and "not a regular file" in err, err


def _numeric_keys(domain: str) -> list[str]:
    """Dotted keys of the preset's numeric leaves (where generated values go)."""
    from app.sims.common.config import dotted_items, load_yaml

    data = load_yaml(PRESET[domain]).data
    return [k for k, v in dotted_items(data) if isinstance(v, (int, float)) and not isinstance(v, bool)]


def _yaml(value) -> str:
    import math

    if isinstance(value, float) and math.isnan(value):
        return ".nan"
    if isinstance(value, float) and math.isinf(value):
        return ".inf" if value > 0 else "-.inf"
    if isinstance(value, bool) or value is None:
        return str(value).lower()
    return repr(value) if isinstance(value, str) else str(value)


GENERATED_DOMAINS = ["ssa", "channel", "cardiac", "network", "epidermis"]


@pytest.mark.parametrize("domain", GENERATED_DOMAINS)
def test_generated_values_load_or_are_refused_never_a_traceback(domain, monkeypatch):
    """Any value at any numeric key of each domain's preset: a valid config (that then passes
    or fails the pre-run checks with a ConfigError), never another exception."""
    import math

    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from app.sims.common.config import ConfigError
    from app.sims.common.session import preflight
    from app.sims.common.simulation import load_run_config

    monkeypatch.setenv("BIOGPU_MEMORY_LIMIT", "8G")
    keys = _numeric_keys(domain)
    values = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-2**70, 2**70),
                       st.sampled_from([0, -1, 1, 2**31, 2**63, 1e300, -1e-300, math.nan]),
                       st.text(max_size=8), st.lists(st.integers(-5, 5), max_size=3), st.booleans(),
                       st.none())

    @settings(derandomize=True, max_examples=100, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(key=st.sampled_from(keys), value=values)
    def check(key, value):
        try:
            dom, cfg = load_run_config(PRESET[domain], overrides=[f"{key}={_yaml(value)}"])
            preflight(dom, cfg, "cpu-reference")
        except ConfigError:
            pass

    check()
