"""The N-version benchmark slab (Niederer et al. 2011) through the file-mesh path, against the
eleven codes' consensus for the same spacing and step; CUDA against the CPU on the same mesh."""

import os

import numpy as np
import pytest

from app.sims.cardiac import nversion


def _within_consensus(result, dx, sds=2.0):
    """Every point within ``sds`` standard deviations of the codes' spread at this dx."""
    for k, (mean, sd) in nversion.CONSENSUS[dx].items():
        got = result["activation_ms"][k]
        assert abs(got - mean) <= sds * sd, f"{k}: {got:.2f} ms vs consensus {mean} ± {sd} at dx {dx}"


@pytest.mark.slow
def test_nversion_dx_05_matches_the_consensus(tmp_path):
    r = nversion.run(tmp_path, 0.5, dt=0.01, t_end=170.0)
    assert r["stopped"] is None and r["nodes"] == 41 * 15 * 7
    assert r["mesh_quality"]["min_dihedral_deg"] == pytest.approx(45.0)
    _within_consensus(r, 0.5)
    order = r["activation_ms"]                  # the far corner last, the stimulus corner first
    assert order["P1"] < 2.5 and order["P8"] == max(order.values())


@pytest.mark.slow
def test_nversion_dx_05_split_every_tenth_of_a_ms_stays_within_the_consensus(tmp_path):
    """Strang splitting at 0.1 ms (cell substeps of 0.02 ms, RKC1 diffusion): every point within
    one SD of the codes' spread, as scripts/cardiac/split_study.py recorded, and the far corner
    still last."""
    r = nversion.run(tmp_path, 0.5, dt=0.02, t_end=170.0, split_dt=0.1, split="strang")
    assert r["stopped"] is None
    _within_consensus(r, 0.5, sds=1.0)
    assert r["activation_ms"]["P8"] == max(r["activation_ms"].values())


@pytest.mark.skipif(not os.environ.get("BIOGPU_NVERSION_FINE"), reason="4 min on 2 cores: BIOGPU_NVERSION_FINE=1")
def test_nversion_dx_02_matches_the_consensus(tmp_path):
    r = nversion.run(tmp_path, 0.2, dt=0.01, t_end=80.0)
    _within_consensus(r, 0.2)


@pytest.mark.gpu
def test_cuda_matches_cpu_on_a_file_mesh(tmp_path, cuda_context):
    """The FE weights (width 6, negative-free here) and D = 1 on the device: float64 CUDA against the
    compiled CPU engine on the slab, first 30 ms."""
    from .helpers import run
    path, points = nversion.write_slab(tmp_path, 0.5)
    text = nversion.config_text(path, points, 0.01, 30.0)
    text = text.replace(f"path: {path.name}", f"path: {path}").replace("domain: cardiac\n", "")
    a_cpu, _ = run(text, "cpu")
    a_gpu, _ = run(text, "cuda")
    np.testing.assert_allclose(a_gpu["activation_time"], a_cpu["activation_time"], atol=1e-6, equal_nan=True)
    np.testing.assert_allclose(a_gpu["V_final"], a_cpu["V_final"], atol=1e-6)
