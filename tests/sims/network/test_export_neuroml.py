"""A network run as NeuroML2: schema-valid; read back with libNeuroML, the cells, positions,
Tsodyks-Markram parameters, delays and every connection (pre, post, weight) are the run's."""

import numpy as np
import pytest

from app.cli import main
from app.sims.common.simulation import PRESETS, load_run_config
from app.sims.network.model import build_culture

neuroml = pytest.importorskip("neuroml")


def _si(text: str) -> float:
    for unit in ("degC", "s", "V", "F", "S", "A"):
        if text.endswith(unit):
            return float(text[: -len(unit)])
    raise ValueError(text)


def amperes_per_weight(synapse, vrest: float, dt: float) -> float:
    """|W| (A) of the engines per unit NeuroML weight on ``synapse``: the charge of one event
    of the written double exponential (peak-normalised, at the driving force |erev - Vrest|),
    integrated numerically, over the engines' charge per ampere (the step-held current decaying
    by exp(-dt/tau) per step, summed)."""
    from scipy.integrate import quad
    rise, decay = _si(synapse.tau_rise), _si(synapse.tau_decay)
    t = np.linspace(0.0, 10 * rise * np.log(decay / rise), 2_000_001)
    peak = np.max(np.exp(-t / decay) - np.exp(-t / rise))
    charge, _ = quad(lambda x: (np.exp(-x / decay) - np.exp(-x / rise)) / peak, 0.0, 60 * decay,
                     epsabs=0.0, epsrel=1e-13, limit=500)
    charge *= _si(synapse.gbase) * abs(_si(synapse.erev) - vrest)
    engines = dt * np.sum(np.exp(-dt / decay) ** np.arange(200_000))
    return charge / engines


def test_network_neuroml_holds_the_run_culture(tmp_path):
    run = tmp_path / "run"
    assert main(["run", str(PRESETS / "network" / "00-development-10x10-fast.yaml"), "--backend", "cpu",
                 "--set", "run.epochs=1", "--set", "run.epoch_seconds=0.5", "--set", "growth.start_radius=1.5",
                 "--out", str(run), "--no-png"]) == 0
    out = tmp_path / "net.nml"
    assert main(["export", str(run), "--to", "neuroml", "-o", str(out)]) == 0      # validates
    assert "<Include file=\"net.nml\"/>" in (tmp_path / "LEMS_net.xml").read_text()     # its simulation
    from neuroml.loaders import read_neuroml2_file
    doc = read_neuroml2_file(str(out))
    _, cfg = load_run_config(run / "config.yaml")
    culture = build_culture(cfg)
    data = np.load(run / "results.npz")
    cells = {c.id: c for c in doc.iaf_ref_cells}
    net = doc.networks[0]
    neuron_of = {}
    for pop in net.populations:
        cell = cells[pop.component]
        for inst in pop.instances:
            i = int(round(inst.location.y)) * 10 + int(round(inst.location.x))
            neuron_of[(pop.id, inst.id)] = i
            assert _si(cell.thresh) == pytest.approx(culture.vthresh[i], rel=1e-12)
            assert _si(cell.reset) == culture.vreset[i]
            assert _si(cell.refract) == pytest.approx((culture.trefract[i] + 1) * cfg.run.dt, rel=1e-12)
    assert sorted(neuron_of.values()) == list(range(100))
    syn = {s.id: s for s in doc.blocking_plastic_synapses}
    per_weight = {k: amperes_per_weight(v, cfg.neuron.Vrest, cfg.run.dt) for k, v in syn.items()}
    for name, t in zip(("EE", "EI", "IE", "II"), cfg.synapses.types()):
        m = syn[f"syn_{name}"].plasticity_mechanism
        assert m.type == "tsodyksMarkramDepFacMechanism" and float(m.init_release_prob) == t.U
        assert (_si(m.tau_rec), _si(m.tau_fac), _si(syn[f"syn_{name}"].tau_decay)) == (t.tau_rec, t.tau_facil, t.tau)
    got = []
    for proj in net.projections:
        delay_steps = cfg.delay_steps()[("EE", "EI", "IE", "II").index(proj.synapse[4:])]
        for c in proj.connection_wds:
            pre_pop, pre_k = c.pre_cell_id.split("/")[1:3]
            post_pop, post_k = c.post_cell_id.split("/")[1:3]
            assert _si(c.delay) == pytest.approx((delay_steps + 1) * cfg.run.dt, rel=1e-12)   # the latency
            got.append((neuron_of[(pre_pop, int(pre_k))], neuron_of[(post_pop, int(post_k))],
                        c.weight * per_weight[proj.synapse]))
    want = sorted(zip(data["final_W_pre"].tolist(), data["final_W_post"].tolist(), np.abs(data["final_W"]).tolist()))
    assert len(want) > 50 and len(got) == len(want)
    got.sort()
    assert [g[:2] for g in got] == [w[:2] for w in want]
    np.testing.assert_allclose([g[2] for g in got], [w[2] for w in want], rtol=1e-9)   # quadrature


def _connections(path, cfg) -> list[tuple[int, int, float]]:
    """(pre, post, |W| in A) of every connection of a written 10x10 culture, sorted."""
    from neuroml.loaders import read_neuroml2_file
    doc = read_neuroml2_file(str(path))
    net = doc.networks[0]
    per_weight = {s.id: amperes_per_weight(s, cfg.neuron.Vrest, cfg.run.dt) for s in doc.blocking_plastic_synapses}
    neuron_of = {(pop.id, inst.id): int(round(inst.location.y)) * 10 + int(round(inst.location.x))
                 for pop in net.populations for inst in pop.instances}
    out = []
    for proj in net.projections:
        for c in proj.connection_wds:
            pre, post = c.pre_cell_id.split("/")[1:3], c.post_cell_id.split("/")[1:3]
            out.append((neuron_of[(pre[0], int(pre[1]))], neuron_of[(post[0], int(post[1]))],
                        c.weight * per_weight[proj.synapse]))
    return sorted(out)


def test_network_neuroml_at_a_chosen_epoch(tmp_path, capsys):
    """Each epoch's radii rebuild that epoch's connectivity: the last is the run's own final
    connectivity exactly; --epoch 0 is the start; a missing epoch is refused with those held."""
    from app.sims.network.model import Constants, connectivity
    run = tmp_path / "run"
    assert main(["run", str(PRESETS / "network" / "00-development-10x10-fast.yaml"), "--backend", "cpu",
                 "--set", "run.epochs=3", "--set", "run.epoch_seconds=0.3", "--set", "growth.start_radius=1.1",
                 "--set", "growth.rho=0.3", "--out", str(run), "--no-png"]) == 0
    _, cfg = load_run_config(run / "config.yaml")
    data = dict(np.load(run / "results.npz"))
    culture = build_culture(cfg)
    assert data["epoch_radius"].shape == (3, 100)

    def rebuilt(radius):
        c = connectivity(10, 10, radius, culture.inhibitory, Constants.from_config(cfg).weight_scale)
        return sorted(zip(c.pre.tolist(), c.post.tolist(), np.abs(c.W).tolist()))
    last = rebuilt(data["epoch_radius"][-1])
    final = sorted(zip(data["final_W_pre"].tolist(), data["final_W_post"].tolist(), np.abs(data["final_W"]).tolist()))
    assert last == final
    start, second = rebuilt(np.full(100, 1.1)), rebuilt(data["epoch_radius"][1])
    assert len({len(start), len(second), len(last)}) == 3        # the connectivity changed every epoch
    for epoch, want in ((0, start), (2, second), (None, final)):
        out = tmp_path / f"epoch-{epoch}.nml"
        args = ["export", str(run), "--to", "neuroml", "-o", str(out)]
        assert main(args + ([] if epoch is None else ["--epoch", str(epoch)])) == 0
        got = _connections(out, cfg)
        assert [g[:2] for g in got] == [w[:2] for w in want]
        np.testing.assert_allclose([g[2] for g in got], [w[2] for w in want], rtol=1e-9)   # quadrature
    assert main(["export", str(run), "--to", "neuroml", "--epoch", "4"]) == 2
    assert "--epoch 4: the run holds epochs 0 (the start) to 3 (its end)" in capsys.readouterr().err


NOISE_FREE = ["run.epochs=1", "run.epoch_seconds=0.3", "run.dt=1.0e-5", "growth.start_radius=0.6",
              "growth.weight_scale=3.0e-7", "neuron.Inoise_min=0.0", "neuron.Inoise_max=0.0",
              "neuron.Vinit=0.0", "neuron.Iinject=14.0e-9",
              *(f"synapses.{c}.delay=2.0e-4" for c in ("EE", "EI", "IE", "II"))]


@pytest.mark.slow
def test_jlems_simulates_the_exported_network_like_our_engine(tmp_path):
    """BIOGPU_JNML_JAR: a noise-free 10x10 culture (360 synapses, starters firing tonically,
    every neuron recruited into bursts; 10 us steps, whole-step delays) run for 0.3 s by our
    engine and, exported with its LEMS file, by jLEMS at the same step. Every neuron fires
    as often in both, and each spike lies within 1 ms of its counterpart, 0.2 ms on average
    (measured 0.73 ms and 0.10 ms, against interspike intervals of 3 to 32 ms): the remaining
    differences are the NeuroML synapse's 30-us rise and forward Euler against the engines'
    exact exponentials, which move threshold crossings most where the voltage creeps up."""
    import os
    import shutil
    import subprocess
    jar = os.environ.get("BIOGPU_JNML_JAR")
    if not jar or shutil.which("java") is None:
        pytest.skip("BIOGPU_JNML_JAR is not set or java is missing")
    run = tmp_path / "run"
    sets = [a for s in NOISE_FREE for a in ("--set", s)]
    assert main(["run", str(PRESETS / "network" / "00-development-10x10-fast.yaml"), "--backend", "cpu",
                 *sets, "--out", str(run), "--no-png"]) == 0
    assert main(["export", str(run), "--to", "neuroml", "--epoch", "0", "-o", str(tmp_path / "net.nml")]) == 0
    subprocess.run(["java", "-Xmx1g", "-jar", jar, "LEMS_net.xml", "-nogui"], cwd=tmp_path, check=True,
                   capture_output=True, timeout=900)
    theirs = np.loadtxt(tmp_path / "net.spikes.dat", ndmin=2)
    data = np.load(run / "results.npz")
    ours_t, ours_n = data["spike_times"], data["spike_neurons"]
    assert ours_t.size > 300 and np.unique(ours_n).size == 100          # a network, not just starters
    their_n = theirs[:, 1].astype(int)
    np.testing.assert_array_equal(np.bincount(their_n, minlength=100), np.bincount(ours_n, minlength=100))
    shifts = np.concatenate([np.sort(theirs[their_n == i, 0]) - ours_t[ours_n == i] for i in range(100)])
    print(f"jLEMS - ours: max |dt| {np.abs(shifts).max() * 1e3:.3f} ms, mean |dt| {np.abs(shifts).mean() * 1e3:.3f} ms")
    assert np.abs(shifts).max() <= 1e-3 and np.abs(shifts).mean() <= 2e-4


def test_epochs_a_run_folder_does_not_keep_are_refused_naming_those_it_does():
    """Old run folders keep only their end; a run resumed from an old checkpoint lacks the
    epochs before the resume (NaN rows)."""
    from app.sims.common.config import ConfigError
    from app.sims.network.export_neuroml import epoch_connectivity
    _, cfg = load_run_config(PRESETS / "network" / "00-development-10x10-fast.yaml")
    end = {"final_W_pre": np.array([0]), "final_W_post": np.array([1]), "final_W": np.array([2.0e-9]),
           "epoch_mean_rate": np.zeros(3)}
    assert epoch_connectivity(cfg, end, 3)[2].tolist() == [2.0e-9]          # its end is held
    with pytest.raises(ConfigError, match="keeps only the connectivity at the end .epoch 3."):
        epoch_connectivity(cfg, end, 1)
    resumed = {**end, "epoch_radius": np.vstack([np.full((2, 100), np.nan), np.full((1, 100), 0.9)])}
    with pytest.raises(ConfigError, match="did not keep this epoch; it holds epoch 0 and epoch 3$"):
        epoch_connectivity(cfg, resumed, 2)
    assert epoch_connectivity(cfg, resumed, 0)[0].size == 0                  # radius 0.4: no overlap
    unkept = {**end, "epoch_radius": np.full((3, 100), np.nan)}
    with pytest.raises(ConfigError, match="it holds epoch 0 and its end .epoch 3.$"):
        epoch_connectivity(cfg, unkept, 1)
    assert epoch_connectivity(cfg, unkept, 3)[2].tolist() == [2.0e-9]
