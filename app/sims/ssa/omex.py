"""COMBINE/OMEX archives: read one safely, write one with python-libcombine.

Reading checks the ZIP before anything is written: member count, names (no absolute paths,
no ``..``, no drive letters or backslashes, no duplicates), no symbolic links or special files,
sizes and compression ratios (a zip bomb is refused before it is inflated; members are also
counted while they are inflated, so a header that lies does not help), and the manifest's size.
Members are then extracted into a fresh folder, the manifest is read with libCOMBINE, and every
entry must name a member of the archive (a URL or a path outside it is an external reference,
refused). Every refusal is an :class:`ArchiveError` naming the archive and the member.
"""

from __future__ import annotations

import shutil
import stat
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from app.sims.common.config import ConfigError

MAX_MEMBERS = 10_000
MAX_MEMBER_BYTES = 512 << 20      # one inflated member
MAX_TOTAL_BYTES = 1 << 30         # the whole inflated archive
MAX_RATIO = 200                   # inflated / compressed, for members over RATIO_FLOOR
RATIO_FLOOR = 1 << 20
MAX_MANIFEST_BYTES = 4 << 20
FORMATS = {
    "sedml": "http://identifiers.org/combine.specifications/sed-ml",
    "sbml": "http://identifiers.org/combine.specifications/sbml",
    "omex": "http://identifiers.org/combine.specifications/omex",
    "manifest": "http://identifiers.org/combine.specifications/omex-manifest",
}


class ArchiveError(ConfigError):
    """An archive refused: the archive's path, the member and the reason."""

    def __init__(self, archive: str | Path, member: str | None, reason: str):
        super().__init__((f"member '{member}': " if member else "") + reason, source=str(archive))
        self.archive, self.member, self.reason = str(archive), member, reason


@dataclass(frozen=True)
class Entry:
    """One manifest entry: its location (relative, POSIX), format URI and master flag."""

    location: str
    format: str
    master: bool
    path: Path              # where it was extracted

    @property
    def kind(self) -> str:
        for name, uri in FORMATS.items():
            if self.format.startswith(uri):
                return name
        return "other"


@dataclass(frozen=True)
class Archive:
    source: Path
    folder: Path            # the extracted members
    entries: tuple[Entry, ...]

    def sedml(self) -> list[Entry]:
        """The SED-ML files to execute: the master ones if any is master, else all."""
        docs = [e for e in self.entries if e.kind == "sedml"]
        masters = [e for e in docs if e.master]
        return masters or docs


def _libcombine():
    try:
        import libcombine
    except ImportError as exc:
        raise ConfigError("COMBINE archives need python-libcombine: pip install 'biogpu-studio[sedml]'") from exc
    return libcombine


def safe_name(archive: Path, name: str) -> PurePosixPath:
    """``name`` as a relative POSIX path inside the archive, or an ArchiveError."""
    if not name or "\x00" in name or "\\" in name or name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        raise ArchiveError(archive, name, "the member name is an absolute or non-POSIX path")
    path = PurePosixPath(name)
    if any(part in ("..", "") for part in path.parts) or len(name) > 1024:
        raise ArchiveError(archive, name, "the member name leaves the archive (path traversal)")
    return path


def _check_members(archive: Path, zf: zipfile.ZipFile) -> list[zipfile.ZipInfo]:
    infos = zf.infolist()
    if len(infos) > MAX_MEMBERS:
        raise ArchiveError(archive, None, f"{len(infos):,} members; at most {MAX_MEMBERS:,} are read")
    seen: set[str] = set()
    total = 0
    files = []
    for info in infos:
        path = safe_name(archive, info.filename.rstrip("/") if info.is_dir() else info.filename)
        kind = stat.S_IFMT(info.external_attr >> 16)     # 0: no Unix type recorded (a plain file)
        if kind not in (0, stat.S_IFREG, stat.S_IFDIR):
            raise ArchiveError(archive, info.filename, "a symbolic link or special file; only plain files are read")
        key = path.as_posix().lower()
        if key in seen:
            raise ArchiveError(archive, info.filename, "a second member with the same name")
        seen.add(key)
        if info.is_dir():
            continue
        if info.file_size > MAX_MEMBER_BYTES:
            raise ArchiveError(archive, info.filename, f"inflates to {info.file_size:,} bytes; at most "
                               f"{MAX_MEMBER_BYTES:,} a member")
        if info.file_size > RATIO_FLOOR and info.file_size > MAX_RATIO * max(info.compress_size, 1):
            raise ArchiveError(archive, info.filename, f"compressed {info.file_size / max(info.compress_size, 1):,.0f}"
                               f" to 1 (a zip bomb?); at most {MAX_RATIO} to 1 is read")
        if path.name == "manifest.xml" and len(path.parts) == 1 and info.file_size > MAX_MANIFEST_BYTES:
            raise ArchiveError(archive, info.filename, f"a manifest of {info.file_size:,} bytes; at most "
                               f"{MAX_MANIFEST_BYTES:,}")
        total += info.file_size
        if total > MAX_TOTAL_BYTES:
            raise ArchiveError(archive, info.filename, f"the archive inflates to more than {MAX_TOTAL_BYTES:,} bytes")
        files.append(info)
    return files


def _extract(archive: Path, zf: zipfile.ZipFile, info: zipfile.ZipInfo, dest: Path) -> None:
    target = dest.joinpath(*safe_name(archive, info.filename).parts)
    target.parent.mkdir(parents=True, exist_ok=True)
    written = 0
    limit = min(info.file_size, MAX_MEMBER_BYTES)
    try:
        with zf.open(info) as src, open(target, "xb") as out:
            for block in iter(lambda: src.read(1 << 20), b""):
                written += len(block)
                if written > limit:        # the header said less: a lying zip bomb
                    raise ArchiveError(archive, info.filename, "inflates to more than its header says")
                out.write(block)
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError) as exc:
        # zipfile inflates no more than the header says; then the CRC no longer matches
        raise ArchiveError(archive, info.filename, f"cannot be inflated ({exc})") from None


def open_archive(path: str | Path, dest: str | Path) -> Archive:
    """Check and extract ``path`` into the new folder ``dest``; read its manifest."""
    archive = Path(path)
    dest = Path(dest)
    if not archive.is_file():
        raise ArchiveError(archive, None, "no such file")
    try:
        zf = zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, OSError) as exc:
        raise ArchiveError(archive, None, f"not a ZIP archive ({exc})") from None
    dest.mkdir(parents=True, exist_ok=False)
    try:
        with zf:
            infos = _check_members(archive, zf)
            for info in infos:
                _extract(archive, zf, info, dest)
        entries = _manifest(archive, dest)
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    return Archive(archive, dest, entries)


def _manifest(archive: Path, folder: Path) -> tuple[Entry, ...]:
    manifest = folder / "manifest.xml"
    if not manifest.is_file():
        raise ArchiveError(archive, "manifest.xml", "missing: a COMBINE archive lists its members there")
    text = manifest.read_text(encoding="utf-8", errors="replace")
    if "<!DOCTYPE" in text or "<!ENTITY" in text:
        raise ArchiveError(archive, "manifest.xml", "declares a DTD or entities; refused")
    lc = _libcombine()
    omex = lc.CaReader().readOMEXFromString(_normalized(archive, text))
    if omex is None or omex.getNumErrors(lc.LIBCOMBINE_SEV_ERROR) + omex.getNumErrors(lc.LIBCOMBINE_SEV_FATAL):
        log = omex.getErrorLog().toString() if omex is not None else ""
        raise ArchiveError(archive, "manifest.xml", f"not a valid OMEX manifest {log.strip()[:500]}")
    root = folder.resolve()
    entries = []
    for content in omex.getListOfContents():
        location = content.getLocation()
        if location in (".", "./"):
            continue                          # the archive itself
        member = location[2:] if location.startswith("./") else location
        if "://" in member or member.startswith(("urn:", "http:", "https:", "file:")):
            raise ArchiveError(archive, location, "an external reference; only members of the archive are read")
        rel = safe_name(archive, member)
        target = folder.joinpath(*rel.parts)
        if target.is_symlink() or not target.resolve().is_relative_to(root):
            raise ArchiveError(archive, location, "the manifest entry leaves the archive")
        if member == "manifest.xml":
            continue
        if not target.is_file():
            raise ArchiveError(archive, location, "listed in the manifest but not in the archive")
        entries.append(Entry(rel.as_posix(), content.getFormat(), bool(content.getMaster()), target))
    return tuple(entries)


def _normalized(archive: Path, text: str) -> str:
    """The manifest with its namespace and lower-case ``master`` flags: archives in the wild
    (the SED-ML specification's examples among them) omit the one and capitalise the other."""
    from xml.sax.saxutils import quoteattr

    from lxml import etree

    parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False)
    try:
        root = etree.fromstring(text.encode(), parser)
    except etree.XMLSyntaxError as exc:
        raise ArchiveError(archive, "manifest.xml", f"not XML ({exc})") from None
    rows = []
    for el in root.iter("{*}content"):
        master = str(el.get("master", "false")).strip().lower()
        rows.append(f"<content location={quoteattr(el.get('location', ''))} "
                    f"format={quoteattr(el.get('format', ''))} master={quoteattr(master)}/>")
    return (f'<?xml version="1.0" encoding="UTF-8"?><omexManifest xmlns="{FORMATS["manifest"]}">'
            + "".join(rows) + "</omexManifest>")


def write_archive(path: str | Path, members: list[tuple[Path, str, str, bool]]) -> Path:
    """Write an OMEX archive of ``(file, location, format URI, master)`` members."""
    lc = _libcombine()
    path = Path(path)
    archive = lc.CombineArchive()
    for file, location, fmt, master in members:
        safe_name(path, location)
        if not archive.addFile(str(file), "./" + location, fmt, master):
            raise OSError(f"libCOMBINE could not add {file} as {location}")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.unlink(missing_ok=True)
    if not archive.writeToFile(str(tmp)):
        raise OSError(f"libCOMBINE could not write {path}")
    archive.cleanUp()
    tmp.replace(path)
    return path
