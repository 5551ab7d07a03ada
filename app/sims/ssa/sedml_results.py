"""SED-ML plans made concrete: models with their changes applied, run configs, data generators,
and the outputs laid out as BioSimulators does.

Reports: ``OUT/<SED-ML location>/<report id>.csv`` (one row per data set: its label, then its
values; no header) and the HDF5 file ``OUT/reports.h5`` with one dataset per report at
``<SED-ML location>/<report id>`` (data sets stacked along the first axis, padded with NaN to
one shape; attributes ``_type``, ``uri``, ``sedmlId``, ``sedmlName``, ``sedmlDataSetIds``,
``sedmlDataSetLabels``, ``sedmlDataSetNames``, ``sedmlDataSetDataTypes``, ``sedmlDataSetShapes``).
A report whose data sets have more than one dimension (repeats) goes only to HDF5, as there.
Plots: ``OUT/<SED-ML location>/<plot id>.png``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import numpy as np

from app.fileio import atomic_write_bytes
from app.sims.ssa.sedml import ModelChange, Plan, SedmlError, Unit, Variable, evaluate_math

H5_NAME = "reports.h5"


# ---- models ----------------------------------------------------------------------------------
def _parser():
    from lxml import etree
    return etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False,
                           remove_blank_text=False)


def _select(tree, xpath: str, ns: Mapping[str, str], plan: Plan, mid: str):
    from lxml import etree
    try:
        found = tree.xpath(xpath, namespaces=dict(ns))
    except (etree.XPathError, TypeError) as exc:
        raise SedmlError(plan.source, "change", xpath, f"of model '{mid}': not a valid XPath ({exc})") from None
    if not isinstance(found, list) or not found or not all(isinstance(e, etree._Element) for e in found):
        raise SedmlError(plan.source, "change", xpath, f"of model '{mid}': selects no element of the model")
    return found


def apply_changes(plan: Plan, mid: str, extra: tuple[tuple[str, str, float], ...] = ()) -> bytes:
    """The SBML text of model ``mid`` with its changes and then ``extra`` (setValue) applied."""
    from lxml import etree

    path, changes = plan.models[mid]
    try:
        tree = etree.parse(str(path), _parser()).getroot()
    except etree.XMLSyntaxError as exc:
        raise SedmlError(plan.source, "model", mid, f"{path.name} is not XML ({exc})") from None
    if tree.getroottree().docinfo.doctype:
        raise SedmlError(plan.source, "model", mid, f"{path.name} declares a DTD; refused (entities)")
    ns = {"sbml": tree.nsmap.get(None, "")}
    ns.update(plan.namespaces)
    for change in changes + tuple(ModelChange("attribute", xp, repr(float(v))) for _, xp, v in extra):
        target = change.target.strip()
        if change.kind == "attribute":
            head, sep, attr = target.rpartition("/@")
            if not sep or not attr:
                raise SedmlError(plan.source, "changeAttribute", target, "the target must end in /@attribute")
            elements = _select(tree, head, ns, plan, mid)
            if len(elements) != 1:
                raise SedmlError(plan.source, "changeAttribute", target, f"selects {len(elements)} elements")
            if ":" in attr:
                prefix, local = attr.split(":", 1)
                attr = f"{{{ns.get(prefix, '')}}}{local}"
            elements[0].set(attr, change.value)
            continue
        elements = _select(tree, target, ns, plan, mid)
        if change.kind == "remove":
            for e in elements:
                e.getparent().remove(e)
            continue
        wrapped = f"<wrap xmlns=\"{ns['sbml']}\">{change.value}</wrap>"
        try:
            fragment = etree.fromstring(wrapped.encode(), _parser())
        except etree.XMLSyntaxError as exc:
            raise SedmlError(plan.source, f"{change.kind}XML", target, f"newXML is not XML ({exc})") from None
        for e in elements:
            if change.kind == "add":
                for child in fragment:
                    e.append(_copy(child))
            else:
                parent = e.getparent()
                index = parent.index(e)
                parent.remove(e)
                for k, child in enumerate(fragment):
                    parent.insert(index + k, _copy(child))
    return etree.tostring(tree.getroottree(), xml_declaration=True, encoding="UTF-8")


def _copy(element):
    import copy
    return copy.deepcopy(element)


def write_model(plan: Plan, mid: str, dest: Path, extra: tuple = ()) -> Path:
    """Write the changed model to ``dest`` and check it with the SBML importer (every refusal)."""
    from app.sims.ssa.sbml import read_sbml

    atomic_write_bytes(dest, apply_changes(plan, mid, extra))
    model = read_sbml(dest)
    if model.network is None:
        lines = "; ".join(f"{r.element} '{r.id}': {r.detail}" for r in model.refused)
        raise SedmlError(plan.source, "model", mid, f"the SBML model cannot run: {lines}")
    return dest


# ---- run configs ---------------------------------------------------------------------------------
def needs_states(plan: Plan, unit: Unit) -> bool:
    """Whether the unit's variables need every realization (not only the ensemble statistics)."""
    if unit.ensemble is None:
        return False
    for g in plan.generators.values():
        for v in g.variables:
            if v.task == unit.id and v.species is not None:
                over = set(v.over or unit.dims)
                if v.aggregate not in ("mean", "sd", "variance") or unit.ensemble not in over:
                    return True
    return False


def run_config(plan: Plan, unit: Unit, sbml: Path, seed: int) -> dict[str, Any]:
    """The SSA run config (plain data) of one run of ``unit``."""
    sim = unit.sim
    times = np.linspace(0.0, sim.t_end, sim.samples)
    ensemble: dict[str, Any] = {"realizations": unit.realizations, "t_end": sim.t_end, "samples": sim.samples,
                                "algorithm": sim.algorithm, "epsilon": sim.epsilon,
                                "seed": sim.seed if sim.seed is not None else seed}
    if needs_states(plan, unit):
        ensemble["snapshot_times"] = [float(t) for t in times[sim.first:]]
    return {"domain": "ssa", "name": f"{Path(plan.location).stem}-{unit.id}",
            "description": f"task '{unit.id}' of {plan.location}", "sbml": str(sbml), "ensemble": ensemble}


# ---- data --------------------------------------------------------------------------------------
def unit_data(unit: Unit, runs: list[Mapping[str, np.ndarray]]) -> dict[str, Any]:
    """Arrays of a unit from its runs' results (one run, or one per sweep point)."""
    first = unit.sim.first
    species = [str(s) for s in np.asarray(runs[0]["species"]).tolist()]
    mean = np.stack([np.asarray(r["mean"])[first:] for r in runs])          # (P, k, S)
    std = np.stack([np.asarray(r["std"])[first:] for r in runs])
    states = None
    if all("snapshots" in r for r in runs):
        states = np.stack([np.moveaxis(np.asarray(r["snapshots"], dtype=float), 0, 1) for r in runs])  # (P, R, k, S)
    k = mean.shape[1]
    if any(np.asarray(r["times"]).shape[0] - first != k for r in runs):
        raise ValueError(f"task '{unit.id}': a run stopped before its end")
    return {"times": np.asarray(runs[0]["times"], dtype=float)[first:], "species": species,
            "mean": mean, "std": std, "states": states}


_REDUCE = {"mean": np.mean, "sd": np.std, "variance": np.var, "min": np.min, "max": np.max}


def variable_value(plan: Plan, v: Variable, unit: Unit, data: Mapping[str, Any]) -> np.ndarray:
    """One variable's array: dimensions ``unit.dims`` (less those aggregated over), then time."""
    if v.species is None:
        return data["times"]
    if v.species not in data["species"]:
        raise SedmlError(plan.source, "variable", v.id, f"species '{v.species}' is not in the model of task "
                         f"'{unit.id}'")
    s = data["species"].index(v.species)
    over = set(v.over or unit.dims) if v.aggregate else set()
    ens = unit.ensemble
    if ens is not None and ens in over and v.aggregate in ("mean", "sd", "variance"):
        # the engines' own ensemble statistics (population moments over the realizations)
        arr = data["mean"][..., s] if v.aggregate == "mean" else data["std"][..., s]
        arr = arr ** 2 if v.aggregate == "variance" else arr
        over = over - {ens}
        dims = [d for d in unit.dims if d != ens]
    elif ens is not None:
        arr = data["states"][..., s]                       # (P, R, k)
        dims = list(unit.dims)
    else:
        arr = data["mean"][..., s]                         # one realization: its own counts
        dims = list(unit.dims)
    if unit.sweep is None:
        arr = arr[0]                                       # no sweep axis
    for d in [d for d in dims if d in over]:
        arr = _REDUCE[v.aggregate](arr, axis=dims.index(d))
        dims.remove(d)
    return np.asarray(arr, dtype=float)


def generator_values(plan: Plan, units: Mapping[str, Unit], data: Mapping[str, Mapping[str, Any]]) -> dict:
    """Every data generator an output uses, evaluated (NumPy broadcasting over its variables)."""
    used = {ref for o in plan.outputs for item in o.items for ref in (item[2:] if o.kind == "report" else item[1:])}
    values = {}
    for gid in sorted(used):
        g = plan.generators[gid]
        env: dict[str, Any] = dict(g.parameters)
        for v in g.variables:
            env[v.id] = variable_value(plan, v, units[v.task], data[v.task])
        try:
            values[gid] = np.broadcast_to(evaluate_math(g.math, env), np.broadcast_shapes(
                *[np.shape(x) for x in env.values()])).copy() if env else evaluate_math(g.math, env)
        except ValueError as exc:
            raise SedmlError(plan.source, "dataGenerator", gid, f"its variables have shapes that do not "
                             f"combine ({exc})") from None
    return values


# ---- outputs -----------------------------------------------------------------------------------
def _pad(arrays: list[np.ndarray]) -> np.ndarray:
    ndim = max(a.ndim for a in arrays)
    shape = [max((a.shape[i] if i < a.ndim else 1) for a in arrays) for i in range(ndim)]
    out = np.full((len(arrays), *shape), np.nan)
    for i, a in enumerate(arrays):
        out[(i,) + tuple(slice(0, n) for n in a.shape) + (0,) * (ndim - a.ndim)] = a
    return out


def write_report(out: Path, plan: Plan, output, values: Mapping[str, np.ndarray]) -> list[Path]:
    """The report as CSV (where its data sets are 1-D) and into ``reports.h5``."""
    import h5py

    rel = f"{plan.location}/{output.id}"
    arrays = [np.atleast_1d(values[ref]) for _, _, ref in output.items]
    written = []
    if all(a.ndim == 1 for a in arrays):
        lines = []
        for (_, label, _), a in zip(output.items, arrays):
            lines.append(",".join([_csv_label(label)] + [repr(float(x)) for x in a]))
        path = out / f"{rel}.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, ("\n".join(lines) + "\n").encode())
        written.append(path)
    h5 = out / H5_NAME
    out.mkdir(parents=True, exist_ok=True)
    with h5py.File(h5, "a") as fh:
        if rel in fh:
            del fh[rel]
        ds = fh.create_dataset(rel, data=_pad(arrays), compression="gzip")
        ds.attrs["_type"] = "SedReport"
        ds.attrs["uri"] = rel
        ds.attrs["sedmlId"] = output.id
        ds.attrs["sedmlName"] = output.name
        ds.attrs["sedmlDataSetIds"] = [i for i, _, _ in output.items]
        ds.attrs["sedmlDataSetLabels"] = [lab for _, lab, _ in output.items]
        ds.attrs["sedmlDataSetNames"] = list(output.item_names)
        ds.attrs["sedmlDataSetDataTypes"] = ["float64"] * len(arrays)
        ds.attrs["sedmlDataSetShapes"] = [",".join(str(n) for n in a.shape) for a in arrays]
        parts = rel.split("/")[:-1]
        for i in range(len(parts)):
            group = fh["/".join(parts[: i + 1])]
            group.attrs["uri"] = group.attrs["combineArchiveLocation"] = "/".join(parts[: i + 1])
    written.append(h5)
    return written


def _csv_label(label: str) -> str:
    return '"' + label.replace('"', '""') + '"' if any(c in label for c in ',"\n') else label


def write_plot(out: Path, plan: Plan, output, values: Mapping[str, np.ndarray]) -> Path:
    """A plot2D as PNG: each curve's y against x; a repeated curve draws one line per repeat."""
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 4.5), dpi=100)
    ax = fig.add_subplot()
    for (cid, xref, yref), name in zip(output.items, output.item_names):
        x, y = np.asarray(values[xref]), np.asarray(values[yref])
        ys = y.reshape(-1, y.shape[-1]) if y.ndim > 1 else y[None]
        xs = np.broadcast_to(x.reshape(-1, x.shape[-1]) if x.ndim > 1 else x[None], ys.shape)
        for i, (xi, yi) in enumerate(zip(xs, ys)):
            ax.plot(xi, yi, lw=1.0 if len(ys) == 1 else 0.5, color=f"C{output.items.index((cid, xref, yref)) % 10}",
                    label=name if i == 0 else None)
    ax.set_title(output.name)
    ax.legend(fontsize=8)
    path = out / f"{plan.location}/{output.id}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    return path
