"""Bad files and runs that go wrong: checkpoints (folder, unwritable, random bytes, truncated,
empty, an unrelated file, a mismatching or longer run), outputs written as one unit, counts
that would overflow, NaN rates, ABF channels, blow-ups; each with a message naming the file or
key, a documented exit code, no traceback."""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import numpy as np
import pytest

from app.sims.common.checkpoint import CheckpointError, is_checkpoint, read_checkpoint, write_checkpoint
from app.sims.common.config import ConfigError, parse_yaml
from tests.sims.common.bad_inputs import PRESET, run_cli, write

pytestmark = pytest.mark.timeout(120)

NETWORK_TINY = ["culture.width=3", "culture.height=3", "run.epochs=2", "run.epoch_seconds=0.01",
                "analysis.spikes=none"]


def _valid_checkpoint(tmp_path: Path) -> Path:
    path = tmp_path / "good.npz"
    write_checkpoint(path, {"config_yaml": np.array("domain: network\n"), "epoch": np.int64(1)}, "network")
    return path


def _damaged(tmp_path: Path, kind: str) -> Path:
    path = tmp_path / f"{kind}.npz"
    if kind == "folder":
        path.mkdir()
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "random":
        path.write_bytes(np.random.default_rng(1).bytes(4096))
    elif kind == "truncated":
        whole = _valid_checkpoint(tmp_path).read_bytes()
        path.write_bytes(whole[: len(whole) // 2])
    elif kind == "text":
        path.write_text("epoch: 3\n")
    elif kind == "other npz":
        np.savez(path, a=np.arange(3))
    elif kind == "pickled":
        np.savez(path, config_yaml=np.array([{"a": 1}], dtype=object))
    elif kind == "other domain":
        write_checkpoint(path, {"config_yaml": np.array("domain: ssa\n")}, "epidermis")
    elif kind == "corrupt member":
        whole = bytearray(_valid_checkpoint(tmp_path).read_bytes())
        whole[60:90] = b"\xff" * 30                 # inside the first member's data
        path.write_bytes(bytes(whole))
    return path


DAMAGE = {
    "folder": "this is a folder",
    "empty": "the file is empty",
    "random": "not an NPZ (zip) file",
    "truncated": "not an NPZ (zip) file",
    "text": "not an NPZ (zip) file",
    "other npz": "not a checkpoint of this app",
    "pickled": "damaged or not a checkpoint",
    "other domain": "not a network one",
    "corrupt member": "damaged",
}


@pytest.mark.parametrize("kind", list(DAMAGE))
def test_reading_a_damaged_checkpoint_names_the_file_and_the_reason(kind, tmp_path):
    path = _damaged(tmp_path, kind)
    with pytest.raises(CheckpointError) as info:
        read_checkpoint(path, "network")
    assert str(path) in str(info.value) and DAMAGE[kind] in str(info.value), str(info.value)


@pytest.mark.parametrize("kind", ["folder", "empty", "random", "truncated", "text", "other npz",
                                  "pickled", "other domain"])
@pytest.mark.parametrize("domain", ["network", "epidermis"])
def test_a_run_resuming_from_a_damaged_checkpoint_exits_2(domain, kind, tmp_path, capsys):
    path = _damaged(tmp_path, kind)
    before = path.read_bytes() if path.is_file() else None
    code, err = run_cli(capsys, PRESET[domain], f"run.checkpoint={path}", "run.resume=true",
                        out=tmp_path / "out")
    assert code == 2 and f"checkpoint {path}" in err, err
    if before is not None:
        assert path.read_bytes() == before                  # never overwritten


@pytest.mark.parametrize("domain", ["network", "epidermis", "cardiac"])
def test_an_unrelated_file_is_never_overwritten(domain, tmp_path, capsys):
    precious = write(tmp_path, "my thesis\n", "thesis.txt")
    code, err = run_cli(capsys, PRESET[domain], f"run.checkpoint={precious}", "run.resume=false",
                        out=tmp_path / "out")
    assert code == 2 and "not overwritten" in err and str(precious) in err, err
    assert precious.read_text() == "my thesis\n"


@pytest.mark.parametrize("where", ["under a file", "read-only folder", "/proc"])
def test_an_unwritable_checkpoint_place_is_found_before_the_run(where, tmp_path, capsys):
    if where == "under a file":
        target = write(tmp_path, "x", "blocker") / "ck.npz"
    elif where == "read-only folder":
        if os.geteuid() == 0:
            pytest.skip("root writes into read-only folders")
        folder = tmp_path / "ro"
        folder.mkdir()
        folder.chmod(0o500)
        target = folder / "ck.npz"
    else:
        target = Path("/proc/biogpu-checkpoint.npz")
    code, err = run_cli(capsys, PRESET["network"], f"run.checkpoint={target}", *NETWORK_TINY,
                        out=tmp_path / "out")
    assert code == 2 and f"checkpoint {target}" in err, err
    assert not (tmp_path / "out" / "results.npz").exists()


def test_a_finished_checkpoint_is_not_resumed_into_a_shorter_run(tmp_path, capsys):
    """A 2-epoch checkpoint with run.epochs=1: refused with both numbers (never the 2-epoch
    result under a config that says 1); the config that matches resumes."""
    ck = tmp_path / "ck.npz"
    code, err = run_cli(capsys, PRESET["network"], f"run.checkpoint={ck}", *NETWORK_TINY,
                        out=tmp_path / "first")
    assert code == 0 and is_checkpoint(ck), err
    code, err = run_cli(capsys, PRESET["network"], f"run.checkpoint={ck}", *NETWORK_TINY,
                        "run.epochs=1", out=tmp_path / "second")
    assert code == 2 and "already run 2 epochs, past run.epochs = 1" in err, err
    assert not (tmp_path / "second" / "results.npz").exists()
    code, err = run_cli(capsys, PRESET["network"], f"run.checkpoint={ck}", *NETWORK_TINY,
                        "culture.width=4", out=tmp_path / "third")
    assert code == 2 and "culture.width is 3 in the checkpoint, 4 now" in err, err
    code, err = run_cli(capsys, PRESET["network"], f"run.checkpoint={ck}", *NETWORK_TINY,
                        "run.epochs=3", out=tmp_path / "fourth")
    assert code == 0, err
    assert json.loads((tmp_path / "fourth" / "summary.json").read_text())["epochs"] == 3


CARDIAC_TINY = ["mesh.nx=4", "mesh.ny=3", "protocol.t_end=6", "output.random_probes=2",
                "output.probe_cells=[]",
                "solver.method=bs32", "solver.dt=0.05", "output.dt_save=0",
                "protocol.stimuli=[{name: S, start: 1, duration: 2, amplitude: -40}]"]


def test_cardiac_checkpoint_resume_keeps_the_whole_step_history(tmp_path, capsys):
    whole_ck, half_ck = tmp_path / "whole.npz", tmp_path / "half.npz"
    code, err = run_cli(capsys, PRESET["cardiac"], *CARDIAC_TINY, f"run.checkpoint={whole_ck}",
                        out=tmp_path / "whole")
    assert code == 0, err
    code, err = run_cli(capsys, PRESET["cardiac"], *CARDIAC_TINY, "protocol.t_end=3",
                        f"run.checkpoint={half_ck}", out=tmp_path / "half")
    assert code == 0, err
    code, err = run_cli(capsys, PRESET["cardiac"], *CARDIAC_TINY, f"run.checkpoint={half_ck}",
                        out=tmp_path / "resumed")
    assert code == 0, err
    whole = np.load(tmp_path / "whole" / "results.npz")
    resumed = np.load(tmp_path / "resumed" / "results.npz")
    assert resumed["h_t"][0] == whole["h_t"][0]              # history from the start, not the resume
    assert len(resumed["h_t"]) == pytest.approx(len(whole["h_t"]), abs=3)
    assert resumed["probe_t"][0] == 0.0 and resumed["probe_t"][-1] == pytest.approx(6.0)
    code, err = run_cli(capsys, PRESET["cardiac"], *CARDIAC_TINY, "protocol.t_end=2",
                        f"run.checkpoint={whole_ck}", out=tmp_path / "shorter")
    assert code == 2 and "past protocol.t_end = 2" in err, err
    code, err = run_cli(capsys, PRESET["cardiac"], *CARDIAC_TINY, "D=0.1",
                        f"run.checkpoint={whole_ck}", out=tmp_path / "other")
    assert code == 2 and "D is 0.06 in the checkpoint, 0.1 now" in err, err


# ---- outputs as one unit ----------------------------------------------------------------
SSA_TINY = ["ensemble.realizations=8", "ensemble.t_end=0.5", "ensemble.samples=3"]


def test_outputs_replace_an_earlier_run_as_a_whole(tmp_path, capsys):
    out = tmp_path / "out"
    code, _ = run_cli(capsys, PRESET["ssa"], *SSA_TINY, out=out)
    first = json.loads((out / "manifest.json").read_text())
    assert code == 0 and set(first["files"]) == {"config.yaml", "results.npz", "summary.json",
                                                 "ro-crate-metadata.json"}
    (out / "plot.png").write_bytes(b"an old plot")            # left by an earlier run
    (out / ".results.npz.999999999.abcd.tmp").write_bytes(b"killed mid-write")
    (out / ".run-999999999-abcd.tmp").mkdir()
    (out / ".run-999999999-abcd.tmp" / "results.npz").write_bytes(b"half")
    code, _ = run_cli(capsys, PRESET["ssa"], *SSA_TINY, "ensemble.seed=5", out=out)
    second = json.loads((out / "manifest.json").read_text())
    assert code == 0 and second["run_id"] != first["run_id"]
    assert sorted(p.name for p in out.iterdir()) == ["config.yaml", "manifest.json", "results.npz",
                                                     "ro-crate-metadata.json", "summary.json"]
    assert "seed: 5" in (out / "config.yaml").read_text()


def test_a_failed_write_leaves_the_earlier_run_whole(tmp_path, capsys, monkeypatch):
    out = tmp_path / "out"
    code, _ = run_cli(capsys, PRESET["ssa"], *SSA_TINY, out=out)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    from app.sims.common import output

    def full_disk(path, arrays):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(output, "save_npz", full_disk)
    code, err = run_cli(capsys, PRESET["ssa"], *SSA_TINY, "ensemble.seed=5", out=out)
    assert code == 1 and "No space left" in err, err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before      # old run, whole


# ---- runs that stop before their end: exit 3 with what they had -------------------------
OVERFLOW = """domain: ssa
model:
  species: {X: 9223372036854775000}
  parameters: {k: 10.0}
  reactions:
    - {name: birth, reactants: {}, products: {X: 1000}, rate: k}
ensemble: {realizations: 4, t_end: 1.0, samples: 3, seed: 1}
"""


@pytest.mark.parametrize("backend", ["cpu", "cpu-reference"])
def test_a_count_that_would_overflow_stops_the_run(backend, tmp_path, capsys):
    code, err = run_cli(capsys, write(tmp_path, OVERFLOW), out=tmp_path / "out", backend=backend)
    assert code == 3 and "the count of X" in err and "would exceed 9,223,372,036,854,775,807" in err, err
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["finished"] is False and "X" in summary["stopped"]["reason"]
    final = np.load(tmp_path / "out" / "results.npz")["final"]
    assert (final > 0).all()                                   # never wrapped round


@pytest.mark.parametrize("counts,message", [
    ("{X: 2147483648, Y: 0}", "does not fit the CUDA engine"),
    ("{X: 1000000000, Y: 1000000000}", "add up to"),
])
def test_counts_beyond_the_cuda_integers_are_refused_before_the_run(counts, message):
    from app.sims.ssa.config import check_counts, load_config

    text = (f"domain: ssa\nmodel:\n  species: {counts}\n  reactions:\n"
            "    - {name: r, reactants: {X: 1}, products: {Y: 1}, rate: 1.0}\n")
    cfg = load_config(parse_yaml(text, "c.yaml"))
    with pytest.raises(ConfigError, match=message):
        check_counts(cfg, cfg.network(), "cuda")
    check_counts(cfg, cfg.network(), "cpu")                     # int64 holds them


def test_the_cuda_kernel_stops_a_realization_past_its_count_limit():
    """The kernel tests every 64 reactions whether a count passed 2^30 (64 firings of at most
    2^24 each cannot carry it past 2^31) and flags 1 + the species; the host raises CountOverflow."""
    from app.package_data import data_dir

    kernel = (data_dir("kernels") / "ssa.cu").read_text()
    assert "if ((fired & 63u) == 0u)" in kernel and "atomicMax(overflow, bad)" in kernel


def test_a_blow_up_exits_3_and_keeps_what_it_had(tmp_path, capsys):
    """A cardiac single cell driven far past any physiological current: the state check stops
    the run (V beyond its limit); exit 3, the results up to the stop are written."""
    code, err = run_cli(capsys, PRESET["cardiac-single"], "protocol.t_end=20",
                        "protocol.stimuli=[{name: S, start: 1, duration: 5, amplitude: -10000}]",
                        "solver.method=rlfe", "solver.dt=0.5", out=tmp_path / "out")
    assert code == 3 and "stopped before its end" in err, err
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["finished"] is False and "V" in summary["stopped"]["reason"]
    assert (tmp_path / "out" / "results.npz").exists() and (tmp_path / "out" / "manifest.json").exists()


def test_an_epidermis_blow_up_exits_3_and_keeps_what_it_had(tmp_path, capsys):
    code, err = run_cli(capsys, PRESET["epidermis"], "run.dt=1.0", "run.steps=20", "run.relax_steps=0",
                        "mechanics.intra.U0=10000", "mechanics.intra.xi1=0.001", out=tmp_path / "out")
    assert code == 3 and "blew up" in err, err
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["finished"] is False and "blew up" in summary["stopped"]["reason"]


# ---- channel: NaN rates and ABF channels ------------------------------------------------
CHANNEL_MODEL = """domain: channel
name: nan model
model:
  states: [C, O]
  open_states: [O]
  parameters: [{name: g, min: 0.1, max: 10, value: 1}, {name: a, min: 0.1, max: 10, value: 1}]
  conductance: g
  e_rev: -80
  rates: [k12 = RATE, k21 = a*exp(-v/30)]
protocols:
  - {name: act, holding: -100, dt: 0.5, segments: [{voltage: step, duration: 5, record: true}],
     steps: {start: -40, stop: 40, increment: 40}}
ga: {population: 16, generations: 2, seed: 3}
"""


def test_a_rate_nan_for_every_parameter_set_is_a_model_error(tmp_path, capsys):
    path = write(tmp_path, CHANNEL_MODEL.replace("RATE", "sqrt(-1-a)"))
    code, err = run_cli(capsys, path, out=tmp_path / "out")
    assert code == 2 and "rate k12 is NaN or infinite at v = -100 mV" in err, err


def test_a_rate_nan_only_at_one_voltage_is_a_model_error_naming_that_voltage(tmp_path, capsys):
    path = write(tmp_path, CHANNEL_MODEL.replace("RATE", "a*sqrt(v-1)"))
    code, err = run_cli(capsys, path, out=tmp_path / "out")
    assert code == 2 and "rate k12 is NaN or infinite at v = -100 mV" in err, err


def test_a_rate_nan_for_some_parameter_sets_makes_invalid_individuals(tmp_path, capsys):
    """sqrt(a - 5) is NaN for half the range of a: those individuals score the failure score,
    the fit goes on with the others and reaches a finite chi^2."""
    from app.sims.channel.cpu import BAD_SCORE, evaluate
    from app.sims.channel.config import load_config

    cfg = load_config(parse_yaml(CHANNEL_MODEL.replace("RATE", "sqrt(a-5)"), str(tmp_path / "c.yaml")))
    model, protocol = cfg.model_(), cfg.protocol()
    params = np.array([[1.0, 2.0], [1.0, 8.0]])
    scores = evaluate(model, protocol, params, np.zeros(protocol.n_points))
    assert scores[0] == BAD_SCORE and scores[1] < BAD_SCORE
    text = CHANNEL_MODEL.replace("RATE", "sqrt(a-5)")
    code, err = run_cli(capsys, write(tmp_path, text), out=tmp_path / "out")
    assert code == 2 and "the surrogate data would be NaN" in err, err      # a = 1: NaN data
    text = text.replace("{name: a, min: 0.1, max: 10, value: 1}", "{name: a, min: 0.1, max: 10, value: 8}")
    code, err = run_cli(capsys, write(tmp_path, text), out=tmp_path / "out")
    assert code == 0, err
    assert np.isfinite(json.loads((tmp_path / "out" / "summary.json").read_text())["best_chi2"])


def test_a_fit_where_every_individual_failed_is_not_reported_as_a_fit(tmp_path, capsys, monkeypatch):
    """Simulations that all fail (rates finite, the propagation not): exit 3, never a 'best'
    parameter set with the failure score as its chi^2."""
    from app.sims.channel import cpu

    monkeypatch.setattr(cpu, "chi2", lambda currents, target, weights=None:
                        np.full(len(currents), cpu.BAD_SCORE))
    code, err = run_cli(capsys, write(tmp_path, CHANNEL_MODEL.replace("RATE", "a*exp(v/30)")),
                        out=tmp_path / "out")
    assert code == 3 and "every parameter set evaluated was invalid" in err, err


def test_an_abf_channel_the_file_does_not_have(tmp_path, capsys):
    pyabf = pytest.importorskip("pyabf")
    sweeps = np.zeros((3, 1000), np.float32)
    abf = tmp_path / "one.abf"
    pyabf.abfWriter.writeABF1(sweeps, str(abf), sampleRateHz=20000.0)
    text = CHANNEL_MODEL.replace("RATE", "a*exp(v/30)") + f"data: {{source: abf, path: {abf}, channel: 5}}\n"
    code, err = run_cli(capsys, write(tmp_path, text), out=tmp_path / "out")
    assert code == 2 and "data.channel = 5" in err and "has 1 channel" in err, err


def test_a_checkpoint_written_by_a_run_is_recognised(tmp_path):
    path = _valid_checkpoint(tmp_path)
    assert is_checkpoint(path)
    with zipfile.ZipFile(path) as zf:
        assert "biogpu_checkpoint.npy" in zf.namelist()


def test_long_setups_report_progress_and_blocks_change_nothing(caplog, monkeypatch):
    import logging

    from app.sims.channel import ga
    from app.sims.common import progress

    whole = ga.initial_population(5, 5000, np.zeros(9), np.ones(9))
    monkeypatch.setattr(ga, "INIT_BLOCK", 1000)
    monkeypatch.setattr(progress.SetupProgress.__init__, "__defaults__", (0.0,))   # report every call
    with caplog.at_level(logging.INFO, logger="app.setup"):
        blocks = ga.initial_population(5, 5000, np.zeros(9), np.ones(9))
    assert np.array_equal(whole, blocks)
    lines = [r.getMessage() for r in caplog.records if r.name == "app.setup"]
    assert len(lines) == 5 and "drawing 5,000 initial individuals: 100 % (5,000 of 5,000" in lines[-1]


# ---- memory limits ------------------------------------------------------------------------
def test_the_limits_come_from_the_machine_and_the_environment(monkeypatch):
    from app.sims.common import memory

    monkeypatch.delenv("BIOGPU_MEMORY_LIMIT", raising=False)
    monkeypatch.setattr(memory, "available_host_bytes", lambda: 10 << 30)
    monkeypatch.setattr(memory, "free_gpu_bytes", lambda: 4 << 30)
    host, gpu = memory.limits("cuda")
    assert host == int(0.9 * (10 << 30)) and gpu == int(0.9 * (4 << 30))
    assert memory.limits("cpu") == (host, None)
    monkeypatch.setenv("BIOGPU_MEMORY_LIMIT", "1.5G")
    assert memory.limits("cuda") == (int(1.5 * (1 << 30)), int(1.5 * (1 << 30)))
    monkeypatch.setenv("BIOGPU_MEMORY_LIMIT", "lots")
    with pytest.raises(ConfigError, match="BIOGPU_MEMORY_LIMIT"):
        memory.limits("cpu")


def test_a_gpu_that_is_too_small_is_named(monkeypatch):
    from app.sims.common import memory

    monkeypatch.delenv("BIOGPU_MEMORY_LIMIT", raising=False)
    monkeypatch.setattr(memory, "available_host_bytes", lambda: 1 << 40)
    monkeypatch.setattr(memory, "free_gpu_bytes", lambda: 1 << 30)
    est = memory.estimate({"host part": 1 << 20}, {"states": 2 << 30}, ("ensemble", "realizations"))
    memory.check_fits(est, "cpu")                                  # the CPU does not use the GPU
    with pytest.raises(ConfigError) as info:
        memory.check_fits(est, "cuda")
    text = str(info.value)
    assert "ensemble.realizations" in text and "2.0 GiB of GPU memory" in text and "states = 2.0 GiB" in text
    assert "921.6 MiB is available" in text


@pytest.mark.gpu
def test_a_count_that_would_overflow_stops_the_cuda_run(tmp_path, capsys):
    """The kernel flags a count past its limit; the run stops with exit 3 and the species."""
    text = OVERFLOW.replace("9223372036854775000", "1073000000").replace("k: 10.0", "k: 1000.0")
    assert "{X: 1073000000}" in text and "products: {X: 1000}" in text    # ~742 births past 2^30
    code, err = run_cli(capsys, write(tmp_path, text), out=tmp_path / "out", backend="cuda")
    assert code == 3 and "X" in err, err
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["finished"] is False


def test_100001_snapshot_times_of_2_26_realizations_are_refused_naming_the_snapshots(tmp_path, capsys,
                                                                                     monkeypatch):
    monkeypatch.setenv("BIOGPU_MEMORY_LIMIT", "8G")
    text = PRESET["ssa"].read_text().replace("realizations: 20000", "realizations: 67108864")
    text = text.replace("samples: 61", "samples: 100001")
    text += "  snapshot_times: [" + ", ".join(f"{i * 0.0003:.4f}" for i in range(100001)) + "]\n"
    code, err = run_cli(capsys, write(tmp_path, text), out=tmp_path / "out")
    assert code == 2 and "ensemble.snapshot_times" in err and "TiB of host memory" in err, err
