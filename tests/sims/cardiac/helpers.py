import numpy as np

from app.sims.cardiac.config import load_config
from app.sims.cardiac.simulation import CardiacSimulation
from app.sims.common.config import parse_yaml


def config(text: str):
    return load_config(parse_yaml("domain: cardiac\n" + text, "<test>"))


def run(text: str, backend: str = "cpu"):
    return finish(CardiacSimulation(config(text), backend))


def finish(sim: CardiacSimulation):
    """Run ``sim`` to its end, close it, and return its results (arrays, summary)."""
    while not sim.finished:
        sim.advance()
    arrays, summary = sim.results()
    sim.close()
    return arrays, summary


def cable(dx: float, length: float = 6.0, method: str = "rlfe", dt: float = 0.01, t_end: float = 25.0,
          extra: str = "") -> str:
    nx = int(round(length / dx))
    return (f"mesh: {{kind: sheet, nx: {nx}, ny: 1, dx_mm: {dx}}}\n"
            f"protocol: {{t_end: {t_end}, stimuli: [{{start: 1, duration: 2, amplitude: -40, "
            f"region: {{kind: rect, x1: 0.45}}}}]}}\n"
            f"solver: {{method: {method}, dt: {dt}, at: 0.1, rt: 0.01, precision: float64}}\n"
            f"output: {{random_probes: 0, probe_cells: [0, {nx // 2}], dt_save: 0.1}}\n" + extra)


def conduction_velocity(arrays, dx: float, lo: float = 1.5, hi: float = 4.5) -> float:
    at = arrays["activation_time"]
    x = np.arange(len(at)) * dx
    sel = (x > lo) & (x < hi)
    return float(np.polyfit(at[sel], x[sel], 1)[0])


def assert_outputs_close(got, ref, rtol: float) -> None:
    """Every model output of ``got`` against ``ref`` (rows), relative to each value or to a
    millionth of the output's largest, at the 99.9th percentile of the finite reference values
    (a few random states sit next to removable singularities)."""
    for q, r in enumerate(ref):
        ok = np.isfinite(r)
        scale = np.maximum(np.abs(r[ok]), np.abs(r[ok]).max() * 1e-6 + 1e-300)
        err = np.abs(got[q][ok] - r[ok]) / scale
        assert np.quantile(err, 0.999) < rtol, (q, np.quantile(err, 0.999))
