"""Frozen dataclasses for the launcher reader, made without importing ``dataclasses`` first.

``gate()`` reads a profile into 16 frozen dataclasses, and a launcher pays for them at start-up:
``import dataclasses`` imports ``inspect`` (and with it ``ast``, ``dis``, ``tokenize``), ~6 ms, and
each ``@dataclass(frozen=True)`` compiles its six methods one ``exec`` at a time, ~0.5-1 ms a class.
This decorator makes the same classes -- the same ``__init__`` (signature, defaults,
``default_factory``, the ``__post_init__`` call), ``__repr__``, ``__eq__`` and ``__hash__`` (over the
tuple of the fields, as Python 3.10-3.12 compare them), the ``FrozenInstanceError`` on assignment or
deletion, ``__match_args__``, 3.13's ``__replace__`` -- from the same source, with one ``exec`` a
class (``__init__``'s). What only tools read, ``__dataclass_fields__`` and ``__dataclass_params__``
(``dataclasses.fields``, ``replace``, ``asdict``, ``is_dataclass``), is made the first time it is
read: ``dataclasses`` builds the same class definition then, and its fields and parameters are the
class's from that moment on. ``dataclasses.replace(profile, ...)`` works as it always has, and the
import is paid once, by a process that asks for it.

Only what the profile package uses is accepted, anything else is a ``TypeError`` when the class is
made: ``frozen=True`` (required), ``kw_only``, plain defaults and ``field(default_factory=...)``,
string annotations (``from __future__ import annotations``), a docstring, no base class, no method
the decorator makes. A module uses it under the names it replaces::

    TYPE_CHECKING = False
    if TYPE_CHECKING:  # mypy checks the classes as the dataclasses they are
        from dataclasses import dataclass, field
    else:
        from topo_gate.profile.frozen import dataclass, field

``tests/profile/test_frozen.py`` holds every class made here to what ``dataclasses`` makes of it.
"""

# No ``from __future__ import annotations`` in this module: ``exec`` compiles ``__init__`` with the
# flags of the code that calls it, and its annotations must be the fields' own (already strings, by
# the profile modules' future import), as dataclasses makes them, not the names of the variables
# holding them. ``compile(..., dont_inherit=True)`` would do too, but a process's first ``compile()``
# builds the AST types: ~1.5 ms.
import sys
from _thread import get_ident
from functools import wraps
from operator import attrgetter

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs a launcher ~2 ms
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

#: The attributes the decorator sets: a class defining one of them is refused.
_MADE = (
    "__init__",
    "__repr__",
    "__eq__",
    "__hash__",
    "__setattr__",
    "__delattr__",
    "__match_args__",
    "__replace__",
    "__dataclass_fields__",
    "__dataclass_params__",
)
#: Annotations ``dataclasses`` reads as something other than a field.
_PSEUDO_FIELDS = ("ClassVar", "InitVar", "KW_ONLY")
_MISSING: "Any" = object()


class _Factory:
    """``field(default_factory=...)``'s marker, in the class body until the class is made."""

    __slots__ = ("factory",)

    def __init__(self, factory: "Callable[[], Any]") -> None:
        self.factory = factory


class _HasDefaultFactory:
    """The default of a ``default_factory`` parameter; it reads as ``dataclasses``' does."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<factory>"


_HAS_DEFAULT_FACTORY = _HasDefaultFactory()


def field(*, default_factory: "Callable[[], Any]") -> "Any":
    """``dataclasses.field(default_factory=...)``: the only form of ``field`` the profile uses."""
    return _Factory(default_factory)


def dataclass(cls: type | None = None, /, *, frozen: bool = False, kw_only: bool = False) -> "Any":
    """``dataclasses.dataclass(frozen=True[, kw_only=True])``, as the module docstring says."""
    if frozen is not True:
        raise TypeError("topo_gate.profile.frozen makes frozen dataclasses only: pass frozen=True")

    def wrap(cls: type) -> type:
        return _make(cls, kw_only=kw_only)

    return wrap if cls is None else wrap(cls)


def _frozen_error(message: str) -> Exception:
    from dataclasses import FrozenInstanceError  # here: only a caller's mistake pays for the import

    return FrozenInstanceError(message)


def _refuse(cls: type, problem: str) -> TypeError:
    return TypeError(f"{cls.__qualname__}: {problem} (topo_gate.profile.frozen; use dataclasses)")


def _fields(cls: type, *, kw_only: bool) -> "dict[str, Any]":
    """Each field's name and default (``_MISSING``, a value, or a ``_Factory``), in order."""
    namespace = cls.__dict__
    if cls.__bases__ != (object,):
        raise _refuse(cls, "a base class")
    if not cls.__doc__:
        raise _refuse(cls, "no docstring (dataclasses would write one with inspect)")
    made = [name for name in _MADE if name in namespace]
    if made:
        raise _refuse(cls, f"it defines {', '.join(made)}")
    defaults: dict[str, Any] = {}
    seen_default = False
    for name, annotation in namespace.get("__annotations__", {}).items():
        if not isinstance(annotation, str):
            raise _refuse(cls, f"field {name!r}: not a string annotation")
        if annotation.split("[", 1)[0].rsplit(".", 1)[-1].strip() in _PSEUDO_FIELDS:
            raise _refuse(cls, f"field {name!r}: {annotation}")
        default = namespace.get(name, _MISSING)
        if default is _MISSING:
            if seen_default and not kw_only:  # dataclasses' own rule, and its words
                raise TypeError(f"non-default argument {name!r} follows default argument")
        else:
            seen_default = True
            if not isinstance(default, _Factory) and type(default).__hash__ is None:
                raise ValueError(
                    f"mutable default {type(default)} for field {name} is not allowed: use default_factory"
                )
        defaults[name] = default
    return defaults


def _init_source(names: list[str], defaults: "dict[str, Any]", *, kw_only: bool, has_post_init: bool) -> str:
    """The ``__init__`` text ``dataclasses`` would ``exec`` for these fields (in ``__create_fn__``)."""
    self = "__dataclass_self__" if "self" in names else "self"
    params, body = [], []
    for name in names:
        default = defaults[name]
        if default is _MISSING:
            params.append(f"{name}:_type_{name}")
            value = name
        elif isinstance(default, _Factory):
            params.append(f"{name}:_type_{name}=_HAS_DEFAULT_FACTORY")
            value = f"_dflt_{name}() if {name} is _HAS_DEFAULT_FACTORY else {name}"
        else:
            params.append(f"{name}:_type_{name}=_dflt_{name}")
            value = name
        body.append(f"  __dataclass_builtins_object__.__setattr__({self},{name!r},{value})")
    if has_post_init:
        body.append(f"  {self}.__post_init__()")
    if kw_only and params:
        params.insert(0, "*")
    return "\n".join(
        [
            f" def __init__({','.join([self, *params])})->_return_type:",
            *(body or ["  pass"]),
            " return __init__",
        ]
    )


def _init(cls: type, defaults: "dict[str, Any]", *, kw_only: bool) -> "Callable[..., None]":
    """``__init__``, compiled as ``dataclasses`` compiles it: the same parameters, annotations and
    defaults, so ``inspect.signature`` and a wrong call's ``TypeError`` read the same."""
    names = list(defaults)
    local: dict[str, Any] = {f"_type_{name}": cls.__dict__["__annotations__"][name] for name in names}
    for name, default in defaults.items():
        if isinstance(default, _Factory):
            local[f"_dflt_{name}"] = default.factory
        elif default is not _MISSING:
            local[f"_dflt_{name}"] = default
    local.update(
        _HAS_DEFAULT_FACTORY=_HAS_DEFAULT_FACTORY, __dataclass_builtins_object__=object, _return_type=None
    )
    text = _init_source(names, defaults, kw_only=kw_only, has_post_init=hasattr(cls, "__post_init__"))
    module = sys.modules.get(cls.__module__)
    namespace: dict[str, Any] = {}
    exec(f"def __create_fn__({', '.join(local)}):\n{text}", module.__dict__ if module else {}, namespace)
    init: Callable[..., None] = namespace["__create_fn__"](**local)
    return init


def _methods(cls: "type[Any]", names: tuple[str, ...]) -> "list[Callable[..., Any]]":
    """``__repr__``, ``__eq__``, ``__hash__``, ``__setattr__`` and ``__delattr__`` as ``dataclasses``
    writes them for a frozen class -- the same text, tuples compared and hashed, errors raised --
    without compiling them: the fields' values are read as one tuple, ``(self.a, self.b)``."""
    if len(names) > 1:
        values: Callable[[Any], tuple[Any, ...]] = attrgetter(*names)
    elif names:
        one = attrgetter(names[0])

        def values(instance: "Any") -> "tuple[Any, ...]":
            return (one(instance),)
    else:

        def values(instance: "Any") -> "tuple[Any, ...]":
            return ()

    def __repr__(self: "Any") -> str:
        shown = ", ".join([f"{name}={value!r}" for name, value in zip(names, values(self), strict=True)])
        return f"{self.__class__.__qualname__}({shown})"

    def __eq__(self: "Any", other: "Any") -> "Any":
        if other.__class__ is self.__class__:
            return values(self) == values(other)
        return NotImplemented

    def __hash__(self: "Any") -> int:
        return hash(values(self))

    def __setattr__(self: "Any", name: str, value: "Any") -> None:
        if type(self) is cls or name in names:
            raise _frozen_error(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    def __delattr__(self: "Any", name: str) -> None:
        if type(self) is cls or name in names:
            raise _frozen_error(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    made: list[Callable[..., Any]] = [_recursive_repr(__repr__), __eq__, __hash__, __setattr__, __delattr__]
    if sys.version_info >= (3, 13):  # copy.replace(), which 3.13's dataclasses support

        def __replace__(self: "Any", /, **changes: "Any") -> "Any":
            from dataclasses import replace

            return replace(self, **changes)

        made.append(__replace__)
    return made


def _make(cls: type, *, kw_only: bool) -> type:
    defaults = _fields(cls, kw_only=kw_only)
    names = tuple(defaults)
    for name, default in defaults.items():
        if isinstance(default, _Factory):
            delattr(cls, name)  # as dataclasses leaves it: no class attribute for a factory's field
    for function in (_init(cls, defaults, kw_only=kw_only), *_methods(cls, names)):
        function.__qualname__ = f"{cls.__qualname__}.{function.__name__}"
        type.__setattr__(cls, function.__name__, function)
    type.__setattr__(cls, "__match_args__", () if kw_only else names)
    for attribute in ("__dataclass_fields__", "__dataclass_params__"):
        type.__setattr__(cls, attribute, _Lazy(cls, attribute, defaults, kw_only))
    return cls


def _recursive_repr(function: "Callable[[Any], str]") -> "Callable[[Any], str]":
    """``dataclasses._recursive_repr``: ``...`` for an object met again inside its own repr."""
    running: set[tuple[int, int]] = set()

    @wraps(function)
    def wrapper(self: "Any") -> str:
        key = id(self), get_ident()
        if key in running:
            return "..."
        running.add(key)
        try:
            return function(self)
        finally:
            running.discard(key)

    return wrapper


class _Lazy:
    """``__dataclass_fields__`` / ``__dataclass_params__`` until first read: then ``dataclasses``
    makes the same definition once, and the class keeps its two attributes in place of these."""

    def __init__(self, cls: type, attribute: str, defaults: "dict[str, Any]", kw_only: bool) -> None:
        self.cls, self.attribute, self.defaults, self.kw_only = cls, attribute, defaults, kw_only

    def __get__(self, instance: object, owner: type | None = None) -> "Any":
        import dataclasses  # here: only dataclasses.fields(), replace() and the like get here

        cls = self.cls
        body: dict[str, Any] = {
            "__module__": cls.__module__,
            "__qualname__": cls.__qualname__,
            "__doc__": cls.__doc__,
            "__annotations__": dict(cls.__dict__["__annotations__"]),
        }
        for name, default in self.defaults.items():
            if isinstance(default, _Factory):
                body[name] = dataclasses.field(default_factory=default.factory)
            elif default is not _MISSING:
                body[name] = default
        model: type = dataclasses.dataclass(frozen=True, kw_only=self.kw_only)(type(cls.__name__, (), body))
        for attribute in ("__dataclass_fields__", "__dataclass_params__"):
            type.__setattr__(cls, attribute, model.__dict__[attribute])
        return cls.__dict__[self.attribute]
