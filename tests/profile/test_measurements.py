"""Profile v1.3's price table as dataclasses: what each refuses, and what round-trips unchanged.

A table decide could write is generated (hypothesis) and must survive ``to_dict`` / ``from_dict``, the
canonical YAML and the digest; each invariant of ``profile/measurements.py`` is broken once and must
be refused naming the field. The malformed-file cases (malformed/measurements-*.yaml) take the same
checks through the loader, ``validate`` and ``gate()``.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import topo_gate
from topo_gate.profile import Profile, ProfileInvalid, dump_profile, load_profile
from topo_gate.profile.measurements import (
    MIN_CALL_US,
    PRICED,
    STATUSES,
    BackendPrices,
    Measurement,
    Transition,
)
from topo_gate.profile.semantics import GPU_CI_FACTOR as CI_FACTOR
from topo_gate.profile.yaml_format import parse_yaml, to_yaml

EXAMPLE = Path(__file__).resolve().parents[2] / "profiles" / "examples" / "synthetic-h200x2.yaml"
SIZES = (2048, 4096, 8192)


def prices(**changes: object) -> BackendPrices:
    fields = {
        "status": ("ok", "ok", "stopped"),
        "median_us": (3.9, 4.0, 9.0),
        "ci_us": ((3.8, 4.0), (3.9, 4.1), (8.5, 9.5)),
        "in_context_us": (5.0, 5.1, None),
        "in_context_ci_us": ((4.9, 5.1), (5.0, 5.2), None),
        "transition": Transition((8192,), ((10.0, 12.0, None),)),
    }
    return BackendPrices(**{**fields, **changes})


def table(**changes: object) -> Measurement:
    fields = {
        "tp": 2,
        "group": (0, 1),
        "group_class": "nvswitch",
        "pattern": "allreduce",
        "hidden": 1024,
        "dtype": "bfloat16",
        "sizes": SIZES,
        "backends": {"nccl": prices(transition=None), "trtllm_oneshot": prices()},
    }
    return Measurement(**{**fields, **changes})


@pytest.mark.parametrize(
    ("build", "field", "words"),
    [
        (lambda: prices(status=()), "status", "one entry per size, found none"),
        (lambda: prices(status=("ok", "ok", "fast")), "status[2]", "unknown status 'fast'"),
        (lambda: prices(median_us=(3.9, 4.0)), "median_us", "one entry per size (3), found 2"),
        (lambda: prices(median_us=(3.9, math.nan, 9.0)), "median_us[1]", "must be a finite number"),
        (lambda: prices(median_us=(3.9, 0.0, 9.0)), "median_us[1]", "must be > 0"),
        (lambda: prices(median_us=(3.9, True, 9.0)), "median_us[1]", "must be a finite number, found bool"),
        (lambda: prices(median_us=(3.9, None, 9.0)), "median_us[1]", "status ok has no median"),
        (lambda: prices(status=("ok", "wrong", "stopped")), "median_us[1]", "status wrong has a median"),
        (lambda: prices(ci_us=((3.8, 4.0), (4.1, 4.2), (8.5, 9.5))), "ci_us[1]", "does not contain its value 4.0"),
        (lambda: prices(ci_us=((3.8, 4.0), (4.1, 3.9), (8.5, 9.5))), "ci_us[1]", "does not contain"),
        (lambda: prices(ci_us=((3.8, 4.0), None, (8.5, 9.5))), "ci_us[1]", "null exactly where the value"),
        (lambda: prices(ci_us=((3.8, 4.0), (3.9,), (8.5, 9.5))), "ci_us[1]", "must be [low, high]"),
        (lambda: prices(in_context_us=(5.0, -0.1, None)), "in_context_us[1]", "must be >= 0"),
        (lambda: prices(in_context_us=(5.0, 5.1, 6.0), in_context_ci_us=((4.9, 5.1), (5.0, 5.2), (5.9, 6.1)),
                        status=("ok", "ok", "wrong"), median_us=(3.9, 4.0, None), ci_us=((3.8, 4.0), (3.9, 4.1), None),
                        transition=None),
         "in_context_us[2]", "an in-context price where the isolated status has none"),  # fmt: skip
        (lambda: prices(in_context_ci_us=None), "in_context_ci_us", "missing (in_context_us is given)"),
        (lambda: prices(in_context_us=None), "in_context_ci_us", "a CI without in_context_us"),
        (lambda: prices(transition=Transition((8192,), ((10.0, 12.0),))), "transition.cost_us[0]", "one entry per size (3), found 2"),
        (lambda: Transition((), ()), "after_bytes", "at least one size"),
        (lambda: Transition((8192, 4096), ((1.0,), (1.0,))), "after_bytes", "strictly ascending"),
        (lambda: Transition((8192,), ((1.0,), (1.0,))), "cost_us", "one row per after_bytes (1), found 2"),
        (lambda: Transition((8192,), ((-1.0,),)), "cost_us[0][0]", "must be >= 0"),
        (lambda: table(sizes=(2048, 2048, 8192)), "sizes", "strictly ascending"),
        (lambda: table(sizes=()), "sizes", "found no size"),
        (lambda: table(group=(0, 0)), "group", "distinct"),
        (lambda: table(pattern="allgather"), "pattern", "unknown pattern"),
        (lambda: table(backends={}), "backends", "at least the baseline"),
        (lambda: table(backends={"warp_drive": prices()}), "backends", "unknown backend 'warp_drive'"),
        (lambda: table(backends={"nccl+rmsnorm": prices()}), "backends.nccl+rmsnorm", "only in allreduce_rmsnorm"),
        (lambda: table(backends={"nccl": {"status": ["ok"]}}), "backends.nccl", "must be a BackendPrices"),
        (lambda: table(sizes=(2048, 4096)), "backends.nccl.status", "one entry per size (2), found 3"),
        (lambda: table(backends={"nccl": prices(transition=Transition((5000,), ((1.0, None, None),)))}),
         "backends.nccl.transition.after_bytes[0]", "5000 is not a size of the table"),  # fmt: skip
        (lambda: table(backends={"nccl": prices(transition=Transition((4096,), ((1.0, 2.0, None),)))}),
         "backends.nccl.transition.cost_us[0][1]", "4096 B is not larger than 4096 B"),  # fmt: skip
    ],
)  # fmt: skip
def test_each_invariant_is_refused_naming_the_field(build, field: str, words: str) -> None:
    with pytest.raises(ProfileInvalid) as raised:
        build()
    assert raised.value.field == field and words in raised.value.problem, str(raised.value)


def test_a_cost_needs_a_steady_price_to_add_to() -> None:
    with pytest.raises(ProfileInvalid, match=r"^transition.cost_us\[0\]\[1\]: no steady price"):
        prices(
            status=("ok", "wrong", "stopped"),
            median_us=(3.9, None, 9.0),
            ci_us=((3.8, 4.0), None, (8.5, 9.5)),
            in_context_us=None,
            in_context_ci_us=None,
        )


def test_the_profile_finds_the_table_of_a_decision_and_refuses_two() -> None:
    profile = load_profile(EXAMPLE)
    assert profile.measurement(2, "nvswitch", "allreduce").pattern == "allreduce"
    assert profile.measurement(2, "nvswitch", "allreduce_rmsnorm").pattern == "allreduce_rmsnorm"
    assert profile.measurement(4, "nvswitch", "allreduce") is None
    with pytest.raises(ProfileInvalid, match=r"^measurements\[2\]: duplicate of measurements\[0\]"):
        dataclasses.replace(profile, measurements=(*profile.measurements, profile.measurements[0]))


# --- generated tables round-trip -------------------------------------------------------------------

positive = st.floats(min_value=0.01, max_value=1e6, allow_nan=False).map(lambda v: float(f"{v:.6g}"))
#: A per-call median within the physical bounds, and a CI's ends as shares of it within a GPU profile's
#: CI factor
#: (a little inside, so that rounding to 6 digits keeps them there).
per_call = st.floats(min_value=MIN_CALL_US, max_value=1e6, allow_nan=False).map(lambda v: float(f"{v:.6g}"))
below_share = st.floats(min_value=1.01 / CI_FACTOR, max_value=1.0)
above_share = st.floats(min_value=1.0, max_value=CI_FACTOR * 0.99)


@st.composite
def backend_prices(draw: st.DrawFn, sizes: tuple[int, ...]) -> BackendPrices:
    status = tuple(draw(st.sampled_from(STATUSES)) for _ in sizes)
    median, ci = [], []
    for state in status:
        if state in PRICED:
            mid = draw(per_call)
            low = min(mid, float(f"{mid * draw(below_share):.6g}"))
            high = max(mid, float(f"{mid * draw(above_share):.6g}"))
            median.append(mid)
            ci.append((low, high))
        else:
            median.append(None)
            ci.append(None)
    in_context = in_context_ci = transition = None
    if draw(st.booleans()):
        values = [draw(st.none() | positive) if m is not None else None for m in median]
        in_context = tuple(values)
        in_context_ci = tuple(None if v is None else (v * 0.9, v * 1.1) for v in values)
    larger = [n for n in sizes if n > sizes[0]]
    if larger and draw(st.booleans()):
        after = tuple(sorted(draw(st.sets(st.sampled_from(larger), min_size=1))))
        rows = tuple(
            tuple(
                draw(st.none() | positive) if median[c] is not None and a > sizes[c] else None
                for c in range(len(sizes))
            )
            for a in after
        )
        transition = Transition(after, rows)
    return BackendPrices(status, tuple(median), tuple(ci), in_context, in_context_ci, transition)


@st.composite
def measurements(draw: st.DrawFn) -> Measurement:
    tokens = sorted(draw(st.sets(st.integers(1, 4096), min_size=1, max_size=6)))
    sizes = tuple(t * 1024 * 2 for t in tokens)
    names = draw(st.lists(st.sampled_from(["trtllm_oneshot", "vllm_custom", "pcie_ipc"]), unique=True))
    backends = {name: draw(backend_prices(sizes)) for name in ["nccl", *names]}
    return Measurement(2, (0, 1), "nvswitch", "allreduce", 1024, "bfloat16", sizes, backends)


@pytest.mark.slow
@settings(max_examples=80, deadline=None)
@given(table=measurements())
def test_generated_tables_round_trip_through_plain_data_and_yaml(table: Measurement) -> None:
    data = table.to_dict()
    assert Measurement.from_dict(data) == table
    assert Measurement.from_dict(parse_yaml(to_yaml(data))) == table


@pytest.mark.slow
@settings(max_examples=25, deadline=None)
@given(table=measurements())
def test_a_profile_carrying_a_generated_table_is_sealed_and_read_back(
    table: Measurement, tmp_path_factory
) -> None:
    example = load_profile(EXAMPLE)
    entry = dataclasses.replace(example.decisions[0], rules=(example.decisions[0].rules[-1],))  # NCCL only
    trials = dataclasses.replace(example.trials, hidden=1024)
    profile = dataclasses.replace(
        example, trials=trials, decisions=(entry,), measurements=(table,), digest=None
    )
    path = tmp_path_factory.mktemp("tables") / "p.yaml"
    dump_profile(profile, path)
    loaded = load_profile(path)
    assert loaded.measurements == (table,) and loaded == profile.with_digest()
    assert Profile.from_dict(loaded.to_dict()) == loaded


#: A CI beside its median, not around it: just above it, or just below (within the width a probe's
#: CI may have, so only containment can refuse it).
BESIDE = {"low above the median": (1.001, 1.002), "high below the median": (0.998, 0.999)}


@pytest.mark.parametrize("kind", ["ci_us", "in_context_ci_us"])
@pytest.mark.parametrize("side", list(BESIDE))
def test_a_profile_whose_ci_misses_its_median_is_refused(priced, write_profile, kind: str, side: str) -> None:
    # Through the loader, as a file holds it (lists of floats), and through gate(): NCCL, naming it.
    prices = priced["measurements"][0]["backends"]["nccl"]
    centre = prices["median_us" if kind == "ci_us" else "in_context_us"][3]
    prices[kind][3] = [round(centre * factor, 6) for factor in BESIDE[side]]
    path = write_profile(priced)
    with pytest.raises(ProfileInvalid) as refused:
        load_profile(path)
    assert f"measurements[0].backends.nccl.{kind}[3]" in str(refused.value)
    assert f"does not contain its value {centre}" in str(refused.value)
    decision = topo_gate.gate(path, tp=2, nbytes=1024, fingerprint=priced["node"]["fingerprint"])
    assert decision.fallback and "does not contain its value" in decision.reason
