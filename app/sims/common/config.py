"""YAML run configs loaded into validated dataclasses, with errors that point at the line.

A field's constraints live in its metadata, written with :func:`spec`::

    realizations: int = field(default=4096, metadata=spec(range=(1, 1 << 26)))

:func:`build` checks unknown keys, types, ranges and choices and raises :class:`ConfigError`
naming the file, the line, the key path and the valid range.
"""

from __future__ import annotations

import dataclasses
import math
import re
import types
import typing
from pathlib import Path
from typing import Any, Mapping

import yaml

Marks = dict[tuple, int]


class ConfigError(ValueError):
    """A config problem with its location: ``file:line: key.path: message``."""

    def __init__(self, message: str, source: str | None = None, line: int | None = None,
                 path: tuple = ()):
        self.message, self.source, self.line, self.path = message, source, line, tuple(path)
        super().__init__(str(self))

    def __str__(self) -> str:
        where = self.source or "<config>"
        if self.line is not None:
            where += f":{self.line}"
        key = ".".join(str(p) for p in self.path)
        return f"{where}: {key + ': ' if key else ''}{self.message}"


def spec(range: tuple[float, float] | None = None, choices: tuple | None = None,
         doc: str = "", unit: str = "") -> dict:
    """Field metadata: an inclusive numeric ``range``, allowed ``choices``, a ``doc`` line and
    the ``unit`` (the GUI builds its controls and tooltips from these)."""
    return {"range": range, "choices": choices, "doc": doc, "unit": unit}


@dataclasses.dataclass
class Document:
    """Parsed YAML with the line of every key path (1-based)."""

    data: Any
    marks: Marks
    source: str | None = None

    def line(self, path: tuple) -> int | None:
        while path and path not in self.marks:
            path = path[:-1]
        return self.marks.get(path)

    def error(self, message: str, path: tuple = ()) -> ConfigError:
        return ConfigError(message, self.source, self.line(path), path)


MAX_CONFIG_BYTES = 8 << 20        # a run config is text a person writes; data files are separate
MAX_CONFIG_VALUES = 1_000_000     # values after YAML aliases are expanded (a "billion laughs" stops here)
MAX_CONFIG_DEPTH = 200            # nesting of mappings and lists
INT64_MAX = 2**63 - 1
_COMPOSER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)   # libyaml where built: 4x faster
_YAML11_EXPONENT = re.compile(r"[-+]?[0-9]+(\.[0-9]*)?[eE][-+]?[0-9]+")   # 1e-3: text to YAML 1.1


def parse_yaml(text: str, source: str | None = None) -> Document:
    """Parse YAML text, keeping the line of each key; syntax errors name the line.

    Bounded: at most :data:`MAX_CONFIG_BYTES` of text, :data:`MAX_CONFIG_VALUES` values once
    aliases are expanded and :data:`MAX_CONFIG_DEPTH` levels of nesting.
    """
    if len(text) > MAX_CONFIG_BYTES:
        raise ConfigError(f"the config is {len(text):,} characters; the limit is {MAX_CONFIG_BYTES:,} "
                          "(large data belongs in a data file the config names)", source)
    try:
        node = yaml.compose(text, Loader=_COMPOSER)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc)
        if "nesting depth" in problem:        # PyYAML >= 6.0.4 limits the depth itself
            raise ConfigError(f"the YAML is nested too deeply (the limit is {MAX_CONFIG_DEPTH} levels)",
                              source, line) from None
        raise ConfigError(f"YAML syntax error: {problem}", source, line) from None
    except RecursionError:
        raise ConfigError(f"the YAML is nested too deeply (the limit is {MAX_CONFIG_DEPTH} levels)",
                          source) from None
    if node is not None:
        try:
            size = _expanded_size(node)
        except _SelfReference as exc:
            raise ConfigError("a YAML alias refers to the mapping or list that contains it "
                              f"(anchor at line {exc.node.start_mark.line + 1}); it would expand "
                              "without end", source, exc.node.start_mark.line + 1) from None
        if size > MAX_CONFIG_VALUES:
            raise ConfigError(f"the config expands to more than {MAX_CONFIG_VALUES:,} values "
                              f"({size:,.3g} through YAML aliases)", source, node.start_mark.line + 1)
    marks: Marks = {}
    budget = [MAX_CONFIG_VALUES]
    data = _to_python(node, (), marks, source, budget) if node is not None else None
    return Document(data, marks, source)


def load_yaml(path: str | Path) -> Document:
    """Read and parse a YAML file (UTF-8 text of bounded size)."""
    path = Path(path)
    try:
        if path.is_dir():
            raise ConfigError("this is a folder, not a config file", str(path))
        if path.exists() and not path.is_file():     # a device (/dev/zero), a pipe, a socket
            raise ConfigError("not a regular file (a device or a pipe?); a run config is a "
                              "YAML text file", str(path))
        size = path.stat().st_size
        if size > MAX_CONFIG_BYTES:
            raise ConfigError(f"the file is {size:,} bytes; a run config may have at most "
                              f"{MAX_CONFIG_BYTES:,}", str(path))
        with open(path, "rb") as fh:                  # bounded even if the file grows meanwhile
            raw = fh.read(MAX_CONFIG_BYTES + 1)
        if len(raw) > MAX_CONFIG_BYTES:
            raise ConfigError(f"the file has more than {MAX_CONFIG_BYTES:,} bytes; a run config "
                              "may have at most that", str(path))
    except OSError as exc:
        raise ConfigError(f"cannot read file: {exc.strerror}", str(path)) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise ConfigError(f"not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start}); "
                          "a run config is a YAML text file", str(path), line) from None
    if "\x00" in text:
        raise ConfigError("this is a binary file, not a YAML run config", str(path))
    return parse_yaml(text, str(path))


def _expanded_size(root: yaml.Node) -> float:
    """Values the node graph holds once aliases are expanded, counted without expanding them
    (each distinct node once, children first; a float, so a bomb's count cannot overflow)."""
    size: dict[int, float] = {}
    open_nodes: set[int] = set()         # on the current path: an alias back to one is a cycle
    stack = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if id(node) in size:
            continue
        kids = ([n for pair in node.value for n in pair] if isinstance(node, yaml.MappingNode)
                else list(node.value) if isinstance(node, yaml.SequenceNode) else [])
        if children_done or not kids:
            open_nodes.discard(id(node))
            size[id(node)] = 1.0 + sum(size[id(k)] for k in kids)
            continue
        if id(node) in open_nodes:
            raise _SelfReference(node)
        open_nodes.add(id(node))
        stack.append((node, True))
        for k in kids:
            if id(k) in open_nodes:
                raise _SelfReference(k)
            if id(k) not in size:
                stack.append((k, False))
    return size[id(root)]


class _SelfReference(Exception):
    """A YAML alias that refers to a node containing it (``a: &x [*x]``): infinite when expanded."""

    def __init__(self, node: yaml.Node):
        self.node = node


def _to_python(node: yaml.Node, path: tuple, marks: Marks, source: str | None,
               budget: list[int]) -> Any:
    budget[0] -= 1
    if budget[0] < 0:
        raise ConfigError(f"the config expands to more than {MAX_CONFIG_VALUES:,} values "
                          "(through YAML aliases?)", source, node.start_mark.line + 1, path)
    if len(path) > MAX_CONFIG_DEPTH:
        raise ConfigError(f"the YAML is nested more than {MAX_CONFIG_DEPTH} levels deep", source,
                          node.start_mark.line + 1, path[:3])
    marks.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, (yaml.MappingNode, yaml.SequenceNode)) and node.tag not in (
            "tag:yaml.org,2002:map", "tag:yaml.org,2002:seq", "tag:yaml.org,2002:omap"):
        raise ConfigError(f"not a plain YAML value: the tag {node.tag} is not allowed", source,
                          node.start_mark.line + 1, path)
    if isinstance(node, yaml.MappingNode):
        out = {}
        for key_node, value_node in node.value:
            key = key_node.value
            if not isinstance(key_node, yaml.ScalarNode):
                raise ConfigError("keys must be plain names", source, key_node.start_mark.line + 1, path)
            if key in out:
                raise ConfigError(f"duplicate key '{key}'", source, key_node.start_mark.line + 1, path)
            marks[path + (key,)] = key_node.start_mark.line + 1
            out[key] = _to_python(value_node, path + (key,), marks, source, budget)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_to_python(v, path + (i,), marks, source, budget) for i, v in enumerate(node.value)]
    try:
        return _SCALARS.construct_scalar_value(node)
    except yaml.YAMLError as exc:      # e.g. !!python/name: tags, which the safe loader refuses
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"not a plain YAML value: {problem}", source,
                          node.start_mark.line + 1, path) from None


class _ScalarConstructor(yaml.constructor.SafeConstructor):
    """The safe loader's scalar rules (ints, floats, booleans, null, timestamps), one instance
    for all scalars (a loader per scalar made large configs slow); nothing is cached."""

    def construct_scalar_value(self, node: yaml.ScalarNode) -> Any:
        try:
            return self.construct_object(node, deep=True)
        finally:
            self.constructed_objects.clear()
            self.recursive_objects.clear()


_SCALARS = _ScalarConstructor()


def build(cls: type, data: Any, doc: Document, path: tuple = ()) -> Any:
    """Build dataclass ``cls`` from mapping ``data``, validating every field."""
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise doc.error(f"expected a mapping of {cls.__name__} fields, got {_kind(data)}", path)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = [k for k in data if k not in fields]
    if unknown:
        raise doc.error(f"unknown key '{unknown[0]}'; valid keys: {', '.join(fields)}",
                        path + (unknown[0],))
    hints = typing.get_type_hints(cls)
    values = {}
    for name, f in fields.items():
        if name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise doc.error(f"missing required key '{name}'", path)
            continue
        values[name] = convert(hints[name], data[name], doc, path + (name,), f.metadata)
    return cls(**values)


def convert(tp: Any, value: Any, doc: Document, path: tuple, meta: Mapping | None = None) -> Any:
    """Check ``value`` against type ``tp`` (and metadata ranges/choices); return the converted value."""
    meta = meta or {}
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(tp)
        if value is None and type(None) in options:
            return None
        shaped = [o for o in options if o is not type(None) and _shape_matches(o, value)]
        if len(shaped) == 1:       # one option fits the value's shape: its error is the precise one
            return convert(shaped[0], value, doc, path, meta)
        errors = []
        for option in options:
            if option is type(None):
                continue
            try:
                return convert(option, value, doc, path, meta)
            except ConfigError as exc:
                errors.append(exc.message)
        raise doc.error(" or ".join(errors), path)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return build(tp, value, doc, path)
    if origin in (list, tuple):
        if not isinstance(value, list):
            raise doc.error(f"expected a list, got {_kind(value)}", path)
        (item,) = typing.get_args(tp)[:1] or (Any,)
        out = [convert(item, v, doc, path + (i,), meta) for i, v in enumerate(value)]
        return tuple(out) if origin is tuple else out
    if origin is dict:
        if not isinstance(value, Mapping):
            raise doc.error(f"expected a mapping, got {_kind(value)}", path)
        _, item = typing.get_args(tp)
        return {str(k): convert(item, v, doc, path + (k,), meta) for k, v in value.items()}
    if tp is Any:
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise doc.error(f"expected true or false, got {_kind(value)}", path)
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            else:
                raise doc.error(f"expected a whole number, got {_kind(value)}", path)
        if not -INT64_MAX - 1 <= value <= INT64_MAX:
            raise doc.error(f"{value:.3g} does not fit a 64-bit integer", path)
    elif tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            hint = ""
            if isinstance(value, str) and _YAML11_EXPONENT.fullmatch(value.strip()):
                mantissa, _, exponent = value.strip().lower().partition("e")
                mantissa = mantissa if "." in mantissa else mantissa + ".0"
                exponent = exponent if exponent[:1] in "+-" else "+" + exponent
                hint = (f" (YAML reads {value.strip()} as text: a number with an exponent needs a "
                        f"decimal point and a signed exponent, write {mantissa}e{exponent})")
            raise doc.error(f"expected a number, got {_kind(value)}{hint}", path)
        try:
            value = float(value)
        except OverflowError:
            raise doc.error(f"{value:.3g} is too large for a floating-point number", path) from None
        if not math.isfinite(value):
            raise doc.error(f"expected a finite number, got {value}", path)
    elif tp is str:
        if not isinstance(value, str):
            raise doc.error(f"expected text, got {_kind(value)}", path)
    _check_meta(value, meta, doc, path)
    return value


def _shape_matches(tp: Any, value: Any) -> bool:
    """Whether ``value`` has the container shape of type ``tp`` (mapping, list, text, number)."""
    origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp) or origin is dict:
        return isinstance(value, Mapping)
    if origin in (list, tuple):
        return isinstance(value, list)
    if tp is str:
        return isinstance(value, str)
    if tp is bool:
        return isinstance(value, bool)
    if tp in (int, float):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return False


def _check_meta(value: Any, meta: Mapping, doc: Document, path: tuple) -> None:
    lo_hi = meta.get("range")
    if lo_hi is not None and isinstance(value, (int, float)):
        lo, hi = lo_hi
        if not (lo <= value <= hi) or value != value:
            raise doc.error(f"{value!r} is out of range; valid range is [{lo:g}, {hi:g}]", path)
    choices = meta.get("choices")
    if choices is not None and value not in choices:
        raise doc.error(f"{value!r} is not one of: {', '.join(map(str, choices))}", path)


def _kind(value: Any) -> str:
    if value is None:
        return "nothing"
    return f"{type(value).__name__} {value!r}"[:80]


def to_plain(obj: Any) -> Any:
    """Dataclasses to plain dicts/lists for YAML output."""
    if dataclasses.is_dataclass(obj):
        return {f.name: to_plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [to_plain(v) for v in obj]
    if isinstance(obj, dict):
        return {k: to_plain(v) for k, v in obj.items()}
    return obj


def dump_yaml(obj: Any) -> str:
    """A dataclass or plain data as YAML text, keys in declaration order."""
    return yaml.safe_dump(to_plain(obj), sort_keys=False, default_flow_style=None)


def dotted_items(data: Mapping[str, Any], prefix: str = ""):
    """(``'a.b.c'``, leaf) for every leaf of nested mappings: the keys :func:`set_path` takes."""
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            yield from dotted_items(value, name + ".")
        else:
            yield name, value


def set_path(data: dict, dotted: str, raw_value: str) -> None:
    """Apply a ``--set key.sub=value`` override to plain data; the value is parsed as YAML."""
    keys = dotted.split(".")
    target = data
    for key in keys[:-1]:
        target = target.setdefault(key, {})
        if not isinstance(target, dict):
            raise ConfigError(f"cannot set '{dotted}': '{key}' is not a mapping")
    try:
        target[keys[-1]] = yaml.safe_load(raw_value)
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"--set {dotted}={raw_value}: the value is not valid YAML ({problem})") from None
