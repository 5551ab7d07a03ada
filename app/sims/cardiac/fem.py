"""Anisotropic monodomain diffusion by linear finite elements with a lumped mass, written into
the engines' padded neighbour lists.

With P1 stiffness K (each element's conductivity tensor σ = σ_t I + (σ_l − σ_t) f fᵀ
+ (σ_n − σ_t) n nᵀ, f the fibre, s the sheet direction (in the sheet, across the fibres),
n = f × s the sheet normal) and lumped mass m_k (a (d+1)-th of
each element's measure at its nodes), the semi-discrete monodomain equation

    χ Cm dV_k/dt = −(K V)_k / m_k − χ I_ion

gives, since every row of K sums to zero, (L V)_k = Σ_j w_kj (V_j − V_k) with
w_kj = −K_kj / (χ Cm m_k): the form :class:`~app.sims.cardiac.mesh.Mesh` stores. Units: σ in
mS/mm, χ in mm⁻¹, Cm in µF/mm², so σ/(χ Cm) is in mm²/ms and w in 1/ms. The weights carry the
whole diffusivity: the engines multiply them by D = 1 (``Mesh.weights_carry_D``).

On a surface (triangles in 3-D) gradients are taken in each triangle's plane; σ acts on them
and sheets, normal to the surface, play no part.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from app.sims.cardiac.mesh import Mesh
from app.sims.cardiac.mesh_io import MeshFileError, RawMesh, element_edges, quality, read_mesh

ZERO_WEIGHT = 1e-12        # |w| below this times the row's largest is structural zero (dropped)


@dataclass(frozen=True)
class Tissue:
    """Conductivities along fibres, across them in the sheet (along the sheet direction) and
    normal to the sheet (mS/mm), surface-to-volume ratio χ (1/mm) and membrane capacitance Cm (µF/mm²)."""

    sigma_l: float = 0.34
    sigma_t: float = 0.06
    sigma_n: float = 0.06
    chi: float = 140.0
    cm: float = 0.01
    tag_scale: tuple[tuple[int, float], ...] = ()   # (element tag, factor on σ), e.g. a scar at 0

    @property
    def isotropic(self) -> bool:
        return self.sigma_l == self.sigma_t == self.sigma_n

    def diffusivity(self, sigma: float) -> float:
        """σ/(χ Cm), mm²/ms."""
        return sigma / (self.chi * self.cm)


UNIT_TISSUE = Tissue(1.0, 1.0, 1.0, 1.0, 1.0)     # σ/(χ Cm) = 1: the built-in meshes' weights, per unit D


def conductivity(raw: RawMesh, tissue: Tissue) -> np.ndarray:
    """Per-element σ tensors (E, 3, 3), mS/mm."""
    e = len(raw.elements)
    sig = np.repeat(np.eye(3)[None] * tissue.sigma_t, e, axis=0)
    if tissue.sigma_l != tissue.sigma_t:
        if raw.fibres is None:
            raise MeshFileError(f"{raw.path}: conductivity along fibres ({tissue.sigma_l:g}) differs from "
                                f"across ({tissue.sigma_t:g}) but the file has no fibre directions")
        f = raw.fibres
        sig += (tissue.sigma_l - tissue.sigma_t) * f[:, :, None] * f[:, None, :]
    if raw.dim == 3 and tissue.sigma_n != tissue.sigma_t:
        if raw.sheets is None or raw.fibres is None:
            raise MeshFileError(f"{raw.path}: conductivity normal to the sheets ({tissue.sigma_n:g}) differs "
                                f"from across fibres ({tissue.sigma_t:g}) but the file has no sheet directions")
        n = np.cross(raw.fibres, raw.sheets)
        norm = np.linalg.norm(n, axis=1)
        if (norm < 0.1).any():
            k = int(np.flatnonzero(norm < 0.1)[0])
            raise MeshFileError(f"{raw.path}: element {k}: the sheet direction is (nearly) parallel to the fibre")
        n /= norm[:, None]
        sig += (tissue.sigma_n - tissue.sigma_t) * n[:, :, None] * n[:, None, :]
    for tag, factor in tissue.tag_scale:
        if raw.tags is None:
            raise MeshFileError(f"{raw.path}: mesh.tag_conductivity names tag {tag} but the file has no "
                                "element tags")
        hit = raw.tags == tag
        if not hit.any():
            raise MeshFileError(f"{raw.path}: mesh.tag_conductivity names tag {tag}, which no element "
                                f"carries (tags {sorted(set(raw.tags.tolist()))[:20]})")
        sig[hit] *= factor
    return sig


def shape_gradients(points: np.ndarray, elements: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Gradients of the P1 basis functions (E, d+1, 3) and element measures (E,). On lines and
    triangles in 3-D the gradients lie along the element (the pseudo-inverse of its edge matrix)."""
    x = points[elements]
    if elements.shape[1] == 4:          # tetrahedra: ∇λ_a = (e_b × e_c) / det, (a, b, c) cyclic
        e = x[:, 1:] - x[:, :1]
        cof = np.stack([np.cross(e[:, 1], e[:, 2]), np.cross(e[:, 2], e[:, 0]), np.cross(e[:, 0], e[:, 1])], 1)
        det = np.einsum("ei,ei->e", e[:, 0], cof[:, 0])
        g = cof / det[:, None, None]
        return np.concatenate([-g.sum(axis=1, keepdims=True), g], axis=1), np.abs(det) / 6.0
    edges = np.transpose(x[:, 1:] - x[:, :1], (0, 2, 1))          # (E, 3, d)
    gram = np.einsum("eki,ekj->eij", edges, edges)                # (E, d, d)
    g = np.linalg.solve(gram, np.transpose(edges, (0, 2, 1)))     # (E, d, 3): grads of λ1..λd
    grads = np.concatenate([-g.sum(axis=1, keepdims=True), g], axis=1)
    measure = np.sqrt(np.abs(np.linalg.det(gram))) / math.factorial(elements.shape[1] - 1)
    return grads, measure


def assemble(raw: RawMesh, tissue: Tissue) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Off-diagonal stiffness entries summed per node pair: rows, columns, values K_kj (mS·mm),
    sorted by row then column, K_jk = K_kj exactly (each edge summed once and mirrored); and the
    lumped mass (N,) (mm² or mm³)."""
    grads, measure = shape_gradients(raw.points, raw.elements)
    sig = conductivity(raw, tissue)
    flux = np.matmul(sig, np.transpose(grads, (0, 2, 1)))         # (E, 3, k): σ ∇φ_b
    el = raw.elements
    k, n = el.shape[1], len(raw.points)
    pairs = element_edges(k)
    lo = np.concatenate([np.minimum(el[:, a], el[:, b]) for a, b in pairs])
    hi = np.concatenate([np.maximum(el[:, a], el[:, b]) for a, b in pairs])
    vals = np.concatenate([measure * np.einsum("ei,ei->e", grads[:, a], flux[:, :, b]) for a, b in pairs])
    key = lo.astype(np.int64) * n + hi
    by_key = np.argsort(key)
    sorted_key = key[by_key]
    first = np.r_[True, sorted_key[1:] != sorted_key[:-1]]
    index = np.empty(len(key), np.int64)
    index[by_key] = np.cumsum(first) - 1                # each entry's edge; summed in element order
    edge = sorted_key[first]
    summed = np.bincount(index, weights=vals, minlength=len(edge))
    i, j = np.divmod(edge, n)
    key = np.concatenate([i * n + j, j * n + i])
    order = np.argsort(key)
    r, c = np.divmod(key[order], n)
    mass = np.bincount(el.ravel(), weights=np.repeat(measure / k, k), minlength=n)
    return r, c, np.concatenate([summed, summed])[order], mass


def operator_arrays(raw: RawMesh, tissue: Tissue) -> tuple[np.ndarray, np.ndarray]:
    """The P1 mass-lumped operator in padded rows: neighbours (N, K) int32 (padding: the node
    itself) and weights w_kj = −K_kj / (χ Cm m_k) (1/ms for σ in mS/mm); weights below
    ZERO_WEIGHT of their row's largest are dropped (the diagonals of right triangles with
    isotropic σ)."""
    r, c, kval, mass = assemble(raw, tissue)
    w = -kval / (tissue.chi * tissue.cm * mass[r])
    n = len(raw.points)
    big = np.zeros(n)
    np.maximum.at(big, r, np.abs(w))
    keep = np.abs(w) > ZERO_WEIGHT * big[r]
    r, c, w = r[keep], c[keep], w[keep]
    counts = np.bincount(r, minlength=n)
    width = max(int(counts.max()) if n else 1, 1)
    start = np.concatenate([[0], np.cumsum(counts)[:-1]])
    slot = np.arange(len(r)) - start[r]
    nbr = np.repeat(np.arange(n, dtype=np.int32)[:, None], width, axis=1)
    weights = np.zeros((n, width))
    nbr[r, slot] = c
    weights[r, slot] = w
    return nbr, weights


def fem_mesh(raw: RawMesh, tissue: Tissue, faces: np.ndarray | None = None) -> Mesh:
    """A file's mesh with its P1 mass-lumped operator (kind ``file``), the weights carrying D."""
    nbr, weights = operator_arrays(raw, tissue)
    if faces is None:
        faces = raw.elements if raw.dim == 2 else boundary_faces(raw.elements)
    return Mesh("file", raw.points, nbr, weights, faces=faces.astype(np.int32), weights_carry_D=True,
                elements=raw.elements, element_tags=raw.tags)


def face_keys(faces: np.ndarray, n_nodes: int) -> np.ndarray:
    """One int64 per triangle, the same for any order of its nodes (for fast 1-D uniques)."""
    f = np.sort(faces, axis=1).astype(np.int64)
    return (f[:, 0] * n_nodes + f[:, 1]) * n_nodes + f[:, 2]


def boundary_faces(tets: np.ndarray) -> np.ndarray:
    """Triangles of a tetrahedral mesh's boundary (faces that belong to one tetrahedron)."""
    f = np.concatenate([tets[:, [1, 2, 3]], tets[:, [0, 3, 2]], tets[:, [0, 1, 3]], tets[:, [0, 2, 1]]])
    _, idx, counts = np.unique(face_keys(f, int(tets.max()) + 1), return_index=True, return_counts=True)
    return f[idx[counts == 1]]


def stable_dt(mesh: Mesh) -> float:
    """Largest forward-Euler diffusion step (ms) Gershgorin's bound guarantees: the operator's
    eigenvalues lie within 2·max_k Σ_j |w_kj| of 0, and dt·|λ| ≤ 2 is stable. For an M-matrix
    (all weights ≥ 0, e.g. the 5-point sheet) the bound is sharp."""
    row = np.abs(mesh.inv_d2).sum(axis=1).max()
    return float(np.inf if row == 0 else 1.0 / row)


def tissue_of(settings) -> Tissue:
    """The :class:`Tissue` of a config's ``mesh`` section."""
    c = settings.conductivity
    scale = tuple(sorted((int(k), float(v)) for k, v in settings.tag_conductivity.items()))
    return Tissue(c.along, c.across, c.sheet or c.across, settings.chi, settings.cm, scale)


@lru_cache(maxsize=4)
def _cached_mesh(path: str, stamp: tuple, unit_mm: float, tissue: Tissue) -> tuple[Mesh, dict]:
    raw = read_mesh(path, unit_mm)
    mesh = fem_mesh(raw, tissue)
    report = quality(raw)
    report["stable_dt_ms"] = stable_dt(mesh)
    report["neighbour_width"] = float(mesh.width)
    return mesh, report


def settings_mesh(settings) -> Mesh:
    """The FE mesh of a config's ``mesh`` section (kind ``file``), read once per file version."""
    return settings_report(settings)[0]


def settings_report(settings) -> tuple[Mesh, dict]:
    """The mesh and its quality report (edges, aspect ratio, angles, stable step)."""
    p = Path(settings.path)
    stamp = []
    for q in (p, p.with_suffix(".pts"), p.with_suffix(".elem"), p.with_suffix(".lon")):
        try:
            st = q.stat()
            stamp.append((st.st_mtime_ns, st.st_size))
        except OSError:
            stamp.append(None)
    return _cached_mesh(str(p), tuple(stamp), settings.unit_mm, tissue_of(settings))
