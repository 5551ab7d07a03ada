"""``biogpu export``: a finished run's model or data in a neighbouring tool's standard format.

Each domain's manifest lists the formats it writes (``Domain.exports``: format -> import path of
``export_run(folder, out) -> list[Path]``); this module finds the run's domain from its
``config.yaml`` and calls the domain's exporter. An exporter refuses, with a ConfigError naming
the construct, what the format cannot carry.
"""

from __future__ import annotations

import inspect
import os
from pathlib import Path

import numpy as np

from app.sims.common.config import ConfigError, load_yaml
from app.sims.common.registry import DOMAINS, Domain, resolve

FORMATS = ("neuroml", "nwb", "cellml", "vtu")
SUFFIX = {"neuroml": ".nml", "nwb": ".nwb", "cellml": ".cellml", "vtu": ".pvd"}


def run_domain(folder: Path) -> Domain:
    """The domain of the run in ``folder`` (its ``config.yaml``)."""
    config = folder / "config.yaml"
    if not config.is_file():
        raise ConfigError(f"{folder}: not a run folder (no config.yaml)")
    data = load_yaml(config).data
    name = data.get("domain") if isinstance(data, dict) else None
    if not isinstance(name, str) or name not in DOMAINS:
        raise ConfigError(f"{config}: unknown domain {name!r}")
    return DOMAINS[name]


def formats_of(domain: Domain) -> list[str]:
    return [f for f in FORMATS if f in domain.exports]


def export_run(folder: str | Path, fmt: str, out: str | Path | None = None,
               epoch: int | None = None) -> list[Path]:
    """Write the run in ``folder`` as ``fmt``; ``out`` defaults to ``folder/export/<run>.<suffix>``;
    ``epoch`` picks the epoch of an exporter that takes one (the network's NeuroML2
    connectivity). Returns the files written."""
    folder = Path(folder)
    domain = run_domain(folder)
    if fmt not in domain.exports:
        offered = ", ".join(formats_of(domain)) or "nothing"
        raise ConfigError(f"a {domain.label.lower()} run cannot be exported to {fmt}; "
                          f"this domain exports to: {offered}")
    exporter = resolve(domain.exports[fmt])
    options = {} if epoch is None else {"epoch": epoch}
    if options and "epoch" not in inspect.signature(exporter).parameters:
        raise ConfigError(f"--epoch: a {domain.label.lower()} run's {fmt} export has no epochs to choose")
    target = Path(out) if out is not None else folder / "export" / (folder.resolve().name + SUFFIX[fmt])
    if target.exists() and target.is_dir():
        raise ConfigError(f"-o {target}: is a folder; give a file name")
    target.parent.mkdir(parents=True, exist_ok=True)
    return list(exporter(folder, target, **options))


def load_run(folder: Path):
    """The run's validated config (its ``config.yaml``)."""
    from app.sims.common.simulation import load_run_config
    return load_run_config(folder / "config.yaml")[1]


def load_results(folder: Path) -> dict[str, np.ndarray]:
    """The arrays of the run's ``results.npz`` (a missing file named)."""
    path = folder / "results.npz"
    if not path.is_file():
        raise ConfigError(f"{folder}: the run has no results.npz (did it finish?)")
    with np.load(path, allow_pickle=False) as data:
        return {k: data[k] for k in data.files}


def write_nwb(nwb, path: Path) -> Path:
    """Write ``nwb`` beside ``path`` and rename: an existing file is replaced whole or kept."""
    import pynwb
    partial = path.with_name(path.name + ".partial")
    try:
        with pynwb.NWBHDF5IO(str(partial), "w") as io:
            io.write(nwb)
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
    return path


def validate_neuroml(path: str | Path) -> None:
    """Check a written NeuroML2 file against the NeuroML2 XML schema (the newest that
    libNeuroML ships) and libNeuroML's own checks; ConfigError naming the file and the first
    problem if not."""
    import contextlib
    import io

    import neuroml
    from lxml import etree
    from neuroml.utils import validate_neuroml2

    schemas = sorted((Path(neuroml.__file__).parent / "nml").glob("NeuroML_v2.[0-9]*.xsd"),
                     key=lambda p: [int(x) for x in p.stem.split("_v")[1].split(".")])
    schema = etree.XMLSchema(etree.parse(str(schemas[-1])))
    parser = etree.XMLParser(resolve_entities=False, no_network=True)
    document = etree.parse(str(path), parser)
    if not schema.validate(document):
        raise ConfigError(f"{path}: not valid against {schemas[-1].name}: {schema.error_log.last_error}")
    try:
        with contextlib.redirect_stdout(io.StringIO()):      # it prints "It's valid!"
            validate_neuroml2(str(path))
    except Exception as exc:          # lxml's DocumentInvalid or a ValueError, by version
        raise ConfigError(f"{path}: not valid NeuroML2: {exc}") from None
