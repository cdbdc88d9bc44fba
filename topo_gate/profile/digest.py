"""The profile's content digest: sha256 over canonical JSON of everything except ``digest``.

Canonical JSON (sorted keys, no whitespace, UTF-8) is language-neutral, so a launcher written in
another language can verify a profile without a YAML library that formats floats like PyYAML does.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from hashlib import sha256
from typing import Any

DIGEST_KEY = "digest"


def canonical_json(data: Any) -> str:
    """``json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)``; NaN refused."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def compute_digest(profile_data: Mapping[str, Any]) -> str:
    """``"sha256:<hex>"`` of the canonical JSON of ``profile_data`` without its ``digest`` key."""
    content = {key: value for key, value in profile_data.items() if key != DIGEST_KEY}
    return "sha256:" + sha256(canonical_json(content).encode("utf-8")).hexdigest()
