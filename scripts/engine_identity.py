"""Bit-identity of two trees' CUDA epidermis and network engines (GPU machine).

``python scripts/engine_identity.py REF_TREE [--out FILE.json]`` runs the same cases in this
tree and in ``REF_TREE`` (each in a fresh interpreter with that tree first on ``sys.path``),
saves every case's final state and spikes, and compares them array by array: a kernel change
that is meant to leave results unchanged (fusing launches, replaying graphs, reordering loads)
must give equal arrays, not close ones. Exit status 1 when an array differs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

CASES = textwrap.dedent('''
    import dataclasses, sys
    import numpy as np
    from app.compute.device import backend_context

    def epidermis(label, out, cells, steps, **sections):
        from app.sims.epidermis import model
        from app.sims.epidermis.config import EpidermisConfig
        from app.sims.epidermis.cuda import CudaEngine
        cfg = EpidermisConfig()
        for name, values in sections.items():
            cfg = dataclasses.replace(cfg, **{name: dataclasses.replace(getattr(cfg, name), **values)})
        cfg = dataclasses.replace(cfg, tissue=dataclasses.replace(cfg.tissue, cells=cells))
        state = model.type_c1(model.place_cells(cfg), cfg.mechanics.c1_height)
        eng = CudaEngine(cfg, state)
        for part in steps:
            eng.advance(part)
        st = eng.state()
        F, S = eng.forces()
        eng.close()
        for key in ("pos", "etype", "count", "genes", "n_cells", "event"):
            out[f"{label}/{key}"] = np.asarray(st[key])
        out[f"{label}/forces"], out[f"{label}/contacts"] = F, S

    def network(label, out, width, radius, parts, epochs):
        from app.sims.network.config import NetworkConfig
        from app.sims.network.cuda import CudaEngine
        from app.sims.network.model import Constants, build_culture
        cfg = NetworkConfig()
        cfg = dataclasses.replace(cfg, culture=dataclasses.replace(cfg.culture, width=width, height=width))
        eng = CudaEngine(build_culture(cfg), Constants.from_config(cfg), cfg.growth, cfg.run.seed, radius)
        for e in range(epochs):
            for i, n in enumerate(parts):
                s, j = eng.advance(n)
                order = np.lexsort((j, s))
                out[f"{label}/e{e}p{i}/spikes"] = np.stack([s[order], j[order]])
            out[f"{label}/e{e}/rate"] = eng.grow(sum(parts) * cfg.run.dt)
        st = eng.state()
        eng.close()
        for key, value in st.items():
            out[f"{label}/{key}"] = np.asarray(value)

    out = {}
    with backend_context("cuda"):
        epidermis("epi-cl-periodic", out, 400, [20, 300, 7])
        epidermis("epi-cl-none-genes", out, 200, [150, 64],
                  tissue={"boundary": "none"}, run={"mode": "genes"})
        epidermis("epi-cc-genes", out, 100, [100, 33], run={"mode": "genes", "search": "centre_cutoff"})
        epidermis("epi-full", out, 30, [45, 100, 3, 200], tissue={"elements": 38},
                  growth={"interval": 70, "delta_low": 10.0}, run={"mode": "full", "relax_steps": 0})
        network("net-20", out, 20, 2.001, [7000, 13, 6000], 2)
        network("net-100", out, 100, 2.001, [10000], 1)
    np.savez(sys.argv[1], **out)
''')


def run_tree(tree: Path, dest: Path) -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tree), env.get("PYTHONPATH", "")])
    subprocess.run([sys.executable, "-c", CASES, str(dest)], cwd=tree, env=env, check=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reference", type=Path)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        paths = {name: Path(tmp) / f"{name}.npz" for name in ("reference", "current")}
        run_tree(args.reference.resolve(), paths["reference"])
        run_tree(ROOT, paths["current"])
        ref, cur = (np.load(paths[name]) for name in ("reference", "current"))
        report = {}
        for key in sorted(set(ref.files) | set(cur.files)):
            if key not in ref.files or key not in cur.files:
                report[key] = "missing in " + ("reference" if key not in ref.files else "current")
                continue
            a, b = ref[key], cur[key]
            same = a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b, equal_nan=a.dtype.kind == "f")
            report[key] = "identical" if same else f"differs (shapes {a.shape} / {b.shape})"
    bad = {k: v for k, v in report.items() if v != "identical"}
    print(f"{len(report) - len(bad)} of {len(report)} arrays identical")
    for key, verdict in bad.items():
        print(f"  {key}: {verdict}")
    if args.out:
        args.out.write_text(json.dumps({"identical": not bad, "arrays": report}, indent=1))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
