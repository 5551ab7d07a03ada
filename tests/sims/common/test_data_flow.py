"""One-way data flow: a config says where its files came from; the first frame carries what
the views need (the cardiac mesh)."""

from app.sims.common.config import dump_yaml
from app.sims.common.simulation import RESOURCES, default_preset, load_run_config


def test_a_config_keeps_where_its_files_came_from():
    """The channel preset names its model and protocol files; the loaded config says which
    (the panel shows those files as written, without reading the YAML again)."""
    _, cfg = load_run_config(default_preset("channel"))
    assert cfg.model_file == str((RESOURCES / "models/channel/model-b.yaml").resolve())
    assert cfg.protocols_file == str((RESOURCES / "protocols/channel/paper.yaml").resolve())
    _, again = load_run_config(dump_yaml(cfg), text=True)       # now inline: no files
    assert again.model_file == again.protocols_file == "" and again.model == cfg.model


def test_cardiac_frames_carry_the_mesh():
    from app.sims.cardiac.simulation import CardiacSimulation

    _, cfg = load_run_config(default_preset("cardiac"), overrides=["protocol.t_end=0.2"])
    sim = CardiacSimulation.from_config(cfg, "cpu-reference")
    first, second = sim.advance(), sim.advance()
    assert first.mesh is second.mesh and first.mesh.kind == cfg.mesh.kind
    assert not first.mesh.positions.flags.writeable
    assert first.mesh.positions is not sim.problem.mesh.positions    # a copy: never the engine's
