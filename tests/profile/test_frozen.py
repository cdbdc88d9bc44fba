"""The reader's classes (``profile/frozen.py``) are the dataclasses ``dataclasses`` makes of the same
source: the same fields, signature, repr, equality, hash, frozenness and ``replace``/``asdict``.

Each module that uses the decorator is loaded a second time with ``dataclasses.dataclass`` in its
place (the reference), and every class, and every instance a real profile and ``gate()`` build, is
held to its reference twin.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib.util
import inspect
import pickle
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import topo_gate
from topo_gate.profile import EvidenceRef, Fleet, FleetNode, admit, frozen, load_profile
from topo_gate.profile.profile_set import choose_member

REPO = Path(__file__).resolve().parents[2]
#: Every module whose classes the decorator makes, and those classes.
MADE = {
    "topo_gate.profile.measurements": ("Transition", "BackendPrices", "Measurement"),
    "topo_gate.profile.node": ("Tool", "Node", "Trials", "Skipped", "EvidenceRef", "FleetNode", "Fleet"),
    "topo_gate.profile.rules": ("Alternative", "Rule", "DecisionEntry"),
    "topo_gate.profile.schema": ("Profile",),
    "topo_gate.profile.reader": ("Decision", "Admission"),
    "topo_gate.profile.profile_set": ("SetChoice",),
}
PROFILES = sorted((REPO / "profiles").glob("*/*.yaml"))
METHODS = ("__init__", "__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__")


def _made_here(cls: type) -> bool:
    code = getattr(cls.__dict__.get("__eq__"), "__code__", None)
    return code is not None and code.co_filename == frozen.__file__


def _load_reference(name: str) -> ModuleType:
    module = sys.modules[name]
    spec = importlib.util.spec_from_file_location(f"_reference_{name.rsplit('.', 1)[1]}", module.__file__)
    assert spec is not None and spec.loader is not None
    reference = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = reference  # dataclasses looks the module up while it makes the class
    patch = pytest.MonkeyPatch()
    patch.setattr(frozen, "dataclass", dataclasses.dataclass)
    patch.setattr(frozen, "field", dataclasses.field)
    try:
        spec.loader.exec_module(reference)
    finally:
        patch.undo()
    return reference


@pytest.fixture(scope="module")
def twins() -> dict[type, type]:
    pairs = {}
    for name, classes in MADE.items():
        reference = _load_reference(name)
        for class_name in classes:
            pairs[getattr(sys.modules[name], class_name)] = getattr(reference, class_name)
    return pairs


def test_every_frozen_class_is_listed() -> None:
    made = set()
    for name in MADE:
        module = sys.modules[name]
        made |= {value for value in vars(module).values() if isinstance(value, type) and _made_here(value)}
    assert {cls.__name__ for cls in made} == {cls for classes in MADE.values() for cls in classes}


def _field_table(cls: type) -> list[tuple[Any, ...]]:
    return [
        (f.name, f.type, f.default, f.default_factory, f.init, f.repr, f.hash, f.compare, f.kw_only)
        for f in dataclasses.fields(cls)
    ]


def test_classes_match_their_dataclass_twins(twins: dict[type, type]) -> None:
    for ours, reference in twins.items():
        assert _made_here(ours) and not _made_here(reference)
        assert dataclasses.is_dataclass(ours)
        assert _field_table(ours) == _field_table(reference), ours
        assert repr(ours.__dataclass_params__) == repr(reference.__dataclass_params__)
        assert str(inspect.signature(ours)) == str(inspect.signature(reference)), ours
        assert ours.__init__.__annotations__ == reference.__init__.__annotations__
        assert ours.__match_args__ == reference.__match_args__
        assert hasattr(ours, "__replace__") == hasattr(reference, "__replace__")
        assert ours.__doc__ == reference.__doc__
        names = {f.name for f in dataclasses.fields(ours)}
        assert {k: v for k, v in vars(ours).items() if k in names} == {
            k: v for k, v in vars(reference).items() if k in names
        }
        for method in METHODS:
            assert getattr(ours, method).__qualname__ == getattr(reference, method).__qualname__
        assert _outcome(ours)[0] == "TypeError"  # no arguments: the same words as the twin's
        assert _outcome(ours) == _outcome(reference)


def _instances() -> list[Any]:
    """Every instance of a made class that loading the bundled profiles, admitting them (the
    planners' one read) and gating on them builds."""
    found: list[Any] = []
    seen: set[int] = set()

    def walk(value: Any) -> None:
        if id(value) in seen:
            return
        seen.add(id(value))
        if _made_here(type(value)):
            found.append(value)
            for f in dataclasses.fields(value):
                walk(getattr(value, f.name))
        elif isinstance(value, (list, tuple)):
            for item in value:
                walk(item)
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)

    for path in PROFILES:
        profile = load_profile(path)
        walk(profile)
        tp = profile.decisions[0].tp if profile.decisions else 2
        walk(topo_gate.gate(path, tp=tp, trust_unverified_node=True))
        walk(admit(path, tp=tp, trust_unverified_node=True))
    walk(topo_gate.gate("/nonexistent.yaml", tp=2))
    walk(choose_member(REPO / "profiles" / "examples", None))
    node = FleetNode(name="a", hostname=None, evidence=EvidenceRef(path="a.json"))
    walk(Fleet(method="merged", nodes=(node,)))  # no bundled profile is a merged one
    return found


def _outcome(call: Any) -> tuple[str, str]:
    try:
        return "value", repr(call())
    except Exception as error:  # noqa: BLE001 -- the twin must fail alike
        return type(error).__name__, str(error)


def test_instances_behave_as_their_dataclass_twins(twins: dict[type, type]) -> None:
    instances = _instances()
    assert {type(value) for value in instances} == set(twins)  # every class was exercised
    for value in instances:
        reference = twins[type(value)]
        twin = reference.__new__(reference)
        twin.__dict__.update(vars(value))
        assert repr(value) == repr(twin)
        assert _outcome(lambda: hash(value)) == _outcome(lambda: hash(twin))  # noqa: B023
        assert value == copy.copy(value) and not value != copy.deepcopy(value)
        assert value != twin and twin != value  # another class: NotImplemented both ways, as for twins
        assert dataclasses.asdict(value) == dataclasses.asdict(twin)
        assert dataclasses.astuple(value) == dataclasses.astuple(twin)
        assert dataclasses.replace(value) == value
        assert pickle.loads(pickle.dumps(value)) == value
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        assert type(value)(**fields) == value
        name = next(iter(fields))
        for action in (
            lambda target: setattr(target, name, None),  # noqa: B023
            lambda target: delattr(target, name),  # noqa: B023
            lambda target: setattr(target, "unknown", 1),
        ):
            assert _outcome(lambda: action(value)) == _outcome(lambda: action(twin))  # noqa: B023
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(value, name, None)


def test_recursive_repr_is_cut_as_dataclasses_cuts_it(twins: dict[type, type]) -> None:
    ours = next(cls for cls in twins if cls.__name__ == "Node")
    for cls in (ours, twins[ours]):
        hardware: dict[str, Any] = {}
        node = cls.__new__(cls)
        node.__dict__.update(fingerprint="f", hardware=hardware, software={}, provenance={})
        hardware["self"] = node
        assert repr(node) == "Node(fingerprint='f', hardware={'self': ...}, software={}, provenance={})"


def test_the_decorator_refuses_what_it_does_not_make() -> None:
    def make(body: str, decorator: str = "@dataclass(frozen=True)", future: bool = True) -> None:
        source = ("from __future__ import annotations\n" if future else "") + f"{decorator}\nclass C{body}\n"
        code = compile(source, "<test>", "exec", dont_inherit=True)  # not this module's future import
        exec(code, {"dataclass": frozen.dataclass, "field": frozen.field, "__name__": __name__})

    make(':\n    """Doc."""\n    a: int\n    b: dict = field(default_factory=dict)\n')
    with pytest.raises(TypeError, match="frozen dataclasses only"):
        make(':\n    """Doc."""\n    a: int\n', "@dataclass")
    with pytest.raises(TypeError, match="a base class"):
        make('(Exception):\n    """Doc."""\n    a: int\n')
    with pytest.raises(TypeError, match="no docstring"):
        make(":\n    a: int\n")
    with pytest.raises(TypeError, match="defines __eq__"):
        make(':\n    """Doc."""\n    a: int\n    def __eq__(self, other): return True\n')
    with pytest.raises(TypeError, match="ClassVar"):
        make(':\n    """Doc."""\n    a: ClassVar[int] = 1\n')
    with pytest.raises(ValueError, match="mutable default"):
        make(':\n    """Doc."""\n    a: list = []\n')
    with pytest.raises(TypeError, match="non-default argument 'b' follows default argument"):
        make(':\n    """Doc."""\n    a: int = 1\n    b: int\n')
    with pytest.raises(TypeError, match="not a string annotation"):
        make(':\n    """Doc."""\n    a: int\n', future=False)


def test_dataclasses_is_imported_only_when_a_class_is_asked_for_its_fields() -> None:
    example = REPO / "profiles" / "examples" / "synthetic-h200x2.yaml"
    code = (
        "import sys, topo_gate\n"
        f"d = topo_gate.gate({str(example)!r}, tp=2, trust_unverified_node=True)\n"
        "assert not d.fallback, d.reason\n"
        "before = 'dataclasses' in sys.modules\n"
        "import dataclasses\n"
        "changed = dataclasses.replace(d.rules[0], reason='x')\n"
        "print(before, changed.reason, [f.name for f in dataclasses.fields(topo_gate.Decision)][:2])\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO
    )
    assert result.stdout.split() == ["False", "x", "['backend',", "'max_bytes']"]
