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
            assert _si(c.delay) == pytest.approx(delay_steps * cfg.run.dt, rel=1e-12)
            got.append((neuron_of[(pre_pop, int(pre_k))], neuron_of[(post_pop, int(post_k))], c.weight * 1e-9))
    want = sorted(zip(data["final_W_pre"].tolist(), data["final_W_post"].tolist(), np.abs(data["final_W"]).tolist()))
    assert len(want) > 50 and len(got) == len(want)
    got.sort()
    assert [g[:2] for g in got] == [w[:2] for w in want]
    np.testing.assert_allclose([g[2] for g in got], [w[2] for w in want], rtol=1e-12)
