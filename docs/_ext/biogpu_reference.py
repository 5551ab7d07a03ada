"""Sphinx extension: the configuration and command-line references, generated at build time.

The configuration reference walks every registered domain's ``Config`` dataclass (the same
specs the panels build their forms from: type, default, range, choices, unit, doc line, and
the field's trailing source comment where it has no doc line). The command-line reference
reads the argparse parsers of ``python -m app`` and its tools by calling their ``main()`` with
``ArgumentParser.parse_args`` intercepted, so nothing is copied by hand. Both pages are written
into ``docs/reference/`` (ignored by git) when the builder starts, and only when they change.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import inspect
import io
import os
import re
import tokenize
import types
import typing
from pathlib import Path
from typing import Any, Iterator
from unittest import mock

OUT = Path(__file__).resolve().parent.parent / "reference"

# (command as typed, module, how its main() is called); the first is the app's own CLI.
TOOLS = (
    ("python -m app", "app.cli", ()),
    ("python -m app dsmts", "app.sims.ssa.dsmts", ()),
    ("python -m app.sims.network.develop", "app.sims.network.develop", ()),
    ("python -m app.gui.screenshots", "app.gui.screenshots", ()),
)


# ---- configuration reference -------------------------------------------------------------

def _cell(text: Any) -> str:
    """Text safe inside a Markdown table cell."""
    return (str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace("|", "\\|").replace("\n", " "))


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(tp))
    if origin in (list, tuple):
        args = typing.get_args(tp)
        return f"list of {_type_name(args[0])}" if args else "list"
    if origin is dict:
        key, value = typing.get_args(tp)
        return f"mapping {_type_name(key)} → {_type_name(value)}"
    if origin is typing.Literal:
        return " or ".join(repr(a) for a in typing.get_args(tp))
    if tp is type(None):
        return "null"
    if tp is Any:
        return "any"
    if dataclasses.is_dataclass(tp):
        return "mapping (below)"
    return {int: "integer", float: "number", str: "text", bool: "true/false"}.get(tp, getattr(tp, "__name__", str(tp)))


def _nested(tp: Any) -> Iterator[tuple[str, type]]:
    """(suffix, dataclass) for every dataclass a field's type holds: itself, list items, values."""
    origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp):
        yield "", tp
    elif origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(tp):
            yield from _nested(arg)
    elif origin in (list, tuple):
        for arg in typing.get_args(tp)[:1]:
            for suffix, cls in _nested(arg):
                yield "[]" + suffix, cls
    elif origin is dict:
        for suffix, cls in _nested(typing.get_args(tp)[1]):
            yield ".<name>" + suffix, cls


def _comments(cls: type) -> dict[str, str]:
    """Field name -> the comment at the end of its line in the class source."""
    try:
        lines, _ = inspect.getsourcelines(cls)
    except (OSError, TypeError):
        return {}
    source = "".join(lines)
    out: dict[str, str] = {}
    field_line = re.compile(r"^\s+([A-Za-z_]\w*)\s*:")
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, IndentationError):
        return {}
    for tok in tokens:
        if tok.type != tokenize.COMMENT:
            continue
        line = lines[tok.start[0] - 1]
        match = field_line.match(line)
        if match and tok.start[1] > match.end():
            out.setdefault(match.group(1), tok.string.lstrip("#").strip())
    return out


def _default(f: dataclasses.Field) -> str:
    if f.default is not dataclasses.MISSING:
        value = f.default
    elif f.default_factory is not dataclasses.MISSING:
        try:
            value = f.default_factory()
        except Exception:       # a factory that needs context: say so rather than guess
            return "(computed)"
    else:
        return "**required**"
    if dataclasses.is_dataclass(value):
        return "(below)"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if value is None:
        return "`null`"
    if isinstance(value, (list, tuple, dict)) and not value:
        return "`[]`" if not isinstance(value, dict) else "`{}`"
    if isinstance(value, float):
        return f"`{value:g}`"
    return f"`{value!r}`" if isinstance(value, str) else f"`{value}`"


def _allowed(meta: typing.Mapping) -> str:
    parts = []
    if meta.get("range") is not None:
        lo, hi = meta["range"]
        parts.append(f"{lo:g} to {hi:g}")
    if meta.get("choices") is not None:
        parts.append(", ".join(f"`{c}`" for c in meta["choices"]))
    return "; ".join(parts)


def _class_doc(cls: type) -> str:
    """The class's own docstring (not the signature dataclasses make up without one)."""
    doc = inspect.getdoc(cls) or ""
    return "" if doc.startswith(f"{cls.__name__}(") else doc


def config_rows(cls: type, prefix: str = "", seen: tuple = ()) -> Iterator[tuple[str, type, list[tuple]]]:
    """(section key, class, table rows) for ``cls`` and, depth first, every dataclass it holds."""
    hints = typing.get_type_hints(cls)
    comments = _comments(cls)
    rows, children = [], []
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        meta = f.metadata or {}
        doc = meta.get("doc") or comments.get(f.name, "")
        unit = meta.get("unit", "")
        rows.append((f.name, _type_name(hints[f.name]), _default(f), _allowed(meta), unit, doc))
        for suffix, child in _nested(hints[f.name]):
            if child not in seen:
                children.append((f"{prefix}{f.name}{suffix}", child))
    yield prefix.rstrip(".") or "(top level)", cls, rows
    for key, child in children:
        yield from config_rows(child, key + ".", seen + (cls,))


def config_reference() -> str:
    from app.sims.common.registry import DOMAINS

    out = ["# Configuration reference", "",
           "Every run config is a YAML file with a `domain:` key; the keys each domain accepts "
           "are listed below with their type, default, allowed values and unit. This page is "
           "generated from the same field specifications the panels build their forms from "
           "and the loader checks, so it matches the installed version. An unknown key, a "
           "value of the wrong type or one outside its range is refused with the file, line "
           "and key named. Any key can be overridden on the command line with "
           "`--set key.sub=value`. The `sweep:` block any config may add is described in "
           "[Parameter sweeps](../user-guide/sweeps.md).", ""]
    for name in DOMAINS:
        domain = DOMAINS[name]
        cls = domain.config_class
        out += [f"## {domain.label} (`domain: {name}`)", "", domain.description, ""]
        for section, section_cls, rows in config_rows(cls):
            if not rows:
                continue
            out += [f"### `{section}`" if section != "(top level)" else "### Top-level keys", ""]
            if _class_doc(section_cls):
                out += [_class_doc(section_cls), ""]
            out += ["| key | type | default | allowed | unit | meaning |",
                    "| --- | --- | --- | --- | --- | --- |"]
            out += ["| " + " | ".join([f"`{r[0]}`"] + [_cell(c) for c in r[1:]]) + " |" for r in rows]
            out.append("")
    return "\n".join(out)


# ---- command-line reference ---------------------------------------------------------------

class _Captured(Exception):
    def __init__(self, parser: argparse.ArgumentParser):
        super().__init__()
        self.parser = parser


def capture_parser(module: str) -> argparse.ArgumentParser:
    """The parser ``module.main()`` builds, taken when it calls ``parse_args``."""
    def intercept(self, *args, **kwargs):
        raise _Captured(self)

    main = importlib.import_module(module).main
    with mock.patch.object(argparse.ArgumentParser, "parse_args", intercept), \
            mock.patch.object(argparse.ArgumentParser, "parse_known_args", intercept):
        try:
            main([])
        except _Captured as got:
            return got.parser
    raise RuntimeError(f"{module}.main() returned without parsing its arguments")


def _option_rows(parser: argparse.ArgumentParser) -> list[str]:
    rows = []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        name = ", ".join(f"`{s}`" for s in action.option_strings) or f"`{action.metavar or action.dest}`"
        if action.option_strings and action.nargs != 0:
            name += f" `{action.metavar or action.dest.upper()}`"
        default = "" if action.default in (None, argparse.SUPPRESS, False, []) else f"`{action.default}`"
        choices = ", ".join(f"`{c}`" for c in action.choices) if action.choices else ""
        required = "required" if (not action.option_strings and action.nargs not in ("?", "*")) else ""
        help_text = (action.help or "").replace("%(default)s", str(action.default))
        rows.append(f"| {name} | {_cell(required or default)} | {_cell(choices)} | {_cell(help_text)} |")
    return rows


def _parser_section(title: str, parser: argparse.ArgumentParser, help_line: str = "") -> list[str]:
    usage = parser.format_usage().replace("usage: ", "", 1).strip()
    out = [title, ""]
    if help_line:
        out += [help_line[:1].upper() + help_line[1:] + ".", ""]
    if parser.description and parser.description != help_line:
        out += [parser.description, ""]
    out += ["```text", usage, "```", ""]
    rows = _option_rows(parser)
    if rows:
        out += ["| argument | default | choices | meaning |", "| --- | --- | --- | --- |", *rows, ""]
    return out


def cli_reference() -> str:
    os.environ.setdefault("COLUMNS", "100")
    out = ["# Command-line reference", "",
           "Generated from the programs' own argument parsers at documentation build time. "
           "`biogpu` (installed with the package) and `python -m app` are the same program.", ""]
    module = importlib.import_module("app.cli")
    doc = inspect.getdoc(module) or ""
    exit_codes = doc.split("Exit codes:", 1)
    if len(exit_codes) == 2:
        out += ["**Exit codes:** " + " ".join(exit_codes[1].split()), ""]
    for command, module_name, _ in TOOLS:
        parser = capture_parser(module_name)
        parser.prog = command
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        out += _parser_section(f"## `{command}`", parser)
        for action in subs:
            helps = {c.dest: c.help for c in action._choices_actions}
            for name, sub in action.choices.items():
                if not sub.add_help:        # a command with its own parser, documented below
                    out += [f"### `{command} {name}`", "", (helps.get(name) or "").capitalize() + ".",
                            "", "Its options are listed in its own section below.", ""]
                    continue
                sub.prog = f"{command} {name}"
                out += _parser_section(f"### `{command} {name}`", sub, helps.get(name) or "")
    return "\n".join(out)


# ---- Sphinx hook ----------------------------------------------------------------------------

def write_if_changed(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")


def generate(app=None) -> None:
    write_if_changed(OUT / "config.md", config_reference())
    write_if_changed(OUT / "cli.md", cli_reference())


def setup(app):
    app.connect("builder-inited", generate)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}


if __name__ == "__main__":          # python docs/_ext/biogpu_reference.py: write both pages
    generate()
