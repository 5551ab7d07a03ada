"""Performance tables from committed benchmark results: ``benchmarks/<device>/*.json`` (records
written by ``app.sims.common.bench_record``) become the whole of ``docs/benchmarks.md``, the
blocks of README.md between ``<!-- bench-table:begin -->`` and ``<!-- bench-table:end -->``
(the headline cases) and between ``<!-- first-run-table:begin -->`` and
``<!-- first-run-table:end -->`` (the newest ``bench startup``: time to the first frame), and
the bench-table block of each ``docs/performance/<domain>.md`` that has the markers (that
domain's results: its cases of every comparison and its own records, ``<domain>`` or
``<domain>-...``), and on any page under ``docs/`` the block between
``<!-- bench-record:begin NAME -->`` and ``<!-- bench-record:end NAME -->`` (the newest record of
benchmark NAME on each device, e.g. a validation page's table).

    python scripts/bench_tables.py            # write both
    python scripts/bench_tables.py --check    # exit 1 when either is not what the results give

A figure without a committed result does not appear: nothing here is typed by hand.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BEGIN, END = "<!-- bench-table:begin -->", "<!-- bench-table:end -->"
FIRST_BEGIN, FIRST_END = "<!-- first-run-table:begin -->", "<!-- first-run-table:end -->"
MAX_COLUMNS = 9
# a performance page's records when its name is not theirs: the cpu page shows every CPU case
RECORDS_OF_PAGE = {"sweeps": "sweep", "startup": "startup"}


def load(results_dir: Path) -> dict[str, list[dict]]:
    """{device folder: records, by benchmark name}; a file that is not a record is an error."""
    out: dict[str, list[dict]] = {}
    for folder in sorted(p for p in results_dir.iterdir() if p.is_dir()) if results_dir.is_dir() else []:
        records = []
        for path in sorted(folder.glob("*.json")):
            try:
                doc = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise SystemExit(f"{path}: not readable JSON ({exc})") from None
            if not isinstance(doc, dict) or not {"benchmark", "environment", "results"} <= set(doc):
                raise SystemExit(f"{path}: not a benchmark record (keys benchmark, environment, results)")
            records.append({**doc, "file": path.relative_to(results_dir).as_posix()})
        if records:
            out[folder.name] = records
    return out


def _num(x) -> str:
    if isinstance(x, bool) or x is None:
        return "-" if x is None else ("yes" if x else "no")
    if isinstance(x, int):
        return f"{x:,}"
    if isinstance(x, float):
        return f"{x:.4g}"
    return str(x).replace("|", "/")


def _table(header: list[str], rows: list[list]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(_num(c) for c in row) + " |" for row in rows]
    return lines


def _median(values: list[float]) -> str:
    if not values:
        return "-"
    med = statistics.median(values)
    return f"{med:.4g} ± {100 * (max(values) - min(values)) / med / 2:.1f} %"


def compare_table(results: dict) -> list[str]:
    rows = []
    for c in results.get("cases", []):
        ratio = f"{c['ratio']:.3f}" if "ratio" in c else "-"
        rows.append([c["case"], c["unit"], _median(c["current_seconds"]),
                     _median(c["reference_seconds"]) if c["reference_seconds"] else "not in the reference",
                     ratio])
    return [f"Headline cases, this commit against {results.get('reference', '?')} in the same run "
            "(median ± half the range over all timings; ratio below 1 is faster):", "",
            *_table(["case", "unit", "this commit (s)", "reference (s)", "ratio"], rows)]


def generic_table(results: dict) -> list[str]:
    rows = next((results[k] for k in ("cases", "rows") if isinstance(results.get(k), list)), None)
    if not rows or not all(isinstance(r, dict) for r in rows):
        scalars = {k: v for k, v in results.items() if isinstance(v, (int, float, str)) and not isinstance(v, bool)}
        return _table(["quantity", "value"], [[k, v] for k, v in scalars.items()]) if scalars else []
    keys: list[str] = []
    for r in rows:
        for k, v in r.items():
            if k not in keys and (isinstance(v, (int, float)) or (isinstance(v, str) and len(v) <= 40)):
                keys.append(k)
    keys = [k for k in keys if sum(k in r for r in rows) * 2 >= len(rows)][:MAX_COLUMNS]
    return _table(keys, [[r.get(k) for k in keys] for r in rows])


def _seconds(x) -> str:
    return "-" if x is None else f"{x:.2f}"


def startup_table(results: dict) -> list[str]:
    """``bench startup``: per panel and front end, the first frame cold, warm and on a second run,
    with the targets and the machine's load while it was measured."""
    rows = [[r["panel"], r["front"], r["skipped"], "", "", ""] if "skipped" in r else
            [r["panel"], r["front"], _seconds(r.get("cold_first_frame_s")), _seconds(r.get("warm_first_frame_s")),
             _seconds(r.get("again_first_frame_s")), _seconds(r.get("cold_process_start_to_first_frame_s"))]
            for r in results.get("rows", [])]
    load = [results.get("load_average_before"), results.get("load_average_after")]
    loads = " and ".join(f"{a[0]:.1f}" for a in load if a)
    return [f"Seconds from Run to the first frame of each panel's CPU default run (target: cold "
            f"{results.get('target_cold_s', '?')} s, warm {results.get('target_warm_s', '?')} s); "
            f"load average (1 min) {loads or 'not recorded'} before and after:", "",
            *_table(["panel", "front end", "cold caches (s)", "warm caches (s)", "second run (s)",
                     "cold, from process start (s)"], rows)]


def estimates_table(results: dict) -> list[str]:
    """``scripts/check_estimates.py``: per shipped preset, estimate against actual on the CPU
    (a preset longer than the check's limit is run shortened: the size it ran at is named)."""
    rows = [[r["preset"], r.get("shortened", "as shipped"), r.get("estimate_s"), r.get("actual_s"),
             r.get("ratio"), r["result"]] for r in results.get("rows", [])]
    load = [results.get("load_average_before"), results.get("load_average_after")]
    loads = " and ".join(f"{a[0]:.1f}" for a in load if a)
    return [f"Estimated against actual wall seconds on the {results.get('engine', 'CPU')} engine, every "
            f"shipped preset (longer than {results.get('max_seconds', '?')} s: shortened); load average "
            f"(1 min) {loads or 'not recorded'} before and after:", "",
            *_table(["preset", "size", "estimate (s)", "actual (s)", "actual / estimate", "result"], rows)]


METHODS = {"rlfe": "RLFE", "grl1": "GRL1", "midpoint": "midpoint-RL", "rkf45": "RKF 5(4)", "bs32": "BS 3(2)",
           "te21": "TE 2(1)"}


def _setting(row: dict) -> str:
    return f"at {row['at']:g} rt {row['rt']:g}" if "at" in row else f"Δt {row['dt']:g}"


def cardiac_paper_table(results: dict) -> list[str]:
    """``bench cardiac --paper``: every method's time, steps and errors against the reference run
    on the sphere, the paper's figures beside them; the reference and what its waves did; on a
    GPU the fixed-step floor and the targets."""
    ref = results["reference"]
    s2 = (f"S2 (at {results['s2_ms']:g} ms) excited {100 * ref['s2_excited_fraction']:.1f} %"
          if results["t_end"] > results["s2_ms"] else f"S2 (at {results['s2_ms']:g} ms) is past this run's end")
    lines = [f"Level-{results['level']} sphere ({results['n_cells']:,} cells), {results['t_end']:g} ms"
             + (" (shortened: `--quick`)" if results.get("quick") else "")
             + f", {results['backend']} engine. Reference: BS 3(2)+RL in {ref['precision']} at {ref['at']:g}, "
             f"rt {ref['rt']:g}: {ref['steps_accepted']:,} steps ({ref['steps_rejected']:,} rejected), "
             f"{ref['wall_seconds']:.3g} s. In the reference S1 excited {100 * ref['s1_excited_fraction']:.1f} % "
             f"of the cells, the last at {ref['s1_last_activation_ms']:.1f} ms; {s2}.", ""]
    if results["backend"] != "cuda" and results.get("load_average_before"):
        lines[0] += (f" Load average (1 min) {results['load_average_before'][0]:.1f} before and "
                     f"{results['load_average_after'][0]:.1f} after: other jobs shared the cores.")
    floor = "floor_bytes_per_cell_step" in results
    papers = results["level"] == 7 and results["t_end"] == 300 and not results.get("quick")
    if not papers:
        lines += ["The paper's figures are for the level-7 sphere over 300 ms; this run is another case, "
                  "so they are not set beside it.", ""]
    rows = []
    for r in results["rows"]:
        paper = r.get("paper", "-")
        paper_text = ("fail" if paper is None else "-" if paper == "-" else
                      f"{paper['seconds']:g}, {paper['steps']:,}, {paper['i_rel_error']:g}, {paper['i_abs_error']:g}, "
                      f"{paper['rrms']:g}")
        if "error" in r:
            rows.append([METHODS[r["method"]], _setting(r), f"error: {r['error'][:60]}", "", "", "", "",
                         *([""] if floor else []), *([paper_text] if papers else [])])
            continue
        steps = f"{r['steps']:,}" + (f" ({r['rejected']:,})" if "at" in r else "")
        if r.get("stopped"):
            steps += f", stopped: {r['stopped'][:40]}"
        rows.append([METHODS[r["method"]], _setting(r), f"{r['wall_seconds']:.3g}", steps, f"{r['i_rel_error']:.2g}",
                     f"{r['i_abs_error']:.3g}", f"{r['rrms']:.2g}",
                     *([f"{r['floor_seconds']:.3g}" if "floor_seconds" in r else "-"] if floor else []),
                     *([paper_text] if papers else [])])
    lines += _table(["method", "setting", "time s", "steps (rej)", "I_Rel", "I_Abs", "RRMS",
                     *(["floor s"] if floor else []),
                     *(["paper: time s, steps, I_Rel, I_Abs, RRMS"] if papers else [])], rows)
    if floor:
        lines += ["", f"Floor of the fixed-step methods: {results['floor_bytes_per_cell_step']} B per cell per step "
                      f"(the {results['states']} float32 states read and written, the operator row of "
                      f"{results['neighbour_width']} neighbour indices and weights"
                      + (f" at {results['row_bytes_per_slot']} B a slot" if "row_bytes_per_slot" in results else "")
                      + ", the neighbours' V, the activation "
                      f"bookkeeping) at the card's {results['bandwidth_bytes_per_s'] / 1e12:.2f} TB/s."]
    targets = [r for r in results["rows"] if "target_seconds" in r and "wall_seconds" in r]
    if targets and papers:
        lines += ["", "Targets: " + "; ".join(
            f"{METHODS[r['method']]} {_setting(r)} under {r['target_seconds']:g} s: {r['wall_seconds']:.3g} s"
            + (f" ({r['paper']['seconds'] / r['wall_seconds']:.0f}x faster than the paper's "
               f"{r['paper']['seconds']:g} s)" if r.get("paper") else "") for r in targets) + "."]
    return lines


def cardiac_split_table(results: dict) -> list[str]:
    """``scripts/cardiac/split_study.py``: conduction velocity in a cable and the N-version slab's
    activation times, each split run against the unsplit reference and the codes' consensus."""
    cables = results.get("cable", [])
    cable = results.get("cable_description", "a 10 mm cable (the slab's along-fibre diffusivity)")
    lines = [f"Engine: {results.get('engine', 'cpu')}. Conduction velocity of a planar wave in {cable}, "
             "error against the unsplit run ("
             + "; ".join(f"dx {c['dx_mm']:g}: dt {c['reference_dt_ms']:g} ms, {c['reference_cv_mm_per_ms']:.4f} mm/ms"
                         for c in cables) + "):", ""]
    if cables:
        runs = [r["run"] for r in cables[0]["rows"]]
        rows = [[run, *(f"{100 * next(r['relative_error'] for r in c['rows'] if r['run'] == run):+.2f} %"
                        for c in cables)] for run in runs]
        lines += _table(["run", *(f"CV error, dx {c['dx_mm']:g} mm" for c in cables)], rows)
    for slab in results.get("nversion", []):
        cons = slab["consensus"]
        lines += ["", f"N-version slab, dx {slab['dx_mm']:g} mm ({slab['nodes']:,} nodes, {slab['t_end_ms']:g} ms): "
                      "activation (ms) at P2, P5, P8 and P9, the largest difference at P1–P9 from the unsplit run at "
                      f"dt {slab['reference_dt_ms']:g} ms, and the largest distance from the codes' consensus in its "
                      "standard deviations (consensus " + ", ".join(f"{k} {cons[k][0]:g} ± {cons[k][1]:g}"
                                                                   for k in ("P2", "P5", "P8", "P9")) + "):", ""]
        rows = [[r["run"], *(f"{r['activation_ms'][k]:.2f}" for k in ("P2", "P5", "P8", "P9")),
                 f"{r['max_abs_error_ms']:.2f}", f"{r['max_consensus_sd']:.2f}"] for r in slab["rows"]]
        lines += _table(["run", "P2", "P5", "P8", "P9", "max Δ (ms)", "max SD"], rows)
    return lines


def cardiac_mesh_table(results: dict) -> list[str]:
    """``bench cardiac --mesh`` (unsplit or split): the run, its time against real time and the
    bandwidth floor."""
    split = (f"{results['split']} split every {results['split_dt_ms']:g} ms (RKC1 stages "
             f"{'+'.join(map(str, results['diffusion_stages']))}), " if results.get("split_dt_ms") else "")
    r = results
    rows = [["mesh", f"{r['nodes']:,} nodes, {r['elements']:,} tetrahedra, width {r['neighbour_width']}"],
            ["run", f"{r['states']} states, {split}cell step {r['dt_ms']:g} ms, {r['t_end_ms']:g} ms, "
                    f"{r['steps']:,} steps"],
            ["wall", f"{r['wall_seconds']:.3f} s: {r['real_time_factor']:.3f}x real time"],
            ["floor", f"{r['floor_bytes_per_node_step']} B per node and step"
                      + (f" (rows at {r['row_bytes_per_slot']} B a slot)" if "row_bytes_per_slot" in r else "")
                      + f": {r['floor_seconds']:.3f} s at "
                      f"{r['nominal_bandwidth_GBps']:g} GB/s, {r['floor_seconds'] / r['wall_seconds']:.0%} of the wall "
                      f"time ({r['effective_bandwidth_GBps']:.0f} GB/s moved)"],
            ["activated", f"{results['activated_fraction']:.1%} of the nodes"]]
    return _table(["quantity", "value"], rows)


def _l2_window(variant: dict) -> str:
    if variant.get("l2", "off") == "off":
        return "no"
    return f"{variant['l2_rows_bytes'] / 2**20:.1f} of {variant['rows_bytes'] / 2**20:.1f} MiB"


def _table_step(variant: dict) -> str:
    if variant.get("tables", "on") == "off":
        return "no tables"
    return f"{variant['lookup_step_mV']:g}" if "lookup_step_mV" in variant else "0.02"


def cardiac_mesh_kernels_table(results: dict) -> list[str]:
    """``scripts/cardiac/split_breakdown.py``: each split kernel alone (µs, CUDA events after a
    warm-up) at rest and mid-wave, per launch bound, row format, table step (or no tables), L2
    window and whether the cell kernel did the first half's last diffusion stage (Strang only;
    records from before the window or that kernel ran without them)."""
    rows = []
    for v in results["variants"]:
        for when in ("at_rest", "mid_wave"):
            t = v[when]
            diffusion = ", ".join(f"{k.split('_')[1]}: {t[k]:.1f} ({t[k.replace('_us', '_stages')]} stages)"
                                  for k in sorted(t) if k.startswith("diffusion_") and k.endswith("_us"))
            cells = ", ".join(f"k={k.split('_')[2]}: {t[k]:.1f}" for k in sorted(t)
                              if k.startswith("cell_substeps_"))
            run = v.get("run")
            rows.append([v["min_blocks"], f"{v['rows']} ({v['row_bytes_per_slot']} B a slot)",
                         _table_step(v), _l2_window(v),
                         "yes" if v.get("fuse") == "on" and results["split"] == "strang" else "no",
                         when.replace("_", " "),
                         cells, diffusion, f"{t['split_step_us']:.1f}",
                         f"{run['real_time_factor']:.3f}x" if run and when == "at_rest" else ""])
    head = [f"{results['split']} split every {results['split_dt_ms']:g} ms, cell step {results['dt_ms']:g} ms, "
            f"{results['nodes']:,} nodes; mid wave: after {results['advance_ms']:g} ms", ""]
    return head + _table(["launch bound", "rows", "table step mV", "rows in L2", "last stage in cells",
                          "state", "cell substeps µs",
                          "diffusion super-step µs (by fraction of the split step)", "split step µs", "whole run"],
                         rows)


def epidermis_table(results: dict) -> list[str]:
    """``bench epidermis``: per case the time a step, against the case's floor, the pair-list
    entries (candidates of an evaluation) and, for the full model, the tissue it grew."""
    rows = []
    for c in results.get("cases", []):
        grew = (f"{c['cells']} cells, {c['layers']} layers, {c['suprabasal_fraction']:.0%} suprabasal"
                if "layers" in c else "")
        floor = c.get("floor_us_per_step")
        rows.append([c.get("case"), c.get("engine"), c.get("elements"), c.get("steps"), c.get("us_per_step"),
                     c.get("steps_per_second"), floor, c.get("measured_over_floor"),
                     c.get("candidates_per_element"), grew])
    return _table(["case", "engine", "elements", "steps", "µs a step", "steps/s", "floor µs a step",
                   "× floor", "candidates an element", "tissue"], rows)


TABLES = {"compare": compare_table, "startup": startup_table, "estimates": estimates_table,
          "cardiac-paper": cardiac_paper_table, "cardiac-split": cardiac_split_table,
          "cardiac-split-crn": cardiac_split_table,
          "epidermis": epidermis_table}


def table_of(name: str):
    """The table function of a benchmark's records (``cardiac-mesh`` and its split variants share one)."""
    if name == "cardiac-mesh-kernels":
        return cardiac_mesh_kernels_table
    return cardiac_mesh_table if name.startswith("cardiac-mesh") else TABLES.get(name, generic_table)


def _environment(env: dict) -> str:
    parts = [f"commit {env.get('commit', '?')}", env.get("date", "")[:10]]
    if env.get("driver"):
        parts.append(f"driver {env['driver']}")
    if env.get("compiler"):
        parts.append(env["compiler"].split(" (")[0])
    parts.append(env.get("cpu", ""))
    return "; ".join(p for p in parts if p)


def page(records: dict[str, list[dict]]) -> str:
    lines = ["# Benchmarks", "",
             "Every figure on this page comes from a result file under `benchmarks/` in the source tree,",
             "written by `python -m app bench NAME` or `python -m app bench compare`; the page is",
             "generated from those files by `scripts/bench_tables.py`. Where a device has no result for a",
             "benchmark, the benchmark does not appear for it.", ""]
    if not records:
        lines += ["No results are committed yet.", ""]
    for folder, docs in records.items():
        device = next((d["environment"].get("device") for d in docs if d["environment"].get("device")), folder)
        if device == "cpu":                    # a CPU-only record: name the processor
            device = f"CPU: {docs[0]['environment'].get('cpu') or folder}"
        lines += [f"## {device}", ""]
        for doc in sorted(docs, key=lambda d: (d["benchmark"] != "compare", d["benchmark"])):
            lines += [f"### {doc['benchmark']}", "", f"Measured at {_environment(doc['environment'])}"
                      f" (`benchmarks/{doc['file']}`).", ""]
            body = table_of(doc["benchmark"])(doc["results"])
            lines += (body or ["(no tabular figures)"]) + [""]
    return "\n".join(lines).rstrip() + "\n"


def readme_block(records: dict[str, list[dict]]) -> str:
    """The headline figures of every device with a committed comparison: the compared tree's
    medians (the newest comparison of a case)."""
    columns, cases, units = [], {}, {}
    for folder, docs in records.items():
        # oldest first: a case measured again by a later comparison shows its later figure
        compared = sorted((d for d in docs if d["benchmark"] == "compare"), key=lambda d: d["environment"]["date"])
        if not compared:
            continue
        device = compared[0]["environment"].get("device") or folder
        columns.append(device)
        for doc in compared:
            for c in doc["results"].get("cases", []):
                if c["current_seconds"]:
                    cases.setdefault(c["case"], {})[device] = statistics.median(c["current_seconds"])
                    units[c["case"]] = c["unit"]
    if not columns:
        return "\n".join([BEGIN, "No benchmark results are committed yet (see docs/benchmarks.md).", END])
    rows = [[name, units[name], *[vals.get(d) for d in columns]] for name, vals in cases.items()]
    lines = [BEGIN, "<!-- generated by scripts/bench_tables.py from benchmarks/; do not edit -->", "",
             *_table(["case", "unit", *[f"{d} (s)" for d in columns]], rows), "",
             "Details, references and the machines: docs/benchmarks.md.", END]
    return "\n".join(lines)


def _date(doc: dict) -> str:
    return doc["environment"].get("date", "")


def _case_domain(case: dict) -> str:
    return case.get("domain") or case["case"].split("-")[0]


def domain_block(records: dict[str, list[dict]], page: str) -> str:
    """A performance page's block: the newest comparison row of each of the page's cases on each
    device (the domain's, or every CPU case for ``cpu``), then the page's own bench records
    (``<domain>`` or ``<domain>-...``), each naming its file."""
    domain = RECORDS_OF_PAGE.get(page, page)
    rows, own = [], []
    for folder, docs in records.items():
        newest: dict[str, list] = {}
        for doc in sorted(docs, key=_date):
            device = doc["environment"].get("device") or folder
            if doc["benchmark"] == "compare":
                for c in doc["results"].get("cases", []):
                    if domain in (_case_domain(c), c.get("device")) and c["current_seconds"]:
                        reference = (_median(c["reference_seconds"]) + f" ({doc['results'].get('reference', '?')})"
                                     if c["reference_seconds"] else "-")
                        where = f"{device} host CPU" if c.get("device") == "cpu" else device
                        newest[c["case"]] = [c["case"], c["unit"], where, _median(c["current_seconds"]), reference,
                                             f"{c['ratio']:.3f}" if "ratio" in c else "-",
                                             f"{doc['environment'].get('commit', '?')}, {_date(doc)[:10]}",
                                             f"`benchmarks/{doc['file']}`"]
            elif doc["benchmark"] == domain or doc["benchmark"].startswith(domain + "-"):
                own.append((device, doc))
        rows += newest.values()
    lines = [BEGIN, "<!-- generated by scripts/bench_tables.py from benchmarks/; do not edit -->", ""]
    if not rows and not own:
        lines += ["No result of this domain is committed yet; `python -m app bench compare` and "
                  f"`python -m app bench {domain}` write them (see [Benchmarks](../benchmarks.md)).", END]
        return "\n".join(lines)
    if rows:
        lines += ["Headline cases (median ± half the range; ratio: this commit over the reference, "
                  "timed alternately in the same run):", "",
                  *_table(["case", "unit", "device", "s", "reference s", "ratio", "commit, date", "result"],
                          rows), ""]
    for device, doc in own:
        lines += [f"`{doc['benchmark']}` on the {device}, {_environment(doc['environment'])}"
                  f" (`benchmarks/{doc['file']}`):", "",
                  *(table_of(doc["benchmark"])(doc["results"]) or ["(no tabular figures)"]),
                  ""]
    return "\n".join([*lines, END])


def first_run_block(records: dict[str, list[dict]]) -> str:
    """The newest ``bench startup`` record of any machine, with the machine named."""
    found = [d for docs in records.values() for d in docs if d["benchmark"] == "startup"]
    if not found:
        return "\n".join([FIRST_BEGIN, "No first-run measurement is committed yet.", FIRST_END])
    doc = max(found, key=lambda d: d["environment"].get("date", ""))
    return "\n".join([FIRST_BEGIN, "<!-- generated by scripts/bench_tables.py from benchmarks/; do not edit -->", "",
                      *startup_table(doc["results"]), "",
                      f"Measured on {_environment(doc['environment'])} (`benchmarks/{doc['file']}`).", FIRST_END])


RECORD_BEGIN, RECORD_END = "<!-- bench-record:begin {} -->", "<!-- bench-record:end {} -->"


def record_block(records: dict[str, list[dict]], name: str) -> str:
    """A page's block of one benchmark: its newest record on each device."""
    lines = [RECORD_BEGIN.format(name), "<!-- generated by scripts/bench_tables.py from benchmarks/; do not edit -->",
             ""]
    found = False
    for folder, docs in records.items():
        mine = [d for d in docs if d["benchmark"] == name]
        if not mine:
            continue
        doc = max(mine, key=_date)
        device = doc["environment"].get("device") or folder
        lines += [f"**{'CPU' if device == 'cpu' else device}**, {_environment(doc['environment'])} "
                  f"(`benchmarks/{doc['file']}`):", "",
                  *(table_of(name)(doc["results"]) or ["(no tabular figures)"]), ""]
        found = True
    if not found:
        lines += [f"No `{name}` result is committed yet (see [Benchmarks](../benchmarks.md)).", ""]
    return "\n".join([*lines, RECORD_END.format(name)])


def with_records(text: str, records: dict[str, list[dict]]) -> str:
    """A docs page with each of its ``bench-record`` blocks regenerated."""
    for name in re.findall(r"<!-- bench-record:begin ([\w.-]+) -->", text):
        text = with_block(text, record_block(records, name), RECORD_BEGIN.format(name), RECORD_END.format(name)) or text
    return text


def with_block(readme: str, block: str, begin: str = BEGIN, end: str = END) -> str | None:
    """README text with its marked block replaced, or None when it has no (single) pair of markers."""
    if readme.count(begin) != 1 or readme.count(end) != 1 or readme.index(begin) > readme.index(end):
        return None
    head, rest = readme.split(begin)
    _, tail = rest.split(end)
    return head + block + tail


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the generated files are stale")
    parser.add_argument("--root", type=Path, default=ROOT, help="the source tree (default: this one)")
    args = parser.parse_args(argv)
    records = load(args.root / "benchmarks")
    targets = {args.root / "docs" / "benchmarks.md": page(records)}
    readme = args.root / "README.md"
    if readme.is_file():
        text = readme.read_text(encoding="utf-8")
        for block, begin, end in ((readme_block(records), BEGIN, END),
                                  (first_run_block(records), FIRST_BEGIN, FIRST_END)):
            updated = with_block(text, block, begin, end)
            if updated is None:
                print(f"{readme}: no {begin} ... {end} block; that table is not generated")
            else:
                text = updated
        if text != readme.read_text(encoding="utf-8"):
            targets[readme] = text
    for path in sorted((args.root / "docs" / "performance").glob("*.md")):
        updated = with_block(path.read_text(encoding="utf-8"), domain_block(records, path.stem))
        if updated is not None:
            targets[path] = updated
    for path in sorted((args.root / "docs").rglob("*.md")):
        text = targets.get(path) or path.read_text(encoding="utf-8")
        updated = with_records(text, records)
        if updated != text:
            targets[path] = updated
    stale = [p for p, text in targets.items() if not p.is_file() or p.read_text(encoding="utf-8") != text]
    if args.check:
        for p in stale:
            print(f"{p} is not what benchmarks/ gives: run python scripts/bench_tables.py")
        return 1 if stale else 0
    for p in stale:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(targets[p], encoding="utf-8")
        print(f"wrote {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
