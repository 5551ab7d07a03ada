"""``python -m app bench cardiac --mesh``: a generated ventricle-like tetrahedral shell of about
10^6 nodes (:func:`~app.sims.cardiac.shapes.ventricle_shell`, rotating fibres, anisotropic σ),
written as a VTU and run through the ``mesh: {kind: file}`` path like a user's mesh: the CRN
model with Rush–Larsen forward Euler (dt 0.02 ms, voltage lookup tables, float32), timed after
a warm-up that compiles; the real-time factor (simulated ms per wall ms) and the memory-traffic
floor of one step.

Floor, per node per step (the fused RLFE kernel): the states read and written (2 × S × 4 B),
the padded operator row as the CUDA engine stores it (K slots of a neighbour's int16 offset or
int32 index and its weight, half precision in a float32 run where the rows allow: 4·K to 8·K B,
the record's ``row_bytes_per_slot``; :mod:`~app.sims.cardiac.node_order`), the neighbours' V
(mostly cache hits: counted once, 4 B) and the activation bookkeeping (~32 B).

With ``split_dt`` (``--split-dt``, :mod:`~app.sims.cardiac.splitting`) the cell model runs
``split_dt / dt`` substeps of dt = 0.02 ms and the diffusion one RKC1 super-step (Godunov) or two
half ones (Strang) per split step; the floor per split step
(:func:`~app.sims.cardiac.bench.split_floor_bytes`) is the states read and written once, the
bookkeeping once and, per diffusion stage, the operator row, V of the previous two stages and
the new stage written. On the CRN shell (21 states, width 14, stable step 0.03 ms) with int16
offsets and half weights at split_dt 0.1 ms Godunov takes 2 stages: 168 + 32 + 2 × 68 = 336 B
per node per 0.1 ms, against 5 × 260 = 1,300 B unsplit. The record states both per simulated ms
(``floor_bytes_per_node_ms``).
The CUDA engine's split kernels are written to that floor: ``cell_substeps`` reads and writes
each node's states once (the substeps in registers), each ``rkc_stage`` launch is one pass over
the operator row and V (kernels/cardiac.cu)."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np

from app.compute.device import backend_context, cuda_status, resolve_backend
from app.sims.cardiac.bench import floor_bytes, row_slot_bytes, run_once, split_floor_bytes
from app.sims.common.bench_record import save_bench

NODES, QUICK_NODES = 1_000_000, 20_000
T_END, QUICK_T_END = 100.0, 5.0
DT = 0.02
STIM_RADIUS_MM = 3.0           # the stimulus: nodes within this of the lowest node (near the apex)
# nominal memory bandwidth (bytes/s) of the cards the floor is stated for
BANDWIDTH = {"H100 80GB HBM3": 3.35e12, "H100 PCIe": 2.0e12, "H200": 4.8e12}
CONDUCTIVITY = {"along": 0.34, "across": 0.06, "sheet": 0.06}     # mS/mm, with the default χ and Cm
CONFIG = """domain: cardiac
name: ventricle-like shell, {nodes} nodes
mesh: {{kind: file, path: {path}, conductivity: {{along: %(along)g, across: %(across)g, sheet: %(sheet)g}}}}
protocol: {{t_end: {t_end:g}, stimuli: [{{start: 1, duration: 2, amplitude: -80,
  region: {{kind: cells, cells: {cells}}}}}]}}
solver: {{method: rlfe, dt: {dt:g}, precision: float32, lookup_tables: true{splitting}}}
output: {{random_probes: 10, dt_save: 1.0, snapshot_interval: {t_end:g}, singularity_delay: 0}}
""" % CONDUCTIVITY


def diffusion_stages(mesh, split_dt: float, split: str) -> list[int]:
    """RKC1 stages of each diffusion super-step of a split step (none without splitting); the
    file mesh's weights carry D."""
    from app.sims.cardiac.splitting import super_step_stages
    if split_dt <= 0:
        return []
    stages = super_step_stages(mesh.inv_d2, 1.0, split_dt)
    return [stages[0.5]] * 2 if split == "strang" else [stages[1.0]]


def write_shell(folder: Path, nodes: int) -> tuple[Path, np.ndarray]:
    import meshio

    from app.sims.cardiac.shapes import ventricle_shell
    raw = ventricle_shell(nodes)
    path = folder / "ventricle.vtu"
    meshio.write(path, meshio.Mesh(raw.points, [("tetra", raw.elements)],
                                   cell_data={"fibres": [raw.fibres], "sheets": [raw.sheets]}),
                binary=True, compression=None)      # a scratch file: zlib would take longer than the run
    return path, raw.points


def record_name(split_dt: float, split: str, dt: float = DT) -> str:
    """The record's benchmark name: ``cardiac-mesh``, with the split, e.g. ``cardiac-mesh-strang-0.1ms``,
    and a cell step other than :data:`DT`, e.g. ``cardiac-mesh-godunov-0.2ms-dt0.04``."""
    name = f"cardiac-mesh-{split}-{split_dt:g}ms" if split_dt > 0 else "cardiac-mesh"
    return name + (f"-dt{dt:g}" if dt != DT else "")


def config_for(path: Path, points: np.ndarray, t_end: float, split_dt: float = 0.0, split: str = "strang",
               dt: float = DT):
    from app.sims.cardiac.config import load_config
    from app.sims.common.config import parse_yaml
    apex = points[np.argmin(points[:, 2])]
    cells = np.flatnonzero(np.linalg.norm(points - apex, axis=1) <= STIM_RADIUS_MM).tolist()
    splitting = f", split_dt: {split_dt:g}, split: {split}" if split_dt > 0 else ""
    text = CONFIG.format(nodes=len(points), path=path, t_end=t_end, dt=dt, cells=cells, splitting=splitting)
    return load_config(parse_yaml(text, str(path.with_suffix(".yaml"))))


def main(backend: str = "auto", out_dir: Path = Path("bench-results"), quick: bool = False,
         nodes: int | None = None, split_dt: float = 0.0, split: str = "strang", dt: float = DT) -> int:
    from dataclasses import replace

    from app.sims.cardiac.fem import settings_report
    from app.sims.cardiac.model import config_model
    resolved, reason = resolve_backend(backend)
    nodes = nodes or (QUICK_NODES if quick else NODES)
    t_end = QUICK_T_END if quick else T_END
    how = f", {split} split every {split_dt:g} ms" if split_dt > 0 else ""
    print(f"# cardiac mesh benchmark: ventricle-like shell, about {nodes:,} nodes, CRN, RLFE dt {dt:g} ms{how}, "
          f"{t_end:g} ms\n# {reason}", flush=True)
    with tempfile.TemporaryDirectory() as tmp, backend_context(resolved):
        t0 = time.perf_counter()
        path, points = write_shell(Path(tmp), nodes)
        cfg = config_for(path, points, t_end, split_dt, split, dt)
        made = time.perf_counter() - t0
        warm = replace(cfg, protocol=replace(cfg.protocol, t_end=2 * (split_dt or dt)))
        t1 = time.perf_counter()
        _, warm_summary = run_once(warm, resolved)          # reads and assembles the mesh, compiles
        setup = time.perf_counter() - t1
        arrays, summary = run_once(cfg, resolved)
        mesh, quality = settings_report(cfg.mesh)
    n_states = config_model(cfg.model).n_states
    steps, wall = summary["steps_accepted"], summary["wall_seconds"]
    step = split_dt or dt
    stages = diffusion_stages(mesh, split_dt, split)
    slot = row_slot_bytes(mesh) if resolved == "cuda" else 8     # the CPU engines: int32 indices
    per_node = (split_floor_bytes(n_states, mesh.width, stages, slot) if split_dt > 0
                else floor_bytes(n_states, mesh.width, slot))
    moved = per_node * mesh.n_cells * steps
    device = cuda_status().devices[0].name if resolved == "cuda" else "cpu"
    nominal = next((bw for name, bw in BANDWIDTH.items() if name in device), None)
    act = arrays["activation_time"]
    result = {
        "device": device, "backend": resolved, "nodes": mesh.n_cells, "elements": int(quality["elements"]),
        "neighbour_width": mesh.width, "states": n_states, "dt_ms": dt, "t_end_ms": t_end, "steps": steps,
        "split_dt_ms": split_dt, "split": split if split_dt > 0 else "", "diffusion_stages": stages,
        "row_bytes_per_slot": slot, "floor_bytes_per_node_ms": per_node / step,
        "wall_seconds": wall, "real_time_factor": t_end / (wall * 1e3),
        "floor_bytes_per_node_step": per_node, "effective_bandwidth_GBps": moved / wall / 1e9,
        "floor_seconds": moved / nominal if nominal else None, "nominal_bandwidth_GBps": nominal and nominal / 1e9,
        "mesh_seconds": made, "setup_seconds": setup, "activated_fraction": float(np.isfinite(act).mean()),
        "mesh_quality": quality, "finished": summary["finished"], "warm_up_steps": warm_summary["steps_accepted"]}
    print(f"{mesh.n_cells:,} nodes, {result['elements']:,} tetrahedra, width {mesh.width}, {n_states} states; "
          f"{steps} steps in {wall:.2f} s: {result['real_time_factor']:.3g}x real time; floor "
          f"{per_node} B/node/step ({per_node / step:.0f} B/node/ms), "
          f"{result['effective_bandwidth_GBps']:.0f} GB/s moved"
          + (f" ({moved / nominal:.3f} s at {nominal / 1e9:.0f} GB/s)" if nominal else "")
          + f"; {result['activated_fraction']:.1%} of nodes activated; mesh {made:.1f} s, setup {setup:.1f} s",
          flush=True)
    out = save_bench(record_name(split_dt, split, dt), result, out_dir)
    print(f"\nwrote {out}")
    return 0
