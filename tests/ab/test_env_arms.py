"""``ab --arm NAME:VAR=VALUE[,VAR=VALUE...]`` (topo_gate/ab/env_arms.py), how it combines with
``--arms`` (``driver.arm_names``), the arm it builds (``arms.build_arms``), its place in the
schedule, its own verdict, and its env in the record, secrets redacted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ab_helpers import FINGERPRINT, record_method
from hypothesis import given
from hypothesis import strategies as st

from topo_gate.ab.arms import ARMS, ENV_REASON, build_arms
from topo_gate.ab.driver import Refused, arm_names
from topo_gate.ab.env_arms import MAX_NAME, EnvArm, parse_env_arm, parse_env_arms
from topo_gate.ab.metrics import regex_metric
from topo_gate.ab.outcome import build_record, evaluate
from topo_gate.ab.record import load_record, write_record
from topo_gate.ab.schedule import schedule
from topo_gate.ab.session import RunResult
from topo_gate.ab.verdict import REGRESSION, SAME, WIN, overall

CMD = ("vllm", "bench", "latency", "--model", "M", "-tp", "4")
ENV = {"PATH": "/usr/bin", "TOPO_GATE_PROFILE": "node.yaml", "NCCL_NVLS_ENABLE": "1"}
TRTLLM = "trtllm:VLLM_FLASHINFER_ALLREDUCE_BACKEND=trtllm"


def parse(spec: str) -> EnvArm:
    return parse_env_arm(spec, ARMS)


# --- parsing --------------------------------------------------------------------------------------


def test_the_advices_spec_is_one_arm_with_one_variable() -> None:
    assert parse(TRTLLM) == EnvArm("trtllm", {"VLLM_FLASHINFER_ALLREDUCE_BACKEND": "trtllm"})


@pytest.mark.parametrize(
    "spec, env",
    [
        ("x:A=1,B=2", {"A": "1", "B": "2"}),
        ("x:NCCL_ALGO=Ring,Tree", {"NCCL_ALGO": "Ring,Tree"}),  # a list value stays whole
        ("x:NCCL_ALGO=Ring,Tree,NCCL_PROTO=Simple", {"NCCL_ALGO": "Ring,Tree", "NCCL_PROTO": "Simple"}),
        ("x:A=1,B", {"A": "1,B"}),  # no VAR= after the comma: still the value
        ("x:A=", {"A": ""}),  # set to the empty string: a change of its own
        ("x:A=b=c:d", {"A": "b=c:d"}),
        ("x:_A1=v", {"_A1": "v"}),
    ],
)
def test_assignments_split_at_a_comma_only_where_a_variable_follows(spec, env) -> None:
    assert dict(parse(spec).env) == env


def test_names_up_to_the_limit_are_taken_and_one_more_is_refused() -> None:
    assert parse("a:X=1").name == "a"
    assert parse("a" * MAX_NAME + ":X=1").name == "a" * MAX_NAME
    with pytest.raises(ValueError, match="name"):
        parse("a" * (MAX_NAME + 1) + ":X=1")


@pytest.mark.parametrize(
    "spec, words",
    [
        ("trtllm", "no ':'"),
        ("VLLM_FLASHINFER_ALLREDUCE_BACKEND=trtllm", "no ':'"),
        (":X=1", "name ''"),
        ("1x:X=1", "name '1x'"),
        ("a.b:X=1", "name 'a.b'"),
        ("a/b:X=1", "name 'a/b'"),
        ("default:X=1", "built-in arm"),
        ("Plan:X=1", "built-in arm"),
        ("NCCL:X=1", "built-in arm"),
        ("x:", "'' in arm 'x' is not VAR=VALUE"),
        ("x:X", "'X' in arm 'x' is not VAR=VALUE"),
        ("x:=1", "is not VAR=VALUE"),
        ("x:1X=1", "is not VAR=VALUE"),
        ("x:A-B=1", "is not VAR=VALUE"),
        ("x:TOPO_GATE_AB_RESULT=/tmp/r", "set or removed by topo-gate"),
        ("x:topo_gate_profile=p.yaml", "set or removed by topo-gate"),
        ("x:A=1,A=2", "A is given twice"),
    ],
)
def test_a_malformed_spec_says_what_is_wrong_in_one_line(spec, words) -> None:
    with pytest.raises(ValueError) as raised:
        parse(spec)
    message = str(raised.value)
    assert message.startswith("--arm NAME:VAR=VALUE") and words in message and "\n" not in message


def test_two_arms_of_one_name_are_refused_whatever_the_case() -> None:
    with pytest.raises(ValueError, match="'fast' is given twice"):
        parse_env_arms(["fast:A=1", "Fast:B=2"], ARMS)
    assert [a.name for a in parse_env_arms(["one:A=1", "two:A=2"], ARMS)] == ["one", "two"]


_NAMES = st.from_regex(r"[A-Za-z][A-Za-z0-9_-]{0,15}", fullmatch=True).filter(lambda n: n.lower() not in ARMS)
_VARS = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,20}", fullmatch=True).filter(
    lambda v: not v.upper().startswith("TOPO_GATE_")
)
# A value may hold anything but ",VAR=" (which starts the next assignment).
_VALUES = st.text(st.characters(codec="utf-8", exclude_characters=","), max_size=20)


@given(name=_NAMES, env=st.dictionaries(_VARS, _VALUES, min_size=1, max_size=4))
def test_what_an_arm_sets_is_read_back_from_its_spec(name, env) -> None:
    arm = EnvArm(name, env)
    assert parse(f"{name}:{arm.spec()}") == arm


# --- with --arms ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "arms, extra, names",
    [
        (None, 0, ["default", "plan"]),
        (None, 1, ["default"]),  # an env change alone needs no plan (nor a profile)
        ("default", 1, ["default"]),
        ("plan,default", 1, ["default", "plan"]),
        ("nccl,default", 2, ["default", "nccl"]),
    ],
)
def test_arms_picks_the_built_in_arms_beside_the_env_arms(arms, extra, names) -> None:
    env_arms = [EnvArm(f"e{i}", {"A": str(i)}) for i in range(extra)]
    assert arm_names(arms, env_arms) == names


@pytest.mark.parametrize("arms, extra", [("default", 0), ("plan", 1), ("default,bogus", 1)])
def test_arms_without_the_default_or_nothing_to_compare_is_a_usage_error(arms, extra) -> None:
    with pytest.raises(Refused) as raised:
        arm_names(arms, [EnvArm("e", {"A": "1"})] * extra)
    assert raised.value.kind == "usage" and "--arms" in str(raised.value)


# --- the arm, its place, its verdict --------------------------------------------------------------


def test_an_env_arm_is_cmd_as_given_with_its_variables_and_comes_before_nccl(vllm_node) -> None:
    plan = vllm_node.planned(CMD)
    arms = build_arms(
        ["default", "plan", "nccl"],
        CMD,
        ENV,
        launcher="vllm",
        plan=plan,
        fingerprint=FINGERPRINT,
        env_arms=[parse(TRTLLM), parse("nvls:NCCL_NVLS_ENABLE=0")],
    )
    assert [arm.name for arm in arms] == ["default", "plan", "trtllm", "nvls", "nccl"]
    trtllm, nvls = arms[2], arms[3]
    assert trtllm.argv == CMD and dict(trtllm.env) == {
        "PATH": "/usr/bin",
        "NCCL_NVLS_ENABLE": "1",
        "VLLM_FLASHINFER_ALLREDUCE_BACKEND": "trtllm",
    }  # no plan, and no plugin variable: the plugin would apply the plan here too
    assert trtllm.knobs["env"] == {"VLLM_FLASHINFER_ALLREDUCE_BACKEND": "trtllm"}
    assert trtllm.knobs["added"] == ["VLLM_FLASHINFER_ALLREDUCE_BACKEND=trtllm"]
    assert trtllm.knobs["reason"] == ENV_REASON and trtllm.knobs["warnings"] == []
    # The user's environment already sets it: the arm's value wins, and the warning keeps the value out.
    assert nvls.env["NCCL_NVLS_ENABLE"] == "0"
    assert nvls.knobs["warnings"] == [
        "NCCL_NVLS_ENABLE is set in your environment too; this arm runs with its own value"
    ]
    slots = schedule([arm.name for arm in arms], runs=2, order="alternate", seed=0, warmups=1)
    assert [s.arm for s in slots if s.round == 2] == ["default", "plan", "trtllm", "nvls", "nccl"]


def test_an_env_arm_of_the_value_already_set_is_the_default_and_not_run() -> None:
    (_, same) = build_arms(
        ["default"],
        CMD,
        ENV,
        launcher="vllm",
        plan=None,
        fingerprint=None,
        env_arms=[parse("x:NCCL_NVLS_ENABLE=1")],
    )
    assert same.same_as == "default" and same.knobs["warnings"] == []


METRIC = regex_metric("t=([0-9.]+)", higher_is_better=True)
SERIES = {
    "default": [100.0, 101.0, 99.0, 100.0, 102.0],
    "plan": [90.0, 91.0, 89.5, 90.0, 91.5],
    "trtllm": [110.0, 111.0, 109.0, 110.0, 112.0],
    "nvls": [100.5, 100.0, 99.5, 101.0, 101.5],
}


def _results(names: list[str], series: dict[str, list[float]]) -> list[RunResult]:
    """Every arm's rounds from ``series``, in the schedule's order."""
    results = []
    for slot in schedule(names, runs=5, order="alternate", seed=0, warmups=0):
        assert slot.round is not None
        value = series[slot.arm][slot.round - 1]
        out, err = Path(f"o{slot.index}"), Path(f"e{slot.index}")
        results.append(RunResult(slot, "ok", 0, value, None, (), out, err, None, 1.0))
    return results


@pytest.mark.parametrize(
    "names, verdicts, follows",
    [
        (["default", "trtllm"], [("trtllm", WIN)], "trtllm"),
        (
            ["default", "plan", "trtllm", "nvls"],
            [("plan", REGRESSION), ("trtllm", WIN), ("nvls", SAME)],
            "plan",
        ),
        (["default", "nvls", "trtllm"], [("nvls", SAME), ("trtllm", WIN)], "nvls"),
    ],
)
def test_each_env_arm_has_its_own_verdict_and_the_exit_follows_plan_else_the_first(
    names, verdicts, follows, vllm_node
) -> None:
    arms = build_arms(
        [n for n in names if n in ARMS],
        CMD,
        {},
        launcher="vllm",
        plan=vllm_node.planned(CMD) if "plan" in names else None,
        fingerprint=FINGERPRINT,
        env_arms=[EnvArm(n, {"V": n}) for n in names if n not in ARMS],
    )
    assert [arm.name for arm in arms] == names
    summaries, comparisons = evaluate(arms, _results(names, SERIES), metric=METRIC, margin=0.02, seed=0)
    assert list(summaries) == names
    assert [(c.arm, c.verdict) for c in comparisons] == verdicts
    chosen = overall(comparisons)
    assert chosen is not None and chosen.arm == follows


def test_the_record_keeps_the_arms_env_with_secrets_redacted_and_round_trips(tmp_path) -> None:
    secret = "hf_" + "A1b2C3d4E5f6G7h8I9j0K"
    arms = build_arms(
        ["default"],
        CMD,
        {},
        launcher="vllm",
        plan=None,
        fingerprint=None,
        env_arms=[
            parse(f"{TRTLLM},HF_TOKEN=two words"),
            parse(f"shaped:OTHER_VAR={secret}"),
        ],
    )
    names = ["default", "trtllm", "shaped"]
    results = _results(names, {**SERIES, "shaped": SERIES["trtllm"]})
    summaries, comparisons = evaluate(arms, results, metric=METRIC, margin=0.02, seed=0)
    record = build_record(
        command=CMD,
        launcher="vllm",
        launcher_version="0.33.0",
        metric=METRIC,
        result_via="stdout",
        model=None,
        hidden=None,
        tp=4,
        profile={"path": None, "digest": None, "fingerprint": None},
        node={"fingerprint": None, "checked_by": "not checked (no plan arm)"},
        method=record_method(str(tmp_path), runs=5),
        arms=arms,
        results=results,
        summaries=summaries,
        comparisons=comparisons,
        notes=[],
        folder=tmp_path,
    )
    write_record(tmp_path / "ab.json", record)
    text = (tmp_path / "ab.json").read_text()
    assert "two words" not in text and "words" not in text and secret not in text
    loaded = load_record(tmp_path / "ab.json")
    assert loaded["arms"]["trtllm"]["env"] == {
        "VLLM_FLASHINFER_ALLREDUCE_BACKEND": "trtllm",
        "HF_TOKEN": "<redacted>",
    }
    assert loaded["arms"]["trtllm"]["added"] == [
        "VLLM_FLASHINFER_ALLREDUCE_BACKEND=trtllm",
        "HF_TOKEN=<redacted>",
    ]
    assert loaded["arms"]["shaped"]["env"] == {"OTHER_VAR": "<redacted>"}
    assert [c["arm"] for c in loaded["comparisons"]] == ["trtllm", "shaped"]
    assert loaded["profile"]["path"] is None and json.loads(text)["verdict"] == WIN
