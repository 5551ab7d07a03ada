"""The CUDA engine on imported SBML: general laws (float), events in the kernel (time events at
their instant, species triggers after every reaction) and assignment-rule species, against the
compiled CPU engine (GPU machine only)."""

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("libsbml")

from app.sims.ssa.config import EnsembleSettings, SSAConfig  # noqa: E402
from app.sims.ssa.dsmts import suite_dir  # noqa: E402
from app.sims.ssa.simulation import SSASimulation  # noqa: E402
from app.sims.ssa.stats import common_histograms, distance, null_band  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("cuda_context")]
DATA = Path(__file__).parent / "data"
DSMTS_19 = suite_dir() / "00019" / "00019-sbml-l3v2.xml"


def finish(path: Path, backend: str, realizations: int, seed: int, t_end: float, samples: int):
    cfg = SSAConfig(sbml=str(path), ensemble=EnsembleSettings(
        realizations=realizations, t_end=t_end, samples=samples, seed=seed, snapshot_times=[]))
    sim = SSASimulation.from_config(cfg, backend)
    while not sim.finished:
        sim.advance()
    sim.close()
    return sim


def test_general_law_and_events_match_the_cpu_engine():
    """Final histograms of both species inside the 99 % self-distance band, and the time event
    applied to every realization at t = 2.5 on both engines."""
    gpu = finish(DATA / "hill-events.xml", "cuda", 1 << 16, 21, 5.0, 11)
    cpu = finish(DATA / "hill-events.xml", "cpu", 1 << 13, 22, 5.0, 11)
    for s in range(2):
        ha, hb = common_histograms(gpu.final[:, s], cpu.final[:, s], 12)
        pooled = (ha.counts + hb.counts) / (ha.total + hb.total)
        assert distance(ha.counts, hb.counts) <= null_band(pooled, ha.total, hb.total, 0.999)
    assert gpu.final[:, 1].max() < 25                       # the species event reset Q each time
    k = int(np.argmin(np.abs(gpu.times - 2.5)))
    assert gpu.mean[k, 0] - gpu.mean[k - 1, 0] > 35          # every realization kicked at 2.5


@pytest.mark.skipif(not DSMTS_19.exists(), reason="DSMTS suite not beside the checkout")
def test_assignment_rule_species_on_the_device():
    sim = finish(DSMTS_19, "cuda", 4096, 5, 10.0, 3)
    assert np.array_equal(sim.final[:, 1], 2 * sim.final[:, 0])   # y = 2 X, set in the kernel


def test_count_overflow_is_refused(tmp_path):
    """Counts past 2^30 stop the CUDA run with a message within 64 reactions of crossing it (the
    CPU engine holds 64 bits)."""
    from .test_sbml import sbml

    text = sbml(species='<species id="X" compartment="cell" initialAmount="1073000000" '
                        'hasOnlySubstanceUnits="true" boundaryCondition="false" constant="false"/>',
                reactions='<reaction id="grow" reversible="false"><listOfReactants><speciesReference '
                          'species="X" stoichiometry="1" constant="true"/></listOfReactants><listOfProducts>'
                          '<speciesReference species="X" stoichiometry="2" constant="true"/></listOfProducts>'
                          '<kineticLaw><math xmlns="http://www.w3.org/1998/Math/MathML"><apply><times/>'
                          '<cn>1</cn><ci>X</ci></apply></math></kineticLaw></reaction>')
    path = tmp_path / "grow.xml"
    path.write_text(text)
    sim = finish(path, "cuda", 64, 1, 1.0, 2)                 # stops at the first sample time
    assert sim.stopped is not None and "count of X would exceed 1,073,741,824" in sim.stopped
    if sim.final is not None:
        assert (sim.final[:, 0] > 0).all()                       # never wrapped round


def test_constant_law_is_guarded_on_the_device(tmp_path):
    """X -> 0 at a constant rate 40 from 50 molecules: the kernel's guard keeps X at 0 once it
    runs out (no negative count, no overflow stop), and the mean at t = 0.5 is E max(0, 50 - N),
    N ~ Poisson(20), within 4 standard errors."""
    from math import lgamma, log

    from .test_sbml import CONSTANT_DRAIN, sbml

    path = tmp_path / "drain.xml"
    path.write_text(sbml(reactions=CONSTANT_DRAIN, parameters='<parameter id="k" value="40" constant="true"/>'))
    sim = finish(path, "cuda", 1 << 14, 3, 3.0, 7)
    assert sim.stopped is None and sim.final.min() >= 0 and (sim.final[:, 0] == 0).mean() > 0.99
    pmf = np.exp([k * log(20.0) - 20.0 - lgamma(k + 1) for k in range(50)])
    exact = float(np.sum((50 - np.arange(50)) * pmf))
    assert abs(sim.mean[1, 0] - exact) < 4 * np.sqrt(sim.var[1, 0] / (1 << 14))
