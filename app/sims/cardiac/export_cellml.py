"""The cardiac cell model as run, written as CellML 2.0 through Myokit's exporter.

The run's CellML model is read again (Myokit's importer, with the import's file checks), the
run's ``model.parameters`` set on it, and the result written by ``myokit.formats.cellml``'s
CellML 2.0 exporter. A run with parameter regions gets one more file per region (the run's
parameters, then the region's), ``<name>-region-<k>.cellml``: a CellML model is one cell.
Not written: the tissue (mesh, diffusion), the pacing protocol (our stimuli replace the model's
stimulus current) and the solver; the model's oxmeta annotations, which CellML 2.0 cannot hold
inline (Myokit's 2.0 writer writes none): to import the file back, name the membrane voltage
and the stimulus current (``model.voltage``, ``model.stimulus``), which the export writes beside the file
(``<name>-model.yaml``, the model block of a run config).
Refused, by name: a parameter that is not a constant of the model.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

from app.sims.common.config import ConfigError


def _model(file: str, parameters: Mapping[str, float], where: str):
    import myokit

    from app.sims.cardiac.cellml import _load_myokit
    from app.sims.cardiac.model import model_path
    _, m = _load_myokit(model_path(file))
    for key, value in parameters.items():
        try:
            var = m.get(key)
        except (KeyError, ValueError, myokit.IncompatibleModelError):
            raise ConfigError(f"{where}: {key} is not a variable of the model {file}") from None
        if var.is_state() or not var.is_literal():
            raise ConfigError(f"{where}: {key} is not a constant of the model {file}; CellML can "
                              "carry only a changed constant")
        var.set_rhs(myokit.Number(float(value), var.unit()))
    return m


def write_cellml(file: str, parameters: Mapping[str, float], out: str | Path,
                 where: str = "model.parameters") -> Path:
    """The model ``file`` (a shipped name or a path) with ``parameters`` set, as CellML 2.0."""
    import myokit.formats.cellml as mcellml

    out = Path(out)
    m = _model(file, parameters, where)
    partial = out.with_name(out.name + ".partial")
    try:
        mcellml.CellML2Exporter().model(str(partial), m)
        os.replace(partial, out)
    finally:
        partial.unlink(missing_ok=True)
    return out


def annotated_names(file: str) -> dict[str, str]:
    """oxmeta term -> ``component.variable`` of the voltage and stimulus current of ``file``."""
    from app.sims.cardiac.cellml import _annotations
    from app.sims.cardiac.model import model_path
    found = {term: f"{comp}.{var}" for (comp, var), term in _annotations(model_path(file)).items()}
    return {k: found[k] for k in ("membrane_voltage", "membrane_stimulus_current") if k in found}


def write_model_as_run(settings, out: str | Path) -> list[Path]:
    """``settings`` (a run's ``model`` block) as CellML 2.0: ``out``, one file per parameter
    region, and ``<name>-model.yaml`` (the model block of a run config importing ``out``)."""
    from app.sims.common.config import dump_yaml
    from app.sims.common.output import save_text
    out = Path(out)
    written = [write_cellml(settings.file, settings.parameters, out)]
    for k, region in enumerate(settings.regions):
        target = out.with_name(f"{out.stem}-region-{k}{out.suffix}")
        written.append(write_cellml(settings.file, {**settings.parameters, **region.parameters}, target,
                                    f"model.regions.{k}.parameters"))
    names = annotated_names(settings.file)
    block = {"file": out.name, "voltage": settings.voltage or names.get("membrane_voltage", ""),
             "stimulus": settings.stimulus or names.get("membrane_stimulus_current", "")}
    written.append(save_text(out.with_name(out.stem + "-model.yaml"),
                             "# the model block of a run config importing the exported file\n"
                             + dump_yaml({"model": block})))
    return written


def export_run(folder: Path, out: Path) -> list[Path]:
    """``biogpu export RUN --to cellml``: the model as run (and one file per parameter region)."""
    from app.sims.common.export import load_run
    return write_model_as_run(load_run(folder).model, out)
