"""Objects that stand in for a release's live objects in the conformance run, and fail loudly.

Where a predicate belongs to an object whose ``__init__`` needs a GPU, the adapters create the
object without its ``__init__`` and set exactly the attributes the predicate reads. A release that
starts reading another attribute must then fail the run, not pass on a class-level default: an
instance made by ``strict`` answers only the attributes it was given (or that the release's own code
set on it since) and the class's code (methods, properties); any other read raises ``Unset``.
"""

from __future__ import annotations

import inspect
from types import FunctionType
from typing import Any, TypeVar

T = TypeVar("T")
_CODE = (FunctionType, staticmethod, classmethod, property)
_MISSING = object()


class Unset(AttributeError):
    """The release read an attribute the conformance adapter did not set."""


def _strict_subclass(cls: type[T]) -> type[T]:
    def __getattribute__(self: Any, name: str) -> Any:
        if name.startswith("__") or name in object.__getattribute__(self, "__dict__"):
            return object.__getattribute__(self, name)
        if isinstance(inspect.getattr_static(cls, name, _MISSING), _CODE):
            return object.__getattribute__(self, name)
        raise Unset(
            f"{cls.__module__}.{cls.__qualname__}.{name} was read, but the conformance adapter does not set it"
        )

    return type(
        f"Strict{cls.__name__}", (cls,), {"__getattribute__": __getattribute__, "__module__": __name__}
    )


def strict(cls: type[T], **attributes: Any) -> T:
    """An instance of (a subclass of) ``cls`` made without ``__init__``, holding only ``attributes``."""
    instance = object.__new__(_strict_subclass(cls))
    for name, value in attributes.items():
        object.__setattr__(instance, name, value)
    return instance


class Record:
    """A plain object that holds only the attributes it is given (reads of others raise ``Unset``)."""

    def __init__(self, what: str, **attributes: Any) -> None:
        object.__setattr__(self, "_what", what)
        for name, value in attributes.items():
            object.__setattr__(self, name, value)

    def __getattr__(self, name: str) -> Any:
        raise Unset(f"{self._what}.{name} was read, but the conformance adapter does not set it")
