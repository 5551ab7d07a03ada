"""The built-in tissues as meshes of the finite-element machinery (:mod:`.fem`): the
icosahedral geodesic sphere, rectangular sheets (and cables), the N-version slab and a
ventricle-like shell for large benchmarks. Each is generated as a :class:`RawMesh` (nodes,
elements, fibres) and assembled exactly as a mesh read from a file, so every tissue takes one
path: P1 elements with a lumped mass in the engines' padded neighbour arrays.

The sphere and sheet operators are built for unit diffusivity (the engines multiply them by the
config's ``D``), so ``D`` is the diffusivity of the continuum equation on every mesh.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from app.sims.cardiac.fem import UNIT_TISSUE, operator_arrays
from app.sims.cardiac.mesh import DEFAULT_SPACING_MM, Mesh
from app.sims.cardiac.mesh_io import RawMesh, check_mesh, signed_measure
from app.sims.common.progress import SetupProgress

MAX_SPHERE_LEVEL = 9


def icosphere_surface(level: int, radius_mm: float | None = None) -> RawMesh:
    """Geodesic sphere: the icosahedron subdivided ``level`` times (10·4^level + 2 nodes; level 7
    is the paper's 163,842). Default radius: mean edge DEFAULT_SPACING_MM."""
    if not 0 <= level <= MAX_SPHERE_LEVEL:
        raise ValueError(f"sphere level must be 0..{MAX_SPHERE_LEVEL}")
    t = (1 + 5 ** 0.5) / 2
    verts = np.array([[-1, t, 0], [1, t, 0], [-1, -t, 0], [1, -t, 0], [0, -1, t], [0, 1, t],
                      [0, -1, -t], [0, 1, -t], [t, 0, -1], [t, 0, 1], [-t, 0, -1], [-t, 0, 1]], float)
    faces = np.array([[0, 11, 5], [0, 5, 1], [0, 1, 7], [0, 7, 10], [0, 10, 11], [1, 5, 9],
                      [5, 11, 4], [11, 10, 2], [10, 7, 6], [7, 1, 8], [3, 9, 4], [3, 4, 2],
                      [3, 2, 6], [3, 6, 8], [3, 8, 9], [4, 9, 5], [2, 4, 11], [6, 2, 10],
                      [8, 6, 7], [9, 8, 1]], np.int64)
    verts /= np.linalg.norm(verts, axis=1, keepdims=True)
    report = SetupProgress(f"building the level-{level} sphere", level + 1)   # + the operator
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
    if radius_mm is None:
        radius_mm = DEFAULT_SPACING_MM / _mean_edge(verts, faces)
    return RawMesh("<sphere>", verts * radius_mm, faces)


def _mean_edge(points: np.ndarray, faces: np.ndarray) -> float:
    e = np.unique(np.sort(np.concatenate([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]]), axis=1), axis=0)
    return float(np.linalg.norm(points[e[:, 0]] - points[e[:, 1]], axis=1).mean())


@lru_cache(maxsize=2)
def icosphere(level: int, radius_mm: float | None = None) -> Mesh:
    """The geodesic sphere as a P1 surface mesh (kind ``sphere``), weights for unit D; built once
    per (level, radius) like a file's mesh (a level-7 sphere takes seconds), shared read-only."""
    raw = icosphere_surface(level, radius_mm)
    nbr, w = operator_arrays(raw, UNIT_TISSUE)
    return Mesh("sphere", raw.points, nbr, w, faces=raw.elements.astype(np.int32), elements=raw.elements)


def grid_sheet(nx: int, ny: int, dx: float, fibre=(1.0, 0.0, 0.0)) -> RawMesh:
    """nx × ny nodes every ``dx`` (mm) in the plane z = 0, each square cut into two right
    triangles (a single row or column: line elements); node (ix, iy) has index iy·nx + ix."""
    if nx < 1 or ny < 1 or dx <= 0:
        raise ValueError("sheet needs nx, ny >= 1 and dx > 0")
    idx = np.arange(nx * ny).reshape(ny, nx)
    if nx > 1 and ny > 1:
        a, b = idx[:-1, :-1].ravel(), idx[:-1, 1:].ravel()
        c, d = idx[1:, :-1].ravel(), idx[1:, 1:].ravel()
        elements = np.concatenate([np.stack([a, b, d], 1), np.stack([a, d, c], 1)])
    else:
        line = idx.ravel()
        elements = np.stack([line[:-1], line[1:]], 1)
    iy, ix = np.divmod(np.arange(nx * ny), nx)
    pts = np.stack([ix * dx, iy * dx, np.zeros(nx * ny)], 1).astype(float)
    return RawMesh("<sheet>", pts, elements, np.tile(np.asarray(fibre, float), (len(elements), 1)))


def sheet(nx: int, ny: int, dx_mm: float) -> Mesh:
    """Rectangular sheet of nx × ny nodes, spacing dx, no-flux edges (kind ``sheet``): P1 on right
    triangles with a lumped mass, which inside is the 5-point Laplacian and on the edges its
    vertex-centred no-flux form. Node (ix, iy) has index iy·nx + ix."""
    raw = grid_sheet(nx, ny, dx_mm)
    nbr, w = operator_arrays(raw, UNIT_TISSUE)
    return Mesh("sheet", raw.points, nbr, w, shape=(ny, nx), elements=raw.elements)


def structured_slab(lx: float, ly: float, lz: float, dx: float) -> RawMesh:
    """A box [0, lx] × [0, ly] × [0, lz] (mm) of nodes every ``dx`` (rounded to whole cells),
    each cube cut into six tetrahedra (Kuhn), fibres along x, sheets along y."""
    nx, ny, nz = (max(1, int(round(v / dx))) for v in (lx, ly, lz))
    xs, ys, zs = np.linspace(0, lx, nx + 1), np.linspace(0, ly, ny + 1), np.linspace(0, lz, nz + 1)
    gx, gy, gz = np.meshgrid(xs, ys, zs, indexing="ij")
    pts = np.stack([gx.ravel(), gy.ravel(), gz.ravel()], 1)
    tets = _kuhn(nx, ny, nz)
    neg = signed_measure(pts, tets) < 0          # half of Kuhn's paths have the other orientation
    tets[neg] = tets[neg][:, [0, 2, 1, 3]]
    e = len(tets)
    raw = RawMesh("<slab>", pts, tets, np.tile([1.0, 0, 0], (e, 1)), np.tile([0, 1.0, 0], (e, 1)))
    return check_mesh(raw)


def _kuhn(nx: int, ny: int, nz: int, periodic_y: bool = False) -> np.ndarray:
    """Six tetrahedra per cell of an (nx+1, ny+1, nz+1) node grid (index (i·NY + j)·NZ + k);
    ``periodic_y``: ny nodes around, the last cell joining j = ny−1 to j = 0."""
    ny_nodes = ny if periodic_y else ny + 1
    idx = np.arange((nx + 1) * ny_nodes * (nz + 1)).reshape(nx + 1, ny_nodes, nz + 1)
    if periodic_y:
        idx = np.concatenate([idx, idx[:, :1]], axis=1)
    corner = [idx[i:i + nx, j:j + ny, k:k + nz].ravel() for i in (0, 1) for j in (0, 1) for k in (0, 1)]
    c = np.stack(corner, 1)          # corner index = 4i + 2j + k
    paths = [(1, 3, 7), (1, 5, 7), (2, 3, 7), (2, 6, 7), (4, 5, 7), (4, 6, 7)]
    return np.concatenate([c[:, [0, a, b, d]] for a, b, d in paths])


def ventricle_shell(target_nodes: int, inner_mm: float = 25.0, wall_mm: float = 10.0,
                    height_mm: float = 80.0) -> RawMesh:
    """A left-ventricle-like truncated prolate spheroidal shell of tetrahedra with about
    ``target_nodes`` nodes: the cavity's short radius ``inner_mm``, the wall ``wall_mm`` thick,
    about ``height_mm`` from the apex region to the base; fibres turning from −60° (epicardium)
    to +60° (endocardium) against the circumferential direction (Streeter's rule), sheets
    across the wall. A structured (long axis × circumference × wall) grid of Kuhn cells closed
    around the axis; the apex itself (a coordinate singularity) is left open."""
    if target_nodes < 1000:
        raise ValueError("a ventricle shell needs at least 1,000 nodes")
    focal = np.sqrt(height_mm ** 2 - (inner_mm + wall_mm) ** 2) if height_mm > inner_mm + wall_mm else height_mm
    mu_in, mu_out = np.arcsinh(inner_mm / focal), np.arcsinh((inner_mm + wall_mm) / focal)
    nu_lo, nu_hi = np.radians(15.0), np.radians(100.0)
    r_mid = focal * np.sinh(0.5 * (mu_in + mu_out))
    arc = focal * np.cosh(0.5 * (mu_in + mu_out)) * (nu_hi - nu_lo)      # apex-to-base length, about
    h = (arc * 2 * np.pi * r_mid * wall_mm / target_nodes) ** (1 / 3)     # edge of near-cubic cells
    n_h, n_c, n_w = max(int(arc / h), 2), max(int(2 * np.pi * r_mid / h), 8), max(int(wall_mm / h), 1)
    nu = np.linspace(nu_lo, nu_hi, n_h + 1)
    phi = np.linspace(0, 2 * np.pi, n_c, endpoint=False)
    mu = np.linspace(mu_in, mu_out, n_w + 1)
    N, P, M = np.meshgrid(nu, phi, mu, indexing="ij")
    pts = np.stack([(focal * np.sinh(M) * np.sin(N) * np.cos(P)).ravel(),
                    (focal * np.sinh(M) * np.sin(N) * np.sin(P)).ravel(),
                    (-focal * np.cosh(M) * np.cos(N)).ravel()], 1)
    tets = _kuhn(n_h, n_c, n_w, periodic_y=True)
    neg = signed_measure(pts, tets) < 0
    tets[neg] = tets[neg][:, [0, 2, 1, 3]]
    centre = pts[tets].mean(axis=1)
    depth = (mu_out - M.ravel()[tets].mean(axis=1)) / (mu_out - mu_in)    # 0 epicardium, 1 endocardium
    ang = np.arctan2(centre[:, 1], centre[:, 0])
    circ = np.stack([-np.sin(ang), np.cos(ang), np.zeros_like(ang)], 1)
    radial = np.stack([np.cos(ang), np.sin(ang), np.zeros_like(ang)], 1)
    along = np.cross(radial, circ)
    helix = np.radians(-60.0 + 120.0 * depth)[:, None]
    fibres = np.cos(helix) * circ + np.sin(helix) * along
    return RawMesh("<ventricle>", pts, tets, fibres, radial)
