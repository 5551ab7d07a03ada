"""SSA data the panel moves around: exported arrays and a comparison ensemble's histograms."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from app.sims.common.output import save_csv, save_npz
from app.sims.ssa.stats import Histogram

HISTOGRAM_KEYS = ("times", "hist_species", "hist_lo", "hist_width", "hist_counts")


@dataclass(frozen=True)
class EnsembleHistograms:
    """Per-sample histograms of one ensemble (a saved run, or a live CPU reference)."""

    label: str
    times: np.ndarray           # (k,)
    species: tuple[str, ...]    # names of the histogram species
    lo: np.ndarray              # (k, H)
    width: np.ndarray           # (k, H)
    counts: np.ndarray          # (k, H, bins)

    @classmethod
    def from_npz(cls, path: str | Path) -> "EnsembleHistograms":
        """Read ``results.npz`` (from ``python -m app run`` or Export NPZ)."""
        with np.load(path, allow_pickle=False) as data:
            missing = [k for k in HISTOGRAM_KEYS if k not in data.files]
            if missing:
                raise ValueError(f"{path}: not an SSA results file (missing {', '.join(missing)})")
            return cls(Path(path).name, np.asarray(data["times"], float),
                       tuple(str(s) for s in data["hist_species"]), data["hist_lo"],
                       data["hist_width"], data["hist_counts"])

    @classmethod
    def from_frame(cls, frame, label: str) -> "EnsembleHistograms":
        names = tuple(frame.species[i] for i in frame.hist_species)
        return cls(label, np.asarray(frame.times, float), names, frame.hist_lo,
                   frame.hist_width, frame.hist_counts)

    def histogram(self, k: int, name: str) -> Histogram | None:
        """The histogram of species ``name`` at sample ``k``, or None if there is none."""
        if name not in self.species or not 0 <= k < len(self.times):
            return None
        h = self.species.index(name)
        return Histogram(int(self.lo[k, h]), int(self.width[k, h]), self.counts[k, h])


def frame_arrays(frame) -> dict[str, np.ndarray]:
    """The arrays of an SSA frame under the keys of ``results.npz``."""
    arrays = {
        "times": np.asarray(frame.times), "species": np.array(frame.species),
        "mean": np.asarray(frame.mean), "std": np.asarray(frame.std),
        "hist_species": np.array([frame.species[i] for i in frame.hist_species]),
        "hist_lo": np.asarray(frame.hist_lo), "hist_width": np.asarray(frame.hist_width),
        "hist_counts": np.asarray(frame.hist_counts),
    }
    if frame.done and frame.final is not None:
        arrays["final"] = np.asarray(frame.final)
    if frame.grid_index is not None:
        arrays["grid_index"] = np.asarray(frame.grid_index)
    return arrays


def export_npz(path: str | Path, frame) -> Path:
    return save_npz(path, frame_arrays(frame))


def export_csv(path: str | Path, frame) -> Path:
    """One row per sample time: time, then mean and std of every species."""
    header = ["time"]
    columns = [np.asarray(frame.times)]
    for i, name in enumerate(frame.species):
        header += [f"mean_{name}", f"std_{name}"]
        columns += [frame.mean[:, i], frame.std[:, i]]
    return save_csv(path, header, columns)
