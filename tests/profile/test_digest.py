"""The digest is hashlib's SHA-256 of the canonical JSON, whichever SHA-256 ``digest.py`` imported.

``profile/digest.py`` hashes with the interpreter's own SHA-256 (``_sha256``; ``_sha2`` from Python
3.12), which spares a launcher hashlib's OpenSSL load; a profile's digest must not change with it.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from topo_gate.profile import digest, load_profile

REPO = Path(__file__).resolve().parents[2]
PROFILES = sorted((REPO / "profiles").glob("*/*.yaml"))


@pytest.mark.parametrize("path", PROFILES, ids=[path.name for path in PROFILES])
def test_digest_is_hashlib_sha256_of_the_canonical_json(path: Path) -> None:
    data = load_profile(path).to_dict()  # the loader verified it: data["digest"] is its content's
    content = {key: value for key, value in data.items() if key != "digest"}
    expected = hashlib.sha256(digest.canonical_json(content).encode("utf-8")).hexdigest()
    assert digest.compute_digest(data) == "sha256:" + expected == data["digest"]


@pytest.mark.parametrize("payload", [b"", b"abc", bytes(range(256)) * 300])
def test_the_sha256_digest_imports_agrees_with_hashlib(payload: bytes) -> None:
    assert digest.sha256(payload).hexdigest() == hashlib.sha256(payload).hexdigest()
