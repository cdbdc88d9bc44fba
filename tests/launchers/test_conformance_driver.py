"""scripts/conformance.py's comparison, reporting and grid, with stand-in adapters (no launcher needed).

An adapter here answers from a table the test writes, so each test knows which points must
disagree; the route model is topo-gate's own (pure).
"""

from __future__ import annotations

import collections
import sys
from pathlib import Path
from types import ModuleType

import pytest

from topo_gate.launchers.routes import architecture_variants, route
from topo_gate.launchers.routes.base import Knobs, RouteError, at

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
sys.path.insert(0, str(SCRIPTS))
import conformance  # noqa: E402
from conformance_points import GROUP_CLASSES, Setting  # noqa: E402
from conformance_strict import Record, Unset, strict  # noqa: E402

NO_FLASHINFER = Knobs(env={"VLLM_ALLREDUCE_USE_FLASHINFER": "0", "VLLM_ALLREDUCE_USE_SYMM_MEM": "0"})
SETTING = Setting(
    "vllm", "0.33.0", (8, 0), 2, "pcie-switch", 4096, NO_FLASHINFER, architecture="LlamaForCausalLM"
)
CUSTOM_LIMIT = 8 << 20  # vLLM's custom all-reduce default max_size: the route model's boundary here


def adapter(answer, *, settings=(SETTING,)) -> ModuleType:
    """A stand-in adapter: ``answer(setting, pattern, size, model_answer)`` is the 'release's' answer."""
    module = ModuleType("conformance_standin")

    def real_routes(setting, sizes):
        model = conformance.model_routes(setting)
        return {p: [answer(setting, p, n, at(model[p], n)) for n in sizes] for p in model}

    module.__dict__.update(
        LAUNCHER="vllm",
        STAND_INS={},
        installed_release=lambda: "0.33.0",
        settings=lambda release: list(settings),
        real_routes=real_routes,
    )
    return module


def echo(setting, pattern, size, model):
    return model


def test_a_release_that_answers_as_the_route_model_passes_every_point() -> None:
    lines: list[str] = []
    tally = conformance.run(adapter(echo), [SETTING], out=lines.append)
    assert (tally.failed, tally.known, lines) == (0, 0, [])
    assert tally.points == 2 * len(conformance.sizes(SETTING, conformance.model_routes(SETTING), ()))


def test_a_disagreement_prints_the_point_and_both_answers_and_fails_that_point_only() -> None:
    def off_at_limit(setting, pattern, size, model):
        return "vllm_custom" if pattern == "allreduce" and size == CUSTOM_LIMIT else model

    lines: list[str] = []
    tally = conformance.run(adapter(off_at_limit), [SETTING], out=lines.append)
    assert tally.failed == 1
    (line,) = lines
    assert line.startswith("DISAGREE vllm 0.33.0 sm80 tp2 pcie-switch hidden 4096 x2 LlamaForCausalLM")
    assert f"allreduce {CUSTOM_LIMIT} B: route model NCCL, release vllm_custom" in line
    assert "VLLM_ALLREDUCE_USE_FLASHINFER=0" in line


def test_a_known_disagreement_passes_as_known_and_nothing_else_does() -> None:
    def off_at_limit(setting, pattern, size, model):
        return "vllm_custom" if size == CUSTOM_LIMIT else model

    accepted = (
        conformance.Known("vllm", ("0.33.0",), "allreduce", lambda s, n, m, r: n == CUSTOM_LIMIT, "test"),
    )
    lines: list[str] = []
    tally = conformance.run(adapter(off_at_limit), [SETTING], accepted, out=lines.append)
    # The plain pattern's disagreement is accepted; the fused pattern's (another pattern) is not.
    assert (tally.known, tally.failed) == (1, 1)
    assert [" allreduce_rmsnorm " in line for line in lines] == [True]


def test_an_error_in_the_release_code_fails_the_setting_and_says_where() -> None:
    def broken(setting, pattern, size, model):
        raise Unset("CustomAllreduce.max_size was read, but the conformance adapter does not set it")

    lines: list[str] = []
    tally = conformance.run(adapter(broken), [SETTING], out=lines.append)
    assert tally.failed == tally.points > 0
    assert lines[0].startswith("ERROR Unset: CustomAllreduce.max_size was read")


def test_sizes_are_the_ladder_and_the_receivable_sizes_on_each_side_of_every_limit() -> None:
    row = SETTING.hidden * SETTING.itemsize
    found = conformance.sizes(SETTING, {"allreduce": ((1000 * row + 5, "x"), (None, None))}, [3 * row])
    assert {1000 * row, 1001 * row} <= set(found)  # each side of a limit between rows
    assert {2 * row, 3 * row} <= set(found)  # a limit on a row boundary: the row below, and itself
    assert {row, 8192 * row} <= set(found)  # the probe's ladder: 1 to 8192 tokens
    assert all(size % row == 0 and size >= row for size in found)


def test_unknown_architecture_is_each_class_merged_as_the_route_model_merges_them() -> None:
    smaller_pass = Knobs(
        args=("--compilation-config", '{"pass_config":{"fi_allreduce_fusion_max_size_mb":1}}')
    )
    unknown = Setting("vllm", "0.33.0", (9, 0), 2, "nvswitch", 4096, smaller_pass, architecture=None)
    model = route("vllm", unknown.knobs, unknown.context())["allreduce_rmsnorm"]
    assert any(b == "model_dependent_vllm" for _, b in model)  # the classes do differ here

    def per_class(setting, pattern, size, model_answer):
        assert setting.architecture is not None  # the driver asks per class
        return at(conformance.model_routes(setting)[pattern], size)

    assert conformance.run(adapter(per_class), [unknown], out=print).failed == 0

    def one_class_differs_at_one_row(setting, pattern, size, model_answer):
        differs = setting.architecture == "LlamaForCausalLM" and size == 8192 and pattern == "allreduce"
        return "vllm_custom" if differs else at(conformance.model_routes(setting)[pattern], size)

    lines: list[str] = []
    assert conformance.run(adapter(one_class_differs_at_one_row), [unknown], out=lines.append).failed == 1
    assert lines[0].endswith("allreduce 8192 B: route model mnnvl_vllm, release model_dependent_vllm")


def test_a_release_without_its_own_route_model_is_checked_against_the_newest_and_says_so() -> None:
    assert conformance.modelled_release("vllm", "0.33.0") == ("0.33.0", None)
    release, note = conformance.modelled_release("flashinfer", "9.9.9")
    assert note == f"flashinfer 9.9.9 has no route model: checked against {release}'s"


def test_main_prints_per_release_counts_and_closes_with_passed_and_failed(monkeypatch, capsys) -> None:
    def off_at_limit(setting, pattern, size, model):
        return "vllm_custom" if pattern == "allreduce" and size == CUSTOM_LIMIT else model

    monkeypatch.setitem(sys.modules, "conformance_standin", adapter(off_at_limit))
    assert conformance.main(["standin"]) == 1
    out = capsys.readouterr().out.splitlines()
    points = 2 * len(conformance.sizes(SETTING, conformance.model_routes(SETTING), ()))
    (summary,) = [line for line in out if line.startswith("vllm 0.33.0: ")]
    assert summary.startswith(f"vllm 0.33.0: {points} points at 1 settings in ")
    assert "  1 x allreduce (element size 2): route model NCCL, release vllm_custom" in out
    assert out[-1] == f"{points - 1} passed, 1 failed"
    monkeypatch.setitem(sys.modules, "conformance_standin", adapter(echo))
    assert conformance.main(["standin"]) == 0


def test_the_grid_covers_each_knob_set_with_every_value_of_every_other_axis() -> None:
    standin = adapter(echo)
    del standin.__dict__["settings"]
    standin.__dict__["user_settings"] = lambda release: (Knobs(args=("--enforce-eager",)),)
    settings = list(conformance.grid("vllm", "0.33.0", standin))
    assert {(s.capability, s.tp, s.group_class) for s in settings} == {
        (c, t, g) for c in conformance.CAPABILITIES for t in conformance.TP_SIZES for g in GROUP_CLASSES
    }
    per_knobset = collections.defaultdict(list)
    for s in settings:
        per_knobset[conformance._key(s.knobs)].append(s)
    assert len(per_knobset) > 2  # the planner's candidates came in
    wanted: dict[str, set[object]] = {
        "capability": set(conformance.CAPABILITIES),
        "tp": set(conformance.TP_SIZES),
        "group_class": set(GROUP_CLASSES),
        "architecture": {*architecture_variants("vllm", "0.33.0"), None},
        "hidden": set(conformance.HIDDEN_SIZES),
        "itemsize": set(conformance.ITEMSIZES),
    }
    for group in per_knobset.values():
        for axis, values in wanted.items():
            assert {getattr(s, axis) for s in group} == values, axis
    for first, second in (("architecture", "hidden"), ("architecture", "itemsize"), ("hidden", "itemsize")):
        pairs = {(getattr(s, first), getattr(s, second)) for s in settings}
        assert len(pairs) == len(wanted[first]) * len(wanted[second]), (first, second)


def test_a_strict_stand_in_refuses_an_attribute_it_was_not_given() -> None:
    class Communicator:
        disabled = False  # a class default a new release might start reading
        max_size: int

        def should_use(self) -> bool:
            return not self.disabled and self.max_size > 0

    given = strict(Communicator, max_size=1)
    with pytest.raises(Unset, match="Communicator.disabled was read"):
        given.should_use()
    assert strict(Communicator, max_size=1, disabled=False).should_use()
    with pytest.raises(Unset, match="tp group.rank was read"):
        _ = Record("tp group", cpu_group=None).rank


def test_several_adapters_run_each_in_its_own_interpreter_and_add_up(monkeypatch, capsys) -> None:
    closing = {"vllm": "10 passed, 2 failed\n", "flashinfer": "5 passed, 0 failed\n", "sglang": "Traceback\n"}
    ran: list[list[str]] = []

    def subprocess_run(command, **kwargs):
        ran.append(command)
        return conformance.subprocess.CompletedProcess(command, 0, stdout=closing[command[-1]], stderr="")

    monkeypatch.setattr(conformance.subprocess, "run", subprocess_run)
    assert conformance.main(["vllm", "flashinfer"]) == 1
    assert [command[-1] for command in ran] == ["vllm", "flashinfer"]
    assert capsys.readouterr().out.splitlines()[-1] == "15 passed, 2 failed"
    # An adapter that dies before its closing line fails the run and says so.
    assert conformance.main(["flashinfer", "sglang"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert "ERROR conformance_sglang stopped before its closing line (exit 0)" in out
    assert out[-1] == "5 passed, 1 failed"


REFUSED = Setting(
    "vllm",
    "0.33.0",
    (9, 0),
    2,
    "nvswitch",
    4096,
    Knobs(env={"VLLM_BATCH_INVARIANT": "1"}),
    architecture="LlamaForCausalLM",
)


def releasing(answer) -> ModuleType:
    """A stand-in adapter whose 'release' answers ``answer(setting)`` for every size, or raises it."""
    module = adapter(echo)

    def real_routes(setting, sizes):
        found = answer(setting)
        if isinstance(found, Exception):
            raise found
        return {"allreduce": [found] * len(sizes), "allreduce_rmsnorm": [found] * len(sizes)}

    module.real_routes = real_routes
    return module


def test_a_setting_both_refuse_agrees_in_one_point() -> None:
    lines: list[str] = []
    tally = conformance.run(
        releasing(lambda s: RouteError("vLLM refuses at start-up")), [REFUSED], out=lines.append
    )
    assert (tally.points, tally.failed, lines) == (1, 0, [])


def test_a_setting_the_model_refuses_but_the_release_runs_fails() -> None:
    lines: list[str] = []
    tally = conformance.run(releasing(lambda s: None), [REFUSED], out=lines.append)
    assert (tally.points, tally.failed) == (1, 1)
    (line,) = lines
    assert (
        line.startswith("ERROR the route model refuses vllm 0.33.0 sm90 tp2 nvswitch")
        and "which the release runs" in line
    )


def test_a_layout_the_adapter_does_not_execute_is_neither_passed_nor_failed() -> None:
    lines: list[str] = []
    refusal = RouteError("--enable-mscclpp is not executed")
    tally = conformance.run(releasing(lambda s: refusal), [REFUSED], out=lines.append)
    assert (tally.points, tally.failed, lines) == (0, 0, [])
