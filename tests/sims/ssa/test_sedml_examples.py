"""Third-party COMBINE/OMEX archives (BioSimulators' test-suite examples, BioModels) run end to end.

The archives are not part of this repository: put them in a folder and set
``BIOGPU_OMEX_EXAMPLES`` to it (skipped without). Each archive either runs, writing every report
(with finite, non-negative counts) and plot its SED-ML asks for, or is refused with a
SedmlError naming the SED-ML element (e.g. a deterministic KiSAO algorithm, by id and name).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("libsedml")
h5py = pytest.importorskip("h5py")

from app.omex import run_archive  # noqa: E402
from app.sims.ssa.sedml import SedmlError  # noqa: E402

FOLDER = os.environ.get("BIOGPU_OMEX_EXAMPLES", "")
ARCHIVES = sorted(Path(FOLDER).glob("*.omex")) if FOLDER else []
pytestmark = pytest.mark.skipif(not ARCHIVES, reason="set BIOGPU_OMEX_EXAMPLES to a folder of .omex files")


@pytest.mark.parametrize("archive", ARCHIVES, ids=[a.stem for a in ARCHIVES])
def test_third_party_archive(tmp_path, archive):
    try:
        result = run_archive(archive, tmp_path / "out", "cpu", say=lambda s: None)
    except SedmlError as exc:
        assert exc.element and exc.reason, exc
        pytest.xfail(f"refused as expected of what is not supported: {exc}")
    assert result.reports or result.plots
    for plot in result.plots:
        assert plot.stat().st_size > 10_000                   # a drawn figure, not an empty frame
    if not result.reports:
        return
    with h5py.File(tmp_path / "out" / "reports.h5") as fh:
        names: list[str] = []
        fh.visititems(lambda name, obj: names.append(name) if isinstance(obj, h5py.Dataset) else None)
        assert names
        for name in names:
            data = fh[name][:]
            assert np.isfinite(data).any() and (np.nan_to_num(data, nan=0.0) >= 0).all(), name
        expected = tmp_path / "out" / "archive" / "reports.h5"      # an archive's own expected results
        if expected.is_file():
            with h5py.File(expected) as ref:
                reports: list[str] = []
                ref.visititems(lambda name, obj: reports.append(name) if isinstance(obj, h5py.Dataset)
                               and obj.attrs.get("_type") == "SedReport" else None)
                for name in reports:                   # the same layout: path, shape, labels
                    assert fh[name].shape == ref[name].shape, name
                    assert list(fh[name].attrs["sedmlDataSetLabels"]) == list(ref[name].attrs["sedmlDataSetLabels"])
