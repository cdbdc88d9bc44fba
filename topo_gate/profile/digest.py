"""The profile's content digest: sha256 over canonical JSON of everything except ``digest``.

Canonical JSON (sorted keys, no whitespace, UTF-8) is language-neutral, so a launcher written in
another language can verify a profile without a YAML library that formats floats like PyYAML does.
"""

from __future__ import annotations

import json

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs a launcher ~2 ms
if TYPE_CHECKING:
    from collections.abc import Mapping
    from hashlib import sha256
    from typing import Any
else:
    # The interpreter's own SHA-256, the same digest as hashlib's: importing hashlib loads OpenSSL's
    # libcrypto, ~3 ms of a launcher's start for one hash of a few kilobytes.
    for _module in ("_sha2", "_sha256"):  # its name from Python 3.12 on, and before
        try:
            sha256 = __import__(_module).sha256
            break
        except ImportError:
            continue
    else:  # an interpreter built without its own hashes
        from hashlib import sha256


DIGEST_KEY = "digest"


def canonical_json(data: Any) -> str:
    """``json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)``; NaN refused."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def compute_digest(profile_data: Mapping[str, Any]) -> str:
    """``"sha256:<hex>"`` of the canonical JSON of ``profile_data`` without its ``digest`` key."""
    content = {key: value for key, value in profile_data.items() if key != DIGEST_KEY}
    return "sha256:" + sha256(canonical_json(content).encode("utf-8")).hexdigest()
