"""Markov ion-channel models: the YAML spec, validation, and rate evaluation in NumPy.

Rates named ``kIJ`` (1-based state numbers) are transitions from state I to state J; any
other name is a helper rate (e.g. ``alpha``) that later rates may use. Rates are in 1/ms, v
in mV. Both engines clamp every rate to [0, RATE_MAX]: a time constant shorter than 0.1 µs is
instantaneous at any sampling interval we use, and the clamp keeps float32 finite. A rate that
evaluates to NaN at v (a removable singularity such as the Hodgkin–Huxley ``x/(exp(x)-1)`` at
x = 0) is evaluated at v + SINGULAR_DV instead. A rate still NaN there, or infinite, makes that
parameter set an invalid individual (its Q holds NaN, its χ² is the failure score); a rate
NaN for every parameter set at some voltage is a model error (:func:`undefined_rate`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from app.compute.codegen import ExprError, Node, evaluate, parse
from app.sims.common.config import ConfigError, Document, spec

RATE_MAX = 1.0e4       # 1/ms
SINGULAR_DV = 1.0e-3   # mV
MAX_STATES = 8
_TRANSITION = re.compile(r"^k(\d)(\d)$")
_RATE_LINE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=(.*)$", re.ASCII | re.DOTALL)
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}", re.ASCII)   # what may reach generated code


@dataclass(frozen=True)
class ParameterSpec:
    """A free parameter: search range [min, max] and the value used for surrogate data."""

    name: str
    min: float
    max: float
    value: float | None = None


@dataclass(frozen=True)
class ChannelSpec:
    """A channel model as written in YAML."""

    states: list[str]
    open_states: list[str]
    parameters: list[ParameterSpec]
    rates: list[str]
    e_rev: float = field(default=-100.0, metadata=spec(range=(-300.0, 300.0)))
    conductance: str = "gmax"
    name: str = ""


@dataclass(frozen=True)
class ChannelModel:
    """A validated model: parsed rate trees and the arrays the engines use."""

    name: str
    states: tuple[str, ...]
    open_mask: np.ndarray                 # (N,) bool
    e_rev: float
    param_names: tuple[str, ...]
    lower: np.ndarray                     # (P,)
    upper: np.ndarray                     # (P,)
    true_values: np.ndarray               # (P,) NaN where not given
    conductance: int                      # index of the conductance parameter
    rate_defs: tuple[tuple[str, Node], ...]
    transitions: tuple[tuple[int, int, str], ...]   # (from, to, rate name), 0-based

    @property
    def n_states(self) -> int:
        return len(self.states)

    @property
    def n_params(self) -> int:
        return len(self.param_names)

    def rate_values(self, params: np.ndarray, v: float | np.ndarray) -> dict[str, np.ndarray]:
        """All rates for parameter rows ``params`` (pop, P) at voltage ``v``: (pop,) for a
        number, (nv, pop) for an array of voltages (nv,). A rate that is NaN or infinite
        after the singular-point shift is NaN: the individual scores as failed."""
        out = self._rates(params, v)
        if any(np.isnan(r).any() for r in out.values()):
            shifted = self._rates(params, np.asarray(v) + SINGULAR_DV)
            out = {k: np.where(np.isnan(r), shifted[k], r) for k, r in out.items()}
        return {k: np.where(np.isfinite(r), np.clip(r, 0.0, RATE_MAX), np.nan) for k, r in out.items()}

    def _rates(self, params: np.ndarray, v: float | np.ndarray) -> dict[str, np.ndarray]:
        many = np.ndim(v) > 0
        shape = (np.size(v), params.shape[0]) if many else params.shape[:1]
        env: dict[str, np.ndarray] = {n: params[:, i] for i, n in enumerate(self.param_names)}
        env["v"] = np.asarray(v, np.float64)[:, None] if many else np.full(params.shape[0], float(v))
        out = {}
        with np.errstate(all="ignore"):
            for name, tree in self.rate_defs:
                env[name] = np.broadcast_to(np.asarray(evaluate(tree, env), np.float64), shape)
                out[name] = env[name]
        return out

    def q_matrix(self, params: np.ndarray, v: float | np.ndarray) -> np.ndarray:
        """Generator Q (pop, N, N) with dP/dt = Q P (columns sum to zero); (nv, pop, N, N)
        for an array of voltages."""
        rates = self.rate_values(params, v)
        shape = next(iter(rates.values())).shape
        q = np.zeros(shape + (self.n_states, self.n_states))
        for i, j, name in self.transitions:
            q[..., j, i] += rates[name]
            q[..., i, i] -= rates[name]
        return q


def compile_model(spec_: ChannelSpec, doc: Document | None = None, path: tuple = ("model",)) -> ChannelModel:
    """Validate ``spec_``; every problem names its YAML line when ``doc`` is given."""
    def fail(message: str, sub: tuple = ()) -> ConfigError:
        return doc.error(message, path + sub) if doc is not None else ConfigError(message, path=path + sub)

    n = len(spec_.states)
    if not 1 <= n <= MAX_STATES:
        raise fail(f"a model has 1 to {MAX_STATES} states, this one has {n}", ("states",))
    if len(set(spec_.states)) != n:
        raise fail("state names must be distinct", ("states",))
    unknown = [s for s in spec_.open_states if s not in spec_.states]
    if unknown or not spec_.open_states:
        raise fail(f"open states must name states ({', '.join(spec_.states)})", ("open_states",))
    names = [p.name for p in spec_.parameters]
    for k, name in enumerate(names):
        if not IDENTIFIER.fullmatch(name):
            raise fail(f"parameter name {name[:40]!r} is not an identifier (letters, digits, '_'; "
                       "a letter or '_' first; at most 64)", ("parameters", k, "name"))
    if len(set(names)) != len(names) or "v" in names:
        raise fail("parameter names must be distinct and not 'v'", ("parameters",))
    for k, p in enumerate(spec_.parameters):
        if not (np.isfinite(p.min) and np.isfinite(p.max) and p.min < p.max):
            raise fail(f"{p.name}: need min < max, got [{p.min}, {p.max}]", ("parameters", k))
        if p.value is not None and not p.min <= p.value <= p.max:
            raise fail(f"{p.name}: value {p.value} is outside its range [{p.min:g}, {p.max:g}]",
                       ("parameters", k, "value"))
    if spec_.conductance not in names:
        raise fail(f"conductance parameter '{spec_.conductance}' is not among the parameters",
                   ("conductance",))
    known = set(names) | {"v"}
    defs, transitions = [], []
    for k, line in enumerate(spec_.rates):
        m = _RATE_LINE.match(line)
        if not m:
            raise fail(f"a rate is written 'name = expression', got '{line}'", ("rates", k))
        name, text = m.group(1), m.group(2).strip()
        if not IDENTIFIER.fullmatch(name):
            raise fail(f"rate name {name[:40]!r} is too long (at most 64 characters)", ("rates", k))
        if name in known:
            raise fail(f"'{name}' is defined twice or shadows a parameter", ("rates", k))
        try:
            tree = parse(text, known)
        except ExprError as exc:
            raise fail(f"rate {name}: {exc}", ("rates", k)) from None
        t = _TRANSITION.match(name)
        if t:
            i, j = int(t.group(1)) - 1, int(t.group(2)) - 1
            if not (0 <= i < n and 0 <= j < n) or i == j:
                raise fail(f"{name} names a transition between states outside 1..{n}", ("rates", k))
            transitions.append((i, j, name))
        defs.append((name, tree))
        known.add(name)
    if not transitions:
        raise fail("no transition rates (names like k12)", ("rates",))
    return ChannelModel(
        name=spec_.name, states=tuple(spec_.states),
        open_mask=np.array([s in spec_.open_states for s in spec_.states]),
        e_rev=float(spec_.e_rev), param_names=tuple(names),
        lower=np.array([p.min for p in spec_.parameters], float),
        upper=np.array([p.max for p in spec_.parameters], float),
        true_values=np.array([np.nan if p.value is None else p.value for p in spec_.parameters]),
        conductance=names.index(spec_.conductance), rate_defs=tuple(defs),
        transitions=tuple(transitions))


def undefined_rate(model: ChannelModel, params: np.ndarray, voltages) -> tuple[str, float] | None:
    """(rate name, v) of the first rate that is NaN (after the singular shift) or infinite at
    ``v`` for every parameter row of ``params``: a model error, not a bad individual. None if
    none is."""
    for v in voltages:
        with np.errstate(all="ignore"):
            rates = model._rates(params, float(v))
            shifted = model._rates(params, float(v) + SINGULAR_DV)
        for name, r in rates.items():
            if not np.isfinite(np.where(np.isnan(r), shifted[name], r)).any():
                return name, float(v)
    return None
