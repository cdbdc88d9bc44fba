"""Backend names: a registered plain name, or ``<plain>+rmsnorm`` for its composite (``composite.py``).

The registry (``__init__``) and the composites read the profile's spelling through here, so
neither imports the other for it.
"""

from __future__ import annotations

from topo_gate.profile.schema import COMPOSITE_SUFFIX


def composite_name(plain: str) -> str:
    return plain + COMPOSITE_SUFFIX


def is_composite(name: str) -> bool:
    return name.endswith(COMPOSITE_SUFFIX)


def plain_of(name: str) -> str:
    """The plain backend of a composite's name."""
    return name[: -len(COMPOSITE_SUFFIX)]
