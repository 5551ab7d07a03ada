"""Offline RO-Crate validation with roc-validator (``rocrate-validator``).

The validator resolves the crate's JSON-LD ``@context`` over HTTP (through its own cache). CI has
no network, so the context URL is answered from the copy ro-crate-py ships (its bundled context
is the RO-Crate 1.3 one, whose terms include every 1.1 term our crates use); any other URL is
refused, so a check that needs the network fails instead of passing silently.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest


class _Response:
    status_code = 200
    headers = {"Content-Type": "application/ld+json"}

    def __init__(self, body: bytes):
        self.content, self.text = body, body.decode()

    def json(self):
        return json.loads(self.content)


def validate_crate(folder: Path, monkeypatch: pytest.MonkeyPatch, profile: str = "process-run-crate") -> list[str]:
    """The REQUIRED-level issues of ``folder`` against ``profile`` (empty: it validates)."""
    rocrate = pytest.importorskip("rocrate")
    pytest.importorskip("rocrate_validator")
    from rocrate_validator import services
    from rocrate_validator.utils import http

    context = (Path(rocrate.__file__).parent / "data" / "ro-crate.jsonld").read_bytes()

    def get(self, url, *args, **kwargs):
        if url.startswith("https://w3id.org/ro/crate/"):
            return _Response(context)
        raise OSError(f"the validator asked for {url} (no network in tests)")

    monkeypatch.setattr(http.HttpRequester, "get", get, raising=False)
    result = services.validate({"rocrate_uri": str(folder), "profile_identifier": profile,
                                "requirement_severity": "REQUIRED", "offline": True})
    return [f"{issue.severity}: {issue.message}" for issue in result.get_issues()]
