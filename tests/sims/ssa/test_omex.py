"""Hostile COMBINE/OMEX archives are refused before anything is written outside the extraction
folder, each with the archive's path and the member's name; a sound archive opens."""

from __future__ import annotations

import stat
import zipfile
from pathlib import Path

import pytest

pytest.importorskip("libcombine")

from app.sims.ssa import omex  # noqa: E402
from app.sims.ssa.omex import ArchiveError, open_archive  # noqa: E402

SEDML_FMT = "http://identifiers.org/combine.specifications/sed-ml"


def manifest(*entries: tuple[str, str]) -> str:
    rows = "".join(f'<content location="{loc}" format="{fmt}"/>' for loc, fmt in entries)
    return ('<?xml version="1.0" encoding="UTF-8"?><omexManifest '
            'xmlns="http://identifiers.org/combine.specifications/omex-manifest">'
            '<content location="." format="http://identifiers.org/combine.specifications/omex"/>'
            f'{rows}</omexManifest>')


def build(path: Path, members: dict[str, bytes | str], symlinks: dict[str, str] | None = None) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
        for name, target in (symlinks or {}).items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            zf.writestr(info, target)
    return path


GOOD = {"manifest.xml": manifest(("./sim.sedml", SEDML_FMT)), "sim.sedml": "<sedML/>"}


def refused(tmp_path: Path, archive: Path, member: str | None, words: str) -> ArchiveError:
    dest = tmp_path / "x"
    with pytest.raises(ArchiveError) as err:
        open_archive(archive, dest)
    assert str(archive) in str(err.value)
    if member is not None:
        assert f"member '{member}'" in str(err.value)
    assert words in err.value.reason
    assert not dest.exists()                      # nothing left behind
    return err.value


def test_a_sound_archive_opens(tmp_path):
    arc = open_archive(build(tmp_path / "ok.omex", GOOD), tmp_path / "x")
    assert [e.location for e in arc.sedml()] == ["sim.sedml"]
    assert arc.sedml()[0].path.read_text() == "<sedML/>"


@pytest.mark.parametrize("name", ["../evil.txt", "a/../../evil.txt", "/etc/evil", "C:/evil", "a\\..\\evil"])
def test_path_traversal_in_member_names(tmp_path, name):
    archive = build(tmp_path / "bad.omex", {**GOOD, name: "x"})
    refused(tmp_path, archive, name, "path")
    assert not (tmp_path / "evil.txt").exists()


def test_symbolic_link_members(tmp_path):
    archive = build(tmp_path / "link.omex", GOOD, symlinks={"model.xml": "/etc/passwd"})
    refused(tmp_path, archive, "model.xml", "symbolic link")


def test_zip_bomb_by_ratio(tmp_path):
    archive = build(tmp_path / "bomb.omex", {**GOOD, "zeros.xml": b"\0" * (8 << 20)})   # ~1000:1
    refused(tmp_path, archive, "zeros.xml", "zip bomb")


def test_zip_bomb_by_size(tmp_path, monkeypatch):
    monkeypatch.setattr(omex, "MAX_MEMBER_BYTES", 1000)
    archive = build(tmp_path / "big.omex", {**GOOD, "big.xml": bytes(range(256)) * 8})
    refused(tmp_path, archive, "big.xml", "at most 1,000")


def test_a_header_that_lies_about_the_size(tmp_path):
    """Inflating stops at the size the header claims; the data then fails its CRC."""
    archive = build(tmp_path / "liar.omex", {**GOOD, "data.xml": b"a" * 5000})
    raw = bytearray(archive.read_bytes())
    # patch both the local and the central header's uncompressed size to 100 bytes
    for sig, offset in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        start = 0
        while (pos := raw.find(sig, start)) >= 0:
            name_len = int.from_bytes(raw[pos + (26 if sig == b"PK\x03\x04" else 28):][:2], "little")
            head = 30 if sig == b"PK\x03\x04" else 46
            if raw[pos + head:pos + head + name_len] == b"data.xml":
                raw[pos + offset:pos + offset + 4] = (100).to_bytes(4, "little")
            start = pos + 4
    archive.write_bytes(bytes(raw))
    refused(tmp_path, archive, "data.xml", "cannot be inflated")


def test_too_many_members(tmp_path, monkeypatch):
    monkeypatch.setattr(omex, "MAX_MEMBERS", 5)
    archive = build(tmp_path / "many.omex", {**GOOD, **{f"f{i}.txt": "x" for i in range(5)}})
    refused(tmp_path, archive, None, "at most 5")


def test_a_huge_manifest(tmp_path, monkeypatch):
    monkeypatch.setattr(omex, "MAX_MANIFEST_BYTES", 2000)
    rows = [(f"./m{i}.xml", SEDML_FMT) for i in range(100)]
    archive = build(tmp_path / "huge.omex", {"manifest.xml": manifest(*rows)})
    refused(tmp_path, archive, "manifest.xml", "manifest of")


@pytest.mark.parametrize("location", ["http://example.org/model.xml", "urn:miriam:biomodels.db:BIOMD1",
                                      "file:///etc/passwd", "./../outside.xml"])
def test_external_references_in_the_manifest(tmp_path, location):
    archive = build(tmp_path / "ext.omex", {**GOOD, "manifest.xml": manifest(("./sim.sedml", SEDML_FMT),
                                                                             (location, SEDML_FMT))})
    refused(tmp_path, archive, location.removeprefix("./"), "")


def test_entities_in_the_manifest(tmp_path):
    text = ('<?xml version="1.0"?><!DOCTYPE m [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
            + manifest(("./sim.sedml", SEDML_FMT)).split("?>", 1)[1])
    archive = build(tmp_path / "ent.omex", {**GOOD, "manifest.xml": text})
    refused(tmp_path, archive, "manifest.xml", "entities")


def test_missing_member_and_missing_manifest(tmp_path):
    archive = build(tmp_path / "miss.omex", {"manifest.xml": manifest(("./gone.sedml", SEDML_FMT))})
    refused(tmp_path, archive, "./gone.sedml", "not in the archive")
    archive = build(tmp_path / "nomf.omex", {"sim.sedml": "<sedML/>"})
    refused(tmp_path, archive, "manifest.xml", "missing")


def test_not_a_zip(tmp_path):
    path = tmp_path / "text.omex"
    path.write_text("not a zip")
    refused(tmp_path, path, None, "not a ZIP")


def test_a_manifest_without_namespace_and_capitalised_flags_is_read(tmp_path):
    """As the SED-ML specification's own example archives write it."""
    text = ('<omexManifest><content location="." format="http://identifiers.org/combine.specifications/omex" '
            f'master="False"/><content location="sim.sedml" format="{SEDML_FMT}" master="True"/></omexManifest>')
    arc = open_archive(build(tmp_path / "loose.omex", {**GOOD, "manifest.xml": text}), tmp_path / "x")
    assert [(e.location, e.master) for e in arc.entries] == [("sim.sedml", True)]
