"""A channel fit as an NWB file (pynwb): the recordings fitted, the protocol, the best
parameters and the fitted traces.

Each sweep is one intracellular recording (the icephys tables: ``IntracellularRecordingsTable``,
one ``SimultaneousRecordingsTable`` row per sweep, one ``SequentialRecordingsTable`` row per
protocol family): a ``VoltageClampStimulusSeries`` (the command voltage at the recorded samples,
stored in mV with ``conversion`` 1e-3) and a ``VoltageClampSeries`` (the current fitted, pA with
``conversion`` 1e-12). Sweeps follow each other on the file's clock, one second apart. The
processing module ``icephys`` holds the fitted current of each sweep (``TimeSeries``) and the
``parameters`` table (name, best value, search range, and the Gauss-Newton interval where the
fit computed one). The protocol and the fitted model (our YAML) are the file's ``protocol`` and
``notes`` texts. Not written: the unrecorded parts of each sweep (prepulses, holding), which the
protocol text describes, the optimiser's history, and the subject, experimenter and institution (we do not know them:
add them before sharing the file; nwbinspector reports them missing).
"""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Mapping

import numpy as np

from app.sims.channel.protocol import Protocol
from app.sims.common.config import ConfigError

MODULE = "icephys"     # nwbinspector asks for the schema's module names
GAP_S = 1.0      # seconds between the end of one sweep and the start of the next on the file's clock


def _pynwb():
    try:
        import pynwb
    except ImportError:
        raise ConfigError("writing NWB files needs pynwb (pip install 'biogpu-studio[export]')") from None
    return pynwb


def _timing(times_ms: np.ndarray, start_s: float) -> dict:
    """``rate`` + ``starting_time`` for uniform samples (what readers expect), else timestamps."""
    if times_ms.size > 1 and np.allclose(np.diff(times_ms), times_ms[1] - times_ms[0], rtol=1e-9, atol=0):
        return {"starting_time": start_s + times_ms[0] * 1e-3, "rate": 1e3 / (times_ms[1] - times_ms[0])}
    return {"timestamps": start_s + times_ms * 1e-3}


def write_fit_nwb(path: str | Path, protocol: Protocol, target: np.ndarray, fitted: np.ndarray,
                  parameters: Mapping[str, np.ndarray], description: str, protocol_text: str,
                  model_text: str, start: datetime | None = None) -> Path:
    """Write the fit to ``path``. ``target`` and ``fitted`` are flat (n_points,) pA in the
    protocol's sweep order; ``parameters`` has columns ``name``, ``value``, ``lower``, ``upper``
    (and optionally ``ci_lower``, ``ci_upper``)."""
    pynwb = _pynwb()
    from hdmf.common import DynamicTable, VectorData
    from pynwb.icephys import VoltageClampSeries, VoltageClampStimulusSeries

    offsets = protocol.offsets()
    if len(target) != offsets[-1] or len(fitted) != offsets[-1]:
        raise ConfigError(f"the fit has {len(target)} data points and {len(fitted)} fitted ones; "
                          f"the protocol records {offsets[-1]}")
    nwb = pynwb.NWBFile(session_description=description or "channel fit", identifier=str(uuid.uuid4()),
                        session_start_time=start or datetime.now(timezone.utc),
                        protocol=protocol_text, notes=model_text,
                        experiment_description="Markov ion-channel model fitted to voltage-clamp currents "
                                               "by BioGPU Studio",
                        keywords=["ion channel", "Markov model", "voltage clamp", "model fitting"])
    device = nwb.create_device(name="voltage_clamp", description="the voltage clamp of the fitted data")
    electrode = nwb.create_icephys_electrode(name="electrode", device=device,
                                             description="electrode of the fitted voltage-clamp data",
                                             cell_id="fitted_cell")
    fit = nwb.create_processing_module(name=MODULE, description="the fitted model's currents and parameters")
    start_s, by_family = 0.0, {}
    for k, sweep in enumerate(protocol.sweeps):
        part = slice(int(offsets[k]), int(offsets[k + 1]))
        timing = _timing(sweep.times(), start_s)
        stimulus = VoltageClampStimulusSeries(name=f"command_{k:05d}", data=sweep.voltages(), conversion=1e-3,
                                              electrode=electrode, gain=1.0, sweep_number=k,
                                              description=f"command voltage of sweep {sweep.label}", **timing)
        response = VoltageClampSeries(name=f"current_{k:05d}", data=np.asarray(target[part], float),
                                      conversion=1e-12, electrode=electrode, gain=1.0, sweep_number=k,
                                      description=f"current fitted, sweep {sweep.label}", **timing)
        row = nwb.add_intracellular_recording(electrode=electrode, stimulus=stimulus, response=response)
        simultaneous = nwb.add_icephys_simultaneous_recording(recordings=[row])
        by_family.setdefault(sweep.family or "protocol", []).append(simultaneous)
        fit.add(pynwb.TimeSeries(name=f"fitted_current_{k:05d}", data=np.asarray(fitted[part], float),
                                 unit="amperes", conversion=1e-12,
                                 description=f"current of the best parameters, sweep {sweep.label}", **timing))
        start_s += sweep.duration() * 1e-3 + GAP_S
    for family, rows in by_family.items():
        nwb.add_icephys_sequential_recording(simultaneous_recordings=rows, stimulus_type=family)
    descriptions = {"name": "parameter name", "value": "best value", "lower": "search range, lower end",
                    "upper": "search range, upper end", "ci_lower": "95% interval (Gauss-Newton), lower",
                    "ci_upper": "95% interval (Gauss-Newton), upper"}
    columns = [VectorData(name=k, description=descriptions[k], data=list(np.asarray(v).tolist()))
               for k, v in parameters.items()]
    fit.add(DynamicTable(name="parameters", description="the fitted parameters (model units)", columns=columns))
    from app.sims.common.export import write_nwb
    return write_nwb(nwb, Path(path))



def write_fit(cfg, best: np.ndarray, target: np.ndarray, fitted: np.ndarray, out: str | Path,
              ci: tuple[np.ndarray, np.ndarray] | None = None, label: str = "") -> Path:
    """A fit of run config ``cfg`` (best parameters, data, fitted currents, optional 95%
    interval) as NWB at ``out``."""
    from app.sims.channel.export import to_yaml
    from app.sims.common.config import dump_yaml
    model = cfg.model_()
    protocol = cfg.fit_data(model).protocol
    table: dict = {"name": list(model.param_names), "value": np.asarray(best, float),
                   "lower": model.lower, "upper": model.upper}
    if ci is not None:
        table.update(ci_lower=ci[0], ci_upper=ci[1])
    proto_text = dump_yaml({"protocols": cfg.protocols}) if cfg.protocols else "protocols from the recording files"
    return write_fit_nwb(out, protocol, target, fitted, table, f"{cfg.name or 'channel fit'}{label}",
                         proto_text, to_yaml(cfg.model, np.asarray(best, float)))


def export_run(folder: Path, out: Path) -> list[Path]:
    """``biogpu export RUN --to nwb``: the fit's data, protocol, best parameters and traces."""
    from app.sims.common.export import load_results, load_run
    r = load_results(folder)
    ci = (r["ci_lower"], r["ci_upper"]) if "ci_lower" in r else None
    return [write_fit(load_run(folder), r["best_params"], r["target"], r["best_traces"], out, ci,
                      f" ({folder.name})")]
