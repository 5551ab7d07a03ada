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
            assert _si(cell.refract) == pytest.approx(culture.trefract[i] * cfg.run.dt, rel=1e-12)
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
