import threading
import time

from app.sims.common.session import Session, load_checkpoint, save_checkpoint
from app.sims.common.simulation import PRESETS, load_run_config


def small_dimer():
    return load_run_config(PRESETS / "ssa" / "birth-death.yaml", overrides=[
        "ensemble.realizations=64", "ensemble.samples=2001"])


def test_pause_resume_stop_from_another_thread():
    domain, cfg = small_dimer()
    frames = []
    session = Session(domain, cfg, "cpu", on_frame=frames.append)
    worker = threading.Thread(target=session.run)
    worker.start()
    while not frames:
        time.sleep(0.01)
    session.pause()
    deadline = time.time() + 30
    while not session.holding and time.time() < deadline:
        time.sleep(0.01)
    assert session.holding               # parked: the slice in flight has finished
    count = len(frames)
    time.sleep(0.3)
    assert len(frames) == count
    session.resume()
    time.sleep(0.2)
    session.stop()
    worker.join(timeout=30)
    assert not worker.is_alive()
    assert session.stopped and len(frames) > count
    assert session.summary["realizations"] == 64


def test_checkpoint_in_owning_thread(tmp_path):
    domain, cfg = small_dimer()
    path = tmp_path / "ck.npz"
    session = Session(domain, cfg, "cpu")
    session.request(lambda sim: save_checkpoint(path, sim))
    session.run()
    state = load_checkpoint(path)
    assert int(state["k"]) == 1 and "config_yaml" in state


def test_pause_when_a_frame_meets_the_condition():
    """The session pauses itself after the first frame past t = 1 (in the owning thread: no
    further slice runs), and runs to the end once resumed without the condition."""
    domain, cfg = small_dimer()
    frames = []
    session = Session(domain, cfg, "cpu-reference", on_frame=frames.append)
    session.pause_when(lambda frame: frame.times[-1] >= 1.0)
    worker = threading.Thread(target=session.run)
    worker.start()
    deadline = time.time() + 30
    while not session.holding and time.time() < deadline:
        time.sleep(0.01)
    assert session.holding and session.paused
    assert frames[-1].times[-1] >= 1.0 and all(f.times[-1] < 1.0 for f in frames[:-1])
    count = len(frames)
    time.sleep(0.2)
    assert len(frames) == count
    session.pause_when(None)
    session.resume()
    worker.join(timeout=60)
    assert not worker.is_alive() and frames[-1].done and not session.stopped
