"""DSMTS cases packed by us as COMBINE/OMEX archives (SBML + SED-ML ensemble with mean and SD data
generators) and run through ``biogpu omex``: the report equals the suite runner's own statistics
for the same engine and seed (identical numbers), and passes the suite runner's verdict (max |Z|
and max |Y / sd(Y)| against Sidak's threshold, false-alarm rate <= 1e-4 per case)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("libsedml")
pytest.importorskip("libcombine")
h5py = pytest.importorskip("h5py")

from app.omex import run_archive  # noqa: E402
from app.sims.ssa import dsmts  # noqa: E402
from app.sims.ssa.config import EnsembleSettings  # noqa: E402
from app.sims.ssa.sedml_export import pack_sbml  # noqa: E402

CASES = [c for c in ("00001", "00004", "00011", "00020", "00027") if c in dsmts.cases()]
pytestmark = pytest.mark.skipif(not CASES, reason=f"DSMTS suite not found at {dsmts.suite_dir()}")
N = 1000


@pytest.mark.parametrize("name", CASES)
def test_dsmts_case_as_omex(tmp_path, name):
    case = dsmts.load_case(name)
    seed = 31000 + int(name)
    ensemble = EnsembleSettings(realizations=N, t_end=float(case.times[-1]), samples=len(case.times), seed=seed)
    archive = pack_sbml(case.model, tmp_path / f"{name}.omex", ensemble)
    run_archive(archive, tmp_path / "out", "cpu", say=lambda s: None, png=False)
    with h5py.File(tmp_path / "out" / "reports.h5") as fh:
        ds = fh["simulation.sedml/statistics"]
        labels, data = list(ds.attrs["sedmlDataSetLabels"]), ds[:]
    np.testing.assert_array_equal(data[labels.index("time")], case.times)
    reference = dsmts.run_case(case, "cpu", realizations=N, seed=seed)
    tested = case.sd > 0
    for j, s in enumerate(case.species):
        mean, sd = data[labels.index(f"{s} mean")], data[labels.index(f"{s} sd")]
        with np.errstate(divide="ignore", invalid="ignore"):
            z = np.where(tested[:, j], np.sqrt(N) * (mean - case.mean[:, j]) / case.sd[:, j], np.nan)
            y = np.where(tested[:, j], np.sqrt(N / 2) * (sd**2 * N / (N - 1) / case.sd[:, j] ** 2 - 1), np.nan)
        np.testing.assert_array_equal(z, reference.z[:, j])          # the same run, bit for bit
        np.testing.assert_allclose(y, reference.y[:, j], rtol=1e-9, atol=1e-9)
    assert reference.verdict.passed, (name, reference.verdict.describe())
