"""Every run folder is an RO-Crate (Process Run Crate profile): ``ro-crate-metadata.json``.

The crate's root dataset lists each file of the folder with its size and SHA-256; one
``CreateAction`` says what made them: the application (version and git commit) as its
instrument, the start and end time, the backend, device, CUDA driver and kernel compiler, the
seed, the inputs (the resolved config and the files it names) as its ``object`` and every other
file as its ``result``. Written with the ``rocrate`` package (ro-crate-py).
"""

from __future__ import annotations

import datetime as _dt
import functools
import hashlib
import subprocess
from pathlib import Path
from typing import Any, Iterable, Mapping

METADATA = "ro-crate-metadata.json"
PROCESS_PROFILE = "https://w3id.org/ro/wfrun/process/0.5"
RO_CRATE_SPEC = "https://w3id.org/ro/crate/1.1"
#: file names that describe what was asked for (the rest of a folder is what the run made)
INPUT_NAMES = ("config.yaml",)
_FORMATS = {".yaml": "application/yaml", ".json": "application/json", ".npz": "application/zip",
            ".png": "image/png", ".csv": "text/csv", ".xml": "application/xml", ".h5": "application/x-hdf5",
            ".omex": "application/zip", ".parquet": "application/vnd.apache.parquet",
            ".sedml": "application/xml", ".txt": "text/plain"}


def sha256(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@functools.cache
def git_commit() -> str:
    """The commit of the source checkout the app runs from, or '' (an installed wheel)."""
    here = Path(__file__).resolve().parents[3]
    if not (here / ".git").exists():
        return ""
    try:
        out = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def compiler_text(backend: str) -> str:
    """What turned the engine into machine code: the CUDA kernel compiler, Numba's JIT, or none
    (the NumPy reference); ``backend`` may list several, comma-separated (a sweep's points)."""
    texts = []
    for name in [b for b in backend.split(",") if b]:
        if name == "cuda":
            from app.compute import compilers
            texts.append(compilers.choose()[1])
        elif name == "cpu":
            import numba
            texts.append(f"Numba {numba.__version__} (LLVM JIT)")
        elif name == "cpu-reference":
            texts.append("none (NumPy reference engine)")
        else:
            texts.append(f"unknown (backend {name})")
    return "; ".join(texts) or "unknown"


def input_files(config: Any, limit: int = 100) -> list[Path]:
    """Files a run config names by absolute path (an SBML or CellML model, a recording)."""
    found: list[Path] = []

    def walk(value: Any) -> None:
        if len(found) >= limit:
            return
        if isinstance(value, Mapping):
            for v in value.values():
                walk(v)
        elif isinstance(value, (list, tuple)):
            for v in value:
                walk(v)
        elif isinstance(value, str) and value.startswith("/") and len(value) < 4096:
            path = Path(value)
            if path.is_file() and path not in found:
                found.append(path)
    walk(config)
    return found


def iso(timestamp: float) -> str:
    return _dt.datetime.fromtimestamp(timestamp, _dt.timezone.utc).isoformat(timespec="seconds")


def _files(folder: Path) -> list[Path]:
    """Every plain file under ``folder`` (sub-folders too), except hidden and the crate itself."""
    out = []
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if any(part.startswith(".") for part in rel.parts) or rel.as_posix() == METADATA:
            continue
        if path.is_file() and not path.is_symlink():
            out.append(path)
    return out


def write_crate(folder: str | Path, *, name: str, started: float, ended: float,
                summary: Mapping[str, Any] | None = None, inputs: Iterable[str] = INPUT_NAMES,
                files: Iterable[str] | None = None, external: Iterable[str | Path] = (),
                description: str = "") -> Path:
    """Write ``folder/ro-crate-metadata.json`` describing every file now in ``folder``.

    ``summary`` supplies the backend, device and seed where the run recorded them; files named
    in ``inputs`` (relative to the folder) are the action's object, all others its result.
    ``files`` limits the crate to those names (default: every file under ``folder``);
    ``external`` are input files outside the folder (a model the config names), listed by their
    ``file://`` URI with their hash.
    """
    from rocrate.model.contextentity import ContextEntity
    from rocrate.rocrate import ROCrate

    from app import __version__
    from app.compute.device import driver_version

    folder = Path(folder)
    summary = dict(summary or {})
    inputs = set(inputs)
    crate = ROCrate(version="1.1")
    root = crate.root_dataset
    root["name"] = name
    root["description"] = description or f"{name}: the files of one run of BioGPU Studio"
    root["datePublished"] = iso(ended)
    root["license"] = crate.add(ContextEntity(crate, "https://spdx.org/licenses/CC-BY-4.0", properties={
        "@type": "CreativeWork", "name": "Creative Commons Attribution 4.0"}))
    profile = crate.add(ContextEntity(crate, PROCESS_PROFILE, properties={
        "@type": "CreativeWork", "name": "Process Run Crate", "version": "0.5"}))
    root["conformsTo"] = profile
    objects: list[Any] = []
    results: list[Any] = []
    paths = _files(folder) if files is None else [folder / f for f in files if f != METADATA]
    for path in paths:
        rel = path.relative_to(folder).as_posix()
        entity = crate.add_file(path, dest_path=rel, properties={
            "name": rel, "contentSize": str(path.stat().st_size), "sha256": sha256(path),
            "encodingFormat": _FORMATS.get(path.suffix.lower(), "application/octet-stream")})
        (objects if rel in inputs else results).append(entity)
    for named in external:
        path = Path(named).resolve()
        objects.append(crate.add_file(path.as_uri(), fetch_remote=False, properties={
            "name": path.name, "contentSize": str(path.stat().st_size), "sha256": sha256(path),
            "encodingFormat": _FORMATS.get(path.suffix.lower(), "application/octet-stream"),
            "description": "an input file the run config names (outside the run folder)"}))
    commit = git_commit()
    app = crate.add(ContextEntity(crate, "#biogpu-studio", properties={
        "@type": "SoftwareApplication", "name": "BioGPU Studio",
        "version": __version__ + (f"+git.{commit[:12]}" if commit else ""),
        "url": "https://github.com/biogpu/biogpu-studio"}))
    backend = str(summary.get("backend", ""))
    settings = {
        "seed": summary.get("seed"), "backend": backend or "unknown",
        "device": str(summary.get("device", "")) or "unknown",
        "cuda driver": (driver_version() or "unknown") if "cuda" in backend.split(",") else "not used",
        "kernel compiler": compiler_text(backend),
        "git commit": commit or "unknown (not run from a git checkout)",
    }
    for key, value in settings.items():
        if value is not None:
            objects.append(crate.add(ContextEntity(crate, "#" + key.replace(" ", "-"), properties={
                "@type": "PropertyValue", "name": key, "value": str(value)})))
    finished = summary.get("finished", True)
    action = crate.add_action(app, identifier="#run", properties={
        "name": f"Run of {name}", "description": "a simulation run of BioGPU Studio",
        "startTime": iso(started), "endTime": iso(ended),
        "actionStatus": {"@id": "http://schema.org/" + ("CompletedActionStatus" if finished
                                                         else "FailedActionStatus")}})
    action["object"] = objects[0] if len(objects) == 1 else objects
    action["result"] = results[0] if len(results) == 1 else results
    root["mentions"] = action
    # schema.org's checksum term (RO-Crate 1.2 and later define it; 1.1 takes it as an extra term)
    crate.metadata.extra_terms["sha256"] = "http://schema.org/sha256"
    crate.metadata.write(folder)
    return folder / METADATA
