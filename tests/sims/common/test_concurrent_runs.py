"""Two runs at once on the compiled CPU engines must never abort the process.

numba's 'workqueue' threading layer (what a machine without libgomp or TBB gets) aborts with
"Fatal Python error: Aborted" when two threads enter parallel regions at once: a second run
started while the first was still inside the compiled engine did that. The child process
forces that layer and runs two sessions side by side; it must exit 0 with both runs done.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

CHILD = textwrap.dedent("""
    import threading
    from app.sims.common.session import Session
    from app.sims.common.simulation import PRESETS, load_run_config
    from app.sims.ssa.compiled import warm_up

    warm_up()                                   # compiled (or loaded) before both runs start
    domain, cfg = load_run_config(PRESETS / "ssa" / "birth-death.yaml", overrides=[
        "ensemble.realizations=256", "ensemble.samples=401"])
    sessions = [Session(domain, cfg, "cpu") for _ in range(2)]
    threads = [threading.Thread(target=s.run) for s in sessions]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    import numba
    print("layer", numba.threading_layer())
    print("done", [s.summary["finished"] for s in sessions])
""")


def test_two_compiled_runs_at_once_on_a_thread_unsafe_layer():
    env = {**os.environ, "NUMBA_THREADING_LAYER": "workqueue"}
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True,
                         timeout=600, cwd=os.getcwd())
    assert out.returncode == 0, out.stderr[-3000:]
    assert "layer workqueue" in out.stdout
    assert "done [True, True]" in out.stdout
