"""One engine surface for every domain, and the helpers each simulation used to copy.

A domain's engines (the NumPy reference, the compiled CPU engine, the CUDA engine) implement
:class:`Engine`; the domain's manifest names them by backend and :func:`make_engine` builds
the one a backend asks for. A simulation's checkpoint keeps its config as YAML text
(:func:`config_state` / :func:`config_from_state`) and its engine's arrays under an
``engine_`` prefix (:func:`engine_state` / :func:`engine_part`).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Protocol, TypeVar, runtime_checkable

import numpy as np

from app.sims.common.config import Document, dump_yaml, parse_yaml
from app.sims.common.registry import DOMAINS

T = TypeVar("T")
ENGINE_PREFIX = "engine_"


@runtime_checkable
class Engine(Protocol):
    """What a simulation asks of its engine, on any backend.

    ``advance(...)`` does a bounded amount of the domain's work (the arguments are the
    domain's: SSA runs its ensemble to a sample time, the tissue engines a number of steps,
    the GA one generation); ``state()`` returns the engine's checkpoint arrays (NumPy, copied
    off the device) and ``restore(state)`` puts them back; ``close()`` frees device memory in
    the owning thread. ``compile_seconds`` is the first-use compile or cache-load time (0 where
    nothing compiles).
    """

    compile_seconds: float

    def advance(self, *args: Any, **kwargs: Any) -> Any: ...

    def state(self) -> dict[str, np.ndarray]: ...

    def restore(self, state: Mapping[str, np.ndarray]) -> None: ...

    def close(self) -> None: ...


class EngineBase:
    """A base for engine classes: ``compile_seconds`` 0 unless set, and a subclass that still
    defines a method under a name ``renamed`` lists (``class X(EngineBase, renamed={"run":
    "advance"})``) is refused at import, where the protocol's name would otherwise bypass it."""

    compile_seconds: float = 0.0
    _renamed: Mapping[str, str] = {}

    def __init_subclass__(cls, renamed: Mapping[str, str] | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if renamed is not None:
            cls._renamed = dict(renamed)
        old = [name for name in cls._renamed if name in vars(cls)]
        if old:
            raise TypeError(f"{cls.__qualname__} defines {old[0]}(); the Engine protocol calls it "
                            f"{cls._renamed[old[0]]}() (app.sims.common.engine.Engine)")


def make_engine(domain: str, backend: str, *args: Any, **kwargs: Any) -> Any:
    """The ``backend`` engine of ``domain`` (from its manifest), built with ``args``."""
    return DOMAINS[domain].engine_class(backend)(*args, **kwargs)


def device_name(backend: str) -> str:
    """What the engine of ``backend`` runs on, for summaries: the GPU's or the CPU's name."""
    from app.compute.device import cpu_device, cuda_status

    if backend == "cuda":
        return cuda_status().devices[0].name
    return cpu_device().label


def choose(table: Mapping[str, T], name: str, kind: str) -> T:
    """``table[name]``; an unknown name is an error that lists the known ones."""
    try:
        return table[name]
    except KeyError:
        raise ValueError(f"unknown {kind} {name!r}; valid: {', '.join(table)}") from None


def config_state(cfg: Any) -> dict[str, np.ndarray]:
    """The config's part of a checkpoint: its YAML text."""
    return {"config_yaml": np.array(dump_yaml(cfg))}


def config_from_state(state: Mapping[str, Any], load_config: Callable[[Document], Any]) -> Any:
    """The validated config a checkpoint was taken with."""
    return load_config(parse_yaml(str(state["config_yaml"]), "<checkpoint>"))


def engine_state(engine: Engine) -> dict[str, np.ndarray]:
    """The engine's checkpoint arrays, named with the ``engine_`` prefix."""
    return {ENGINE_PREFIX + k: v for k, v in engine.state().items()}


def engine_part(state: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """The engine's arrays of a checkpoint made with :func:`engine_state`."""
    return {k[len(ENGINE_PREFIX):]: np.asarray(v) for k, v in state.items() if k.startswith(ENGINE_PREFIX)}
