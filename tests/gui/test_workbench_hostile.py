"""Session files as a careless or hostile user makes them: a FIFO (Open used to block), deeply
nested JSON, a YAML bomb or a Python tag in a panel's config, members named with ``../``,
fields of the wrong type. Each is refused by ``load_session`` with a ConfigError whose text
names the session file, and nothing is imported or unpickled; a valid session still opens."""

from __future__ import annotations

import io
import json
import os
import zipfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.gui.workbench import FORMAT, VERSION, PanelState, WorkbenchSession, load_session, save_session
from app.sims.common.config import ConfigError

CONFIG = ("domain: ssa\nmodel:\n  species: {X: 5}\n  reactions: [{reactants: {X: 1}, rate: 1.0}]\n"
          "ensemble: {realizations: 8, t_end: 1.0, samples: 3}\n")
SSA_FRAME = "app.sims.ssa.simulation:SSAFrame"


def write(path, doc, members=None) -> None:
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("session.json", doc if isinstance(doc, str) else json.dumps(doc))
        for name, data in (members or {}).items():
            z.writestr(name, data)


def doc(panels=None, **extra):
    return {"format": FORMAT, "version": VERSION, "current": "ssa",
            "panels": {"ssa": {"config_yaml": CONFIG}} if panels is None else panels, **extra}


def npz(**arrays) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def refused(path, words: str) -> str:
    with pytest.raises(ConfigError) as info:
        load_session(path)
    text = str(info.value)
    assert f"session {path}" in text and words in text, text
    return text


def test_valid_session_round_trips(tmp_path):
    path = tmp_path / "ok.biogpu"
    save_session(path, WorkbenchSession("ssa", {"ssa": PanelState(CONFIG)}))
    assert load_session(path).panels["ssa"].config_yaml == CONFIG


def test_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "pipe.biogpu"
    os.mkfifo(fifo)
    refused(fifo, "not a regular file")


def test_folder_is_refused(tmp_path):
    refused(tmp_path, "not a regular file")


@pytest.mark.parametrize("depth", [1000, 100_000])
def test_deep_json_is_refused(tmp_path, depth):
    path = tmp_path / "deep.biogpu"
    write(path, "[" * depth + "]" * depth)
    refused(path, "nested too deeply")


@pytest.mark.parametrize("config,words", [
    ("a: &a [*a]\n", "contains it"),
    ("domain: ssa\nmodel: &m {<<: *m}\n", "contains it"),
    ("lol: &a [1,1,1,1,1,1,1,1,1]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
     "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n"
     "g: [*f,*f,*f,*f,*f,*f,*f,*f,*f]\n", "values"),
    ("domain: !!python/object/apply:os.system [echo hi]\n", "not a plain YAML value"),
    ("domain: ssa\nensemble: {realizations: x}\n", "ensemble.realizations"),
])
def test_panel_configs_are_validated_naming_the_session_and_panel(tmp_path, config, words):
    path = tmp_path / "bomb.biogpu"
    write(path, doc({"ssa": {"config_yaml": config}}))
    text = refused(path, words)
    assert "(panel ssa)" in text


@pytest.mark.parametrize("member", ["../evil.txt", "frames/../../x.npz", "/etc/passwd", "a\\..\\b"])
def test_members_outside_the_session_are_refused(tmp_path, member):
    path = tmp_path / "escape.biogpu"
    write(path, doc(), {member: b"x"})
    refused(path, "names a path outside the session")


@pytest.mark.parametrize("name", ["../ssa", "ssa/../x", "nosuch", ""])
def test_panel_names_must_be_domains(tmp_path, name):
    path = tmp_path / "names.biogpu"
    write(path, doc({name: {"config_yaml": CONFIG}}))
    refused(path, "is not a domain")


WRONG_TYPES = [
    (dict(panels=[]), "'panels' is list"),
    (dict(panels={"ssa": []}), "'config_yaml' is missing"),
    (dict(panels={"ssa": {"config_yaml": 5}}), "'config_yaml' is missing or not text"),
    (dict(current=7), "'current' is int"),
    (dict(panels={"ssa": {"config_yaml": CONFIG, "frame": []}}), "'frame' is not a mapping"),
    (dict(panels={"ssa": {"config_yaml": CONFIG, "frame": {"class": "os:system"}}}), "not a frame class"),
    (dict(panels={"ssa": {"config_yaml": CONFIG, "frame": {"class": "app.sims.x:__import__"}}}),
     "not a frame class"),
]


@pytest.mark.parametrize("changes,words", WRONG_TYPES)
def test_wrong_field_types_name_the_session(tmp_path, changes, words):
    path = tmp_path / "types.biogpu"
    d = doc()
    d.update(changes)
    write(path, d, {"frames/ssa.npz": npz(a=np.zeros(2))})
    refused(path, words)


FRAME_FIELDS = [
    ({"realizations": {"value": "lots"}}, "SSAFrame.realizations is str"),
    ({}, "lacks the fields progress, done"),
    ({"realizations": {"value": [1, 2]}}, "SSAFrame.realizations: list is not a plain value"),
    ({"progress": {"value": True}}, "SSAFrame.progress is bool"),
    ({"times": {"array": "missing"}}, "not in the session file"),
    ({"times": {"array": "text"}}, "holds <U"),
    ({"times": {"array": "a", "value": 1}}, "not one of array"),
    ({"species": {"tuple": [{"x": 1}]}}, "not a list of plain values"),
    ({"species": {"pickle": 1}}, "unknown entry"),
    ({"nosuch": {"value": 1}}, "has no field"),
]


@pytest.mark.parametrize("fields,words", FRAME_FIELDS)
def test_frame_fields_of_the_wrong_type(tmp_path, fields, words):
    path = tmp_path / "frame.biogpu"
    frame = {"class": SSA_FRAME, "fields": fields}
    write(path, doc({"ssa": {"config_yaml": CONFIG, "frame": frame}}),
          {"frames/ssa.npz": npz(a=np.zeros(3), text=np.array(["x", "y"]))})
    refused(path, words)


@settings(derandomize=True, max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
                          lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=4), kids,
                                                                                     max_size=3),
                          max_leaves=8),
       key=st.sampled_from(["format", "version", "current", "panels"]))
def test_generated_session_documents_never_crash(tmp_path, value, key):
    """Any JSON value at any top-level key: it loads (when it is a valid session) or it is
    refused with a ConfigError naming the file; never another exception."""
    path = tmp_path / "gen.biogpu"
    d = doc()
    d[key] = value
    write(path, d)
    try:
        load_session(path)
    except ConfigError as exc:
        assert f"session {path}" in str(exc)


def test_open_session_in_the_window_names_the_file(qtbot, tmp_path, monkeypatch):
    from app.gui import errors
    from app.gui.main_window import MainWindow

    shown = []
    monkeypatch.setattr(errors, "report_exception", lambda parent, title, exc: shown.append(str(exc)))
    window = MainWindow()
    qtbot.addWidget(window)
    path = tmp_path / "bad.biogpu"
    write(path, doc({"ssa": {"config_yaml": "a: &a [*a]\n"}}))
    assert window.open_session(path) is False
    assert shown and f"session {path}" in shown[0]
