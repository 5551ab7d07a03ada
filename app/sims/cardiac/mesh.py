"""Meshes as cells with neighbour lists: the icosahedral geodesic sphere, rectangular sheets,
and a single cell. The diffusion operator is the paper's Eq. 7,

    (L V)_k = D · Σ_j (V_j − V_k) / d_jk²

over the mesh neighbours j of cell k, with neighbours and weights D/d² in fixed-width padded
arrays (padding points at the cell itself with weight 0, so it adds nothing). Meshes from
files (:mod:`app.sims.cardiac.fem`) store linear finite-element weights in the same arrays.

On a mesh of hexagons (the sphere) the sum equals 1.5·d²·∇²V for smooth V, so the sphere's
effective diffusivity is 1.5·D; on the square sheet it is D. Both follow Eq. 7 as written.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.sims.common.progress import SetupProgress

# Mean neighbour spacing of the unit level-L sphere is about 1.8/2^L... measured, not assumed:
# see Mesh.spacing. The default radius gives a mean spacing of 0.2 mm at level 7.
DEFAULT_SPACING_MM = 0.2


@dataclass(frozen=True)
class Mesh:
    """Cells, their positions (mm) and padded neighbour lists."""

    kind: str
    positions: np.ndarray        # (N, 3) mm
    neighbours: np.ndarray       # (N, K) int32, padded with the cell's own index
    inv_d2: np.ndarray           # (N, K) 1/d² in mm⁻², 0 in padding
    faces: np.ndarray | None = None      # (F, 3) triangles for drawing (sphere)
    shape: tuple[int, int] | None = None  # (ny, nx) for sheets
    weights_carry_D: bool = False         # FE meshes: inv_d2 holds the full weights (1/ms), D = 1
    elements: np.ndarray | None = None    # FE meshes: (E, 3|4) triangles or tetrahedra
    element_tags: np.ndarray | None = None  # (E,) region tags from the file

    @property
    def n_cells(self) -> int:
        return len(self.positions)

    @property
    def width(self) -> int:
        return self.neighbours.shape[1]

    @property
    def degree(self) -> np.ndarray:
        return (self.inv_d2 > 0).sum(axis=1)

    def spacing(self) -> np.ndarray:
        """Distance to each neighbour (mm), padding excluded."""
        mask = self.inv_d2 > 0
        return 1.0 / np.sqrt(self.inv_d2[mask])

    def laplacian(self, v: np.ndarray, D: float) -> np.ndarray:
        """Eq. 7's diffusion term for values ``v`` (N,) or (..., N)."""
        return D * np.sum(self.inv_d2 * (v[..., self.neighbours] - v[..., None]), axis=-1)

    def matrix(self, D: float) -> np.ndarray:
        """The operator as a dense matrix (small meshes, for tests)."""
        n = self.n_cells
        m = np.zeros((n, n))
        rows = np.repeat(np.arange(n), self.width)
        np.add.at(m, (rows, self.neighbours.ravel()), D * self.inv_d2.ravel())
        m[np.arange(n), np.arange(n)] -= D * self.inv_d2.sum(axis=1)
        return m


def _pad_neighbours(n: int, edges: np.ndarray, lengths: np.ndarray, width: int | None = None):
    """Padded (N, K) neighbour and 1/d² arrays from undirected ``edges`` (E, 2)."""
    both = np.concatenate([edges, edges[:, ::-1]])
    dist = np.concatenate([lengths, lengths])
    order = np.lexsort((both[:, 1], both[:, 0]))
    both, dist = both[order], dist[order]
    counts = np.bincount(both[:, 0], minlength=n)
    k = int(width or counts.max())
    start = np.concatenate([[0], np.cumsum(counts)[:-1]])
    slot = np.arange(len(both)) - start[both[:, 0]]
    nbr = np.repeat(np.arange(n, dtype=np.int32)[:, None], k, axis=1)
    inv = np.zeros((n, k))
    nbr[both[:, 0], slot] = both[:, 1]
    inv[both[:, 0], slot] = 1.0 / dist ** 2
    return nbr, inv


def icosphere(level: int, radius_mm: float | None = None) -> Mesh:
    """Geodesic sphere: the icosahedron subdivided ``level`` times (10·4^level + 2 cells; level 7
    is the paper's 163,842). Default radius: mean neighbour spacing DEFAULT_SPACING_MM."""
    if not 0 <= level <= 9:
        raise ValueError("sphere level must be 0..9")
    t = (1 + 5 ** 0.5) / 2
    verts = np.array([[-1, t, 0], [1, t, 0], [-1, -t, 0], [1, -t, 0], [0, -1, t], [0, 1, t],
                      [0, -1, -t], [0, 1, -t], [t, 0, -1], [t, 0, 1], [-t, 0, -1], [-t, 0, 1]], float)
    faces = np.array([[0, 11, 5], [0, 5, 1], [0, 1, 7], [0, 7, 10], [0, 10, 11], [1, 5, 9],
                      [5, 11, 4], [11, 10, 2], [10, 7, 6], [7, 1, 8], [3, 9, 4], [3, 4, 2],
                      [3, 2, 6], [3, 6, 8], [3, 8, 9], [4, 9, 5], [2, 4, 11], [6, 2, 10],
                      [8, 6, 7], [9, 8, 1]], np.int64)
    verts /= np.linalg.norm(verts, axis=1, keepdims=True)
    report = SetupProgress(f"building the level-{level} sphere", level + 2)   # + edges, neighbours
    for done in range(level):
        report(done)
        e = np.concatenate([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]])
        e.sort(axis=1)
        uniq, inverse = np.unique(e, axis=0, return_inverse=True)
        inverse = inverse.ravel()
        mid = verts[uniq[:, 0]] + verts[uniq[:, 1]]
        mid /= np.linalg.norm(mid, axis=1, keepdims=True)
        base = len(verts)
        verts = np.concatenate([verts, mid])
        nf = len(faces)
        m01, m12, m20 = (base + inverse[:nf], base + inverse[nf:2 * nf], base + inverse[2 * nf:])
        a, b, c = faces[:, 0], faces[:, 1], faces[:, 2]
        faces = np.concatenate([np.stack([a, m01, m20], 1), np.stack([b, m12, m01], 1),
                                np.stack([c, m20, m12], 1), np.stack([m01, m12, m20], 1)])
    report(level)
    edges = np.concatenate([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]])
    edges.sort(axis=1)
    edges = np.unique(edges, axis=0)
    unit_len = np.linalg.norm(verts[edges[:, 0]] - verts[edges[:, 1]], axis=1)
    if radius_mm is None:
        radius_mm = DEFAULT_SPACING_MM / unit_len.mean()
    pos = verts * radius_mm
    report(level + 1)
    nbr, inv = _pad_neighbours(len(pos), edges, unit_len * radius_mm, width=6)
    return Mesh("sphere", pos, nbr, inv, faces=faces.astype(np.int32))


def default_radius(level: int) -> float:
    """Radius (mm) that gives a mean spacing of DEFAULT_SPACING_MM at ``level``."""
    m = icosphere(min(level, 5), 1.0)
    ratio = 2.0 ** (level - min(level, 5))          # spacing halves per level
    return DEFAULT_SPACING_MM * ratio / m.spacing().mean()


def sheet(nx: int, ny: int, dx_mm: float) -> Mesh:
    """Rectangular sheet of nx × ny cells, spacing dx, 4 neighbours, no-flux edges.
    Cell (ix, iy) has index iy·nx + ix."""
    if nx < 1 or ny < 1 or dx_mm <= 0:
        raise ValueError("sheet needs nx, ny >= 1 and dx > 0")
    idx = np.arange(nx * ny).reshape(ny, nx)
    edges = np.concatenate([np.stack([idx[:, :-1].ravel(), idx[:, 1:].ravel()], 1),
                            np.stack([idx[:-1, :].ravel(), idx[1:, :].ravel()], 1)])
    iy, ix = np.divmod(np.arange(nx * ny), nx)
    pos = np.stack([ix * dx_mm, iy * dx_mm, np.zeros(nx * ny)], 1)
    nbr, inv = _pad_neighbours(nx * ny, edges, np.full(len(edges), dx_mm), width=4)
    return Mesh("sheet", pos, nbr, inv, shape=(ny, nx))


def single_cell() -> Mesh:
    return Mesh("single", np.zeros((1, 3)), np.zeros((1, 1), np.int32), np.zeros((1, 1)))
