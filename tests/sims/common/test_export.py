"""``biogpu export``: a run folder's domain picks the exporter; formats a domain does not
write, and folders that are not runs, are refused by name."""

import numpy as np
import pytest

from app.cli import main
from app.sims.channel import cpu
from app.sims.common.config import ConfigError
from app.sims.common.export import export_run
from app.sims.common.session import write_run_outputs
from app.sims.common.simulation import PRESETS, load_run_config

pytest.importorskip("neuroml")
pytest.importorskip("pynwb")


@pytest.fixture(scope="module")
def channel_run(tmp_path_factory):
    """A channel run folder as ``biogpu run`` writes it (the fit replaced by the true values)."""
    _, cfg = load_run_config(PRESETS / "channel" / "lesson-model-a-small.yaml")
    model = cfg.model_()
    data = cfg.fit_data(model)
    best = model.true_values * 1.02
    arrays = {"best_params": best, "target": data.target,
              "best_traces": cpu.simulate(model, data.protocol, best[None])[0]}
    return write_run_outputs(tmp_path_factory.mktemp("runs") / "fit", cfg, arrays, {})


def test_channel_run_exports_to_neuroml_and_nwb(channel_run, capsys):
    assert main(["export", str(channel_run), "--to", "neuroml"]) == 0
    assert main(["export", str(channel_run), "--to", "nwb", "-o", str(channel_run / "fit.nwb")]) == 0
    out = capsys.readouterr().out
    assert "fit/export/fit.nml" in out and "fit.nwb" in out and "valid" not in out
    assert b"<ionChannelHH" in (channel_run / "export" / "fit.nml").read_bytes()     # model A: one gate
    from app.sims.channel.recordings import read_nwb
    rec = read_nwb(channel_run / "fit.nwb")
    assert np.isfinite(rec.currents).all() and rec.currents.shape[0] > 1


def test_formats_a_domain_does_not_write_are_refused_by_name(channel_run, tmp_path, capsys):
    with pytest.raises(ConfigError, match="cannot be exported to cellml; this domain exports to: neuroml, nwb"):
        export_run(channel_run, "cellml")
    with pytest.raises(ConfigError, match="--epoch: a .* run's neuroml export has no epochs to choose"):
        export_run(channel_run, "neuroml", epoch=1)
    assert main(["export", str(tmp_path), "--to", "nwb"]) == 2
    assert "not a run folder (no config.yaml)" in capsys.readouterr().err
