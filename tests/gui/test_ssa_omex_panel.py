"""The SSA panel opens a COMBINE/OMEX archive (its first ensemble, SED-ML changes applied) and
exports a finished run as one that re-imports to the same numbers."""

from __future__ import annotations

import pytest

pytest.importorskip("PySide6", reason="the GUI extra is not installed")
pytest.importorskip("libsedml")
pytest.importorskip("libcombine")
h5py = pytest.importorskip("h5py")

pytestmark = pytest.mark.gui


def test_open_omex_then_export_omex(ssa, tmp_path, run_to_end):
    import numpy as np

    from app.omex import run_archive
    from app.sims.ssa.dsmts import load_case, suite_dir
    from app.sims.ssa.config import EnsembleSettings
    from app.sims.ssa.sedml_export import pack_sbml

    model = suite_dir() / "00001" / "00001-sbml-l3v2.xml"
    if not model.is_file():
        pytest.skip("DSMTS suite not found")
    archive = pack_sbml(load_case("00001").model, tmp_path / "bd.omex",
                        EnsembleSettings(realizations=48, t_end=5.0, samples=6, seed=99))
    assert "*.omex" in ssa.open_filter
    ssa.load_config(archive)
    cfg = ssa.current_config()
    assert (cfg.ensemble.realizations, cfg.ensemble.t_end, cfg.ensemble.samples, cfg.ensemble.seed) == \
        (48, 5.0, 6, 99)
    assert cfg.sbml is not None and cfg.network().species == ("X",)
    with pytest.raises(Exception, match="no finished run"):
        ssa.export_omex(tmp_path / "early.omex")
    run_to_end(ssa)
    out = ssa.export_omex(tmp_path / "run.omex")
    run_archive(out, tmp_path / "again", "cpu", say=lambda s: None, png=False)
    with h5py.File(tmp_path / "again" / "reports.h5") as fh:
        ds = fh["simulation.sedml/statistics"]
        mean = ds[list(ds.attrs["sedmlDataSetLabels"]).index("X mean")]
    if ssa.last_run[2]["backend"] == "cpu":             # the same engine: the same numbers
        np.testing.assert_array_equal(mean, ssa.last_frame.mean[:, 0])
