"""What a tissue run is read as, on any mesh of elements: phase singularities (rotor cores),
conduction-velocity vectors and repolarisation maps; and a VTU time series for ParaView
(:mod:`.export_vtu` writes a run folder's).

Phase: θ = atan2(V(t−τ) − v_mid, V(t) − v_mid), a time-delay embedding (Gray et al. 1998; τ
about a quarter of the rotation period): resting tissue sits at one phase and every phase occurs
once around the tip of a rotating wave. Around each triangle (of a surface, or each face of a
tetrahedron) the wrapped phase differences sum to 2π·charge; charge ±1 marks a phase
singularity (on a volume: where a filament pierces the face). A broken wavefront's free end is
one too, so a singularity proves re-entry only once a non-re-entrant wave would have left.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from app.sims.cardiac.fem import face_keys, shape_gradients
from app.sims.cardiac.mesh import Mesh

V_MID = -40.0           # mV: the embedding's centre, between rest and plateau


def phase(v_now: np.ndarray, v_before: np.ndarray, v_mid: float = V_MID) -> np.ndarray:
    return np.arctan2(np.asarray(v_before, float) - v_mid, np.asarray(v_now, float) - v_mid)


def wrap(a: np.ndarray) -> np.ndarray:
    return (a + np.pi) % (2 * np.pi) - np.pi


def loops(mesh: Mesh) -> np.ndarray:
    """The triangles whose phase winding is counted: a surface's elements, a volume's faces
    (each once), none for cables and single cells; ordered by their lowest node (a pass over
    them reads the nodes' values nearly in order), each corner's column contiguous (a gather
    along a strided column takes twice as long)."""
    el = mesh.elements
    if el is None or el.shape[1] < 3:
        return np.zeros((0, 3), np.int64)
    if el.shape[1] == 3:
        tri = el
    else:
        faces = np.concatenate([el[:, [1, 2, 3]], el[:, [0, 2, 3]], el[:, [0, 1, 3]], el[:, [0, 1, 2]]])
        tri = faces[np.unique(face_keys(faces, mesh.n_cells), return_index=True)[1]]
    return np.asfortranarray(tri[np.argsort(tri.min(axis=1), kind="stable")])


def winding(t: np.ndarray) -> np.ndarray:
    """Charges of triangles given their corners' phases ``t`` (T, 3): the wrapped differences
    around each sum to 2π·charge, and as the raw differences sum to 0, the charge counts the
    differences wrapping adds 2π to (below −π) less those it takes 2π from (π and above),
    without a division or a rounding."""
    a, b, c = t[:, 0], t[:, 1], t[:, 2]
    q = np.zeros(len(t), np.int8)
    for d in (b - a, c - b, a - c):
        q += d < -np.pi
        q -= d >= np.pi
    return q


ON_AN_AXIS = 4          # a quadrant code bit: a point on a quadrant's edge


def quadrants(v_now: np.ndarray, v_before: np.ndarray, v_mid: float = V_MID) -> np.ndarray:
    """Each node's quadrant of the phase plane (V(t) − v_mid, V(t−τ) − v_mid) as a code 0–3,
    with :data:`ON_AN_AXIS` added where a coordinate is exactly 0. Compared with v_mid as a
    float64 (x − v_mid > 0 exactly when x > v_mid), without converting float32 V."""
    mid = np.float64(v_mid)
    now, before = np.asarray(v_now), np.asarray(v_before)
    return ((now > mid).view(np.uint8) | ((before > mid).view(np.uint8) << 1)
            | (((now == mid) | (before == mid)).view(np.uint8) << 2))


def may_wind(code: np.ndarray, triangles: np.ndarray) -> np.ndarray:
    """Indices of the triangles whose points do not all lie inside one open quadrant (codes from
    :func:`quadrants`): around the others the phase differences stay below π/2, so their
    winding is 0 whatever the rounding."""
    return np.flatnonzero(_may_wind(code, triangles))


def _may_wind(code: np.ndarray, triangles: np.ndarray) -> np.ndarray:
    c0, c1, c2 = code[triangles[:, 0]], code[triangles[:, 1]], code[triangles[:, 2]]
    return (c0 != c1) | (c0 != c2) | (c0 >= ON_AN_AXIS)


class WindingCandidates:
    """:func:`may_wind` over a sequence of quadrant codes of one mesh's ``triangles``, kept
    between calls: only the triangles around nodes whose code changed since the last call are
    tested again (a readout's codes change along the wavefronts, a few per cent of the nodes;
    testing every face of a 10^6-node volume takes tens of milliseconds)."""

    FULL_PASS = 0.25            # above this fraction of changed nodes a full pass is cheaper

    def __init__(self, triangles: np.ndarray, n_nodes: int):
        self.triangles, self.n_nodes = triangles, n_nodes
        self._around: np.ndarray | None = None       # the triangles around each node, at the first update
        self._code: np.ndarray | None = None
        self._may = np.zeros(len(triangles), bool)

    def _index(self) -> None:
        """The triangles around each node: ``_around[_first[v]:_first[v] + _count[v]]``."""
        corners = np.asarray(self.triangles).ravel(order="F")    # corner k of triangle i at k*T + i
        index = np.int32 if len(self.triangles) < 2 ** 31 else np.int64
        self._around = (np.argsort(corners, kind="stable") % max(len(self.triangles), 1)).astype(index)
        self._count = np.bincount(corners, minlength=self.n_nodes)
        self._first = np.concatenate([[0], np.cumsum(self._count)[:-1]])

    def __call__(self, code: np.ndarray) -> np.ndarray:
        """Indices of the triangles that may wind under ``code``, in order."""
        changed = None if self._code is None else np.flatnonzero(code != self._code)
        if changed is None or len(changed) > self.FULL_PASS * len(code):
            self._may = _may_wind(code, self.triangles)
        elif len(changed):
            if self._around is None:
                self._index()
            starts, counts = self._first[changed], self._count[changed]
            ends = np.cumsum(counts)
            slots = np.repeat(starts - ends + counts, counts) + np.arange(ends[-1])
            touched = self._around[slots]
            self._may[touched] = _may_wind(code, self.triangles[touched])
        self._code = code
        return np.flatnonzero(self._may)


def singularities(mesh: Mesh, v_now: np.ndarray, v_before: np.ndarray, triangles: np.ndarray | None = None,
                  v_mid: float = V_MID, candidates: WindingCandidates | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Positions (K, 3) (centroids of the charged triangles) and charges (K,) of the phase
    singularities; ``triangles`` from :func:`loops` (computed once per mesh). The winding is
    counted on the triangles :func:`may_wind` keeps (few: along the isolines V = v_mid), or
    ``candidates`` (of ``triangles``) keeps over a run."""
    tri = loops(mesh) if triangles is None else triangles
    code = quadrants(v_now, v_before, v_mid)
    tri = tri[candidates(code) if candidates is not None else may_wind(code, tri)]
    q = winding(phase(np.asarray(v_now)[tri], np.asarray(v_before)[tri], v_mid))
    hit = np.flatnonzero(q)
    return mesh.positions[tri[hit]].mean(axis=1), q[hit]


class SingularityTracker:
    """Phase singularities at every observed time from V now and V about ``delay`` ms before
    (the latest observation at least that old); ``now``: the latest positions."""

    def __init__(self, mesh: Mesh, delay: float):
        self.mesh, self.delay = mesh, float(delay)
        self.triangles = loops(mesh) if delay > 0 else np.zeros((0, 3), np.int64)
        self._candidates = WindingCandidates(self.triangles, mesh.n_cells) if self.active else None
        self._past: list[tuple[float, np.ndarray]] = []
        self._found: list[tuple[float, np.ndarray, np.ndarray]] = []
        self.now = np.zeros((0, 3))

    @property
    def active(self) -> bool:
        return len(self.triangles) > 0

    def observe(self, t: float, v: np.ndarray) -> None:
        if not self.active:
            return
        old = [k for k, (tk, _) in enumerate(self._past) if tk <= t - self.delay + 1e-9]
        if old:
            self._past = self._past[old[-1]:]
            pos, q = singularities(self.mesh, v, self._past[0][1], self.triangles, candidates=self._candidates)
            self._found.append((t, pos, q))
            self.now = pos
        self._past.append((t, np.array(v, np.float32)))

    def arrays(self) -> dict[str, np.ndarray]:
        """``ps_t``, ``ps_xyz``, ``ps_charge``: one row per singularity per observed time (none
        while tracking is off)."""
        if not self.active:
            return {}
        found = [(np.zeros(0), np.zeros((0, 3)), np.zeros(0, np.int8)), *self._found]
        return {"ps_t": np.concatenate([np.full(len(q), t) for t, _, q in found]),
                "ps_xyz": np.concatenate([p for _, p, _ in found]).reshape(-1, 3),
                "ps_charge": np.concatenate([q for _, _, q in found])}

    def state(self) -> dict[str, np.ndarray]:
        """What a checkpoint keeps: the rows so far, the latest positions and the observations
        the next ones look back to (``tracker_*``)."""
        if not self.active:
            return {}
        return {**{f"tracker_{k}": v for k, v in self.arrays().items()}, "tracker_now": self.now,
                "tracker_past_t": np.array([t for t, _ in self._past]),
                "tracker_past_v": np.array([v for _, v in self._past], np.float32).reshape(-1, self.mesh.n_cells)}

    def restore(self, state: dict[str, np.ndarray]) -> None:
        """Continue from :meth:`state` (checked by the caller)."""
        t, xyz, q = (np.asarray(state[f"tracker_ps_{k}"]) for k in ("t", "xyz", "charge"))
        self._found = [(float(t[i]), xyz[i:i + 1], q[i:i + 1].astype(np.int8)) for i in range(len(t))]
        self.now = np.asarray(state["tracker_now"], float).reshape(-1, 3)
        self._past = [(float(tk), np.asarray(vk, np.float32))
                      for tk, vk in zip(state["tracker_past_t"], state["tracker_past_v"])]


class VelocityField:
    """Conduction-velocity vectors at chosen nodes (all by default): the elements around those
    nodes and their basis gradients are found once, so a live view can ask for a few thousand
    arrows of a 10^6-node mesh at every frame. At each node the vector is ∇T/|∇T|² with ∇T the
    measure-weighted mean of its linear elements' activation-time gradients (elements with a
    node that never activated left out); NaN where no element or ∇T = 0."""

    def __init__(self, mesh: Mesh, nodes: np.ndarray | None = None):
        n = mesh.n_cells
        self.nodes = np.arange(n) if nodes is None else np.asarray(nodes, np.int64)
        el = mesh.elements if mesh.elements is not None else np.zeros((0, 2), np.int64)
        if nodes is not None and len(el):
            chosen = np.zeros(n, bool)
            chosen[self.nodes] = True
            el = el[chosen[el].any(axis=1)]
        self.elements, self.n = el, n
        self.grads, self.measure = shape_gradients(mesh.positions, el) if len(el) else (None, None)

    def __call__(self, activation: np.ndarray) -> np.ndarray:
        """(len(nodes), 3) vectors in mm/ms."""
        out = np.full((len(self.nodes), 3), np.nan)
        if self.grads is None:
            return out
        el = self.elements
        t = np.asarray(activation, float)[el]
        ok = np.isfinite(t).all(axis=1)
        g = np.einsum("eai,ea->ei", self.grads[ok], t[ok]) * self.measure[ok, None]
        nodes = el[ok].ravel()
        k = el.shape[1]
        total = np.stack([np.bincount(nodes, weights=np.repeat(g[:, i], k), minlength=self.n)[self.nodes]
                          for i in range(3)], 1)
        weight = np.bincount(nodes, weights=np.repeat(self.measure[ok], k), minlength=self.n)[self.nodes]
        grad_t = total / np.where(weight > 0, weight, np.nan)[:, None]
        size2 = np.einsum("ij,ij->i", grad_t, grad_t)
        good = np.isfinite(size2) & (size2 > 0)
        out[good] = grad_t[good] / size2[good, None]
        return out


def conduction_velocity(mesh: Mesh, activation: np.ndarray) -> np.ndarray:
    """Conduction-velocity vectors (N, 3), mm/ms, at every node (:class:`VelocityField`)."""
    return VelocityField(mesh)(activation)


def repolarisation(activation: np.ndarray, apd90: np.ndarray) -> np.ndarray:
    """Repolarisation times (ms): activation plus APD90 of the first beat (NaN where either is)."""
    return np.asarray(activation, float) + np.asarray(apd90, float)


CELL_TYPES = {2: "line", 3: "triangle", 4: "tetra"}


def write_vtu_series(base: str | Path, mesh: Mesh, times: np.ndarray, series: dict[str, np.ndarray],
                     maps: dict[str, np.ndarray]) -> list[Path]:
    """``base``.pvd and one ``base``_NNNN.vtu per time through meshio: the mesh's elements, the
    per-node ``series`` (each (T, N)) at each time and the per-node ``maps`` ((N,) or (N, 3)) in
    every file. Returns the files written, the .pvd first."""
    import meshio

    if mesh.elements is None:
        raise ValueError(f"a {mesh.kind} has no elements to write")
    base = Path(base)
    cells = [(CELL_TYPES[mesh.elements.shape[1]], np.asarray(mesh.elements, np.int64))]
    files = []
    for i in range(len(times)):
        data = {k: np.asarray(v, float) for k, v in maps.items()}
        data.update({k: np.asarray(v[i], float) for k, v in series.items()})
        path = base.with_name(f"{base.stem}_{i:04d}.vtu")
        meshio.write(path, meshio.Mesh(mesh.positions, cells, point_data=data), binary=True)
        files.append(path)
    rows = "\n".join(f'    <DataSet timestep="{t!r}" part="0" file="{p.name}"/>'
                     for t, p in zip(np.asarray(times, float).tolist(), files))
    pvd = base.with_suffix(".pvd")
    pvd.write_text('<?xml version="1.0"?>\n<VTKFile type="Collection" version="0.1">\n  <Collection>\n'
                   f"{rows}\n  </Collection>\n</VTKFile>\n")
    return [pvd, *files]
