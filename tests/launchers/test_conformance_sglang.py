"""scripts/conformance_sglang.py: SGLang 0.5.23's own dispatch, executed on CPU, agrees with topo-gate's
SGLang route model, and catches a route model that is wrong where SGLang's code decides.

Needs SGLang 0.5.23 importable (scripts/launcher_parsers.sh's venv runs this file); skipped elsewhere.
The planted fault: the route model converts the FlashInfer fusion workspace's token cap (2048 rows)
into bytes with a wrong hidden size, so its workspace spans end where SGLang's do not.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from topo_gate.launchers import sglang as planner
from topo_gate.launchers.routes import sglang as sglang_routes
from topo_gate.launchers.routes.base import Knobs, RouteError

pytest.importorskip("sglang.srt.distributed.parallel_state")
SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
sys.path.insert(0, str(SCRIPTS))
import conformance  # noqa: E402
import conformance_sglang as adapter  # noqa: E402
from conformance_points import GROUP_CLASSES, Setting  # noqa: E402

# Importing SGLang sets variables of its own: put the environment back after each test.
pytestmark = [pytest.mark.usefixtures("restore_environment"), pytest.mark.slow]

RELEASE = "0.5.23"
#: Where SGLang builds the fusion workspace (SM 9.x, 10.x) and the served model it is sized for.
FUSION_CAPABILITIES = ((9, 0), (10, 0))
HIDDEN = 7168
#: The planted fault's hidden size: half the served model's, so the modelled cap falls at 1024 rows.
WRONG_HIDDEN = HIDDEN // 2
FUSION_ROWS = 2048  # add_norm.py:141 FUSE_ALLREDUCE_MAX_BATCH_SIZE


@pytest.fixture(autouse=True)
def quiet_sglang():
    """SGLang warns once per communicator it disables; the tests read disagreements, not logs."""
    logging.disable(logging.WARNING)
    yield
    logging.disable(logging.NOTSET)


def fusion_settings() -> list[Setting]:
    """Where the fusion workspace serves messages: fusion switched on by SGLang (a listed MoE
    architecture) or by the flag, at every TP size, on groups with the workspace's fabric."""
    settings = []
    for capability in FUSION_CAPABILITIES:
        for tp in (2, 4, 8):
            settings.append(
                Setting(
                    "sglang",
                    RELEASE,
                    capability,
                    tp,
                    "nvswitch",
                    HIDDEN,
                    Knobs(),
                    architecture="DeepseekV3ForCausalLM",
                )
            )
            settings.append(
                Setting(
                    "sglang",
                    RELEASE,
                    capability,
                    tp,
                    "pcie-switch",
                    HIDDEN,
                    Knobs(args=planner.FUSION_ON),
                    architecture="LlamaForCausalLM",
                )
            )
    return settings


def test_a_wrong_hidden_size_in_the_fusion_workspace_cap_is_caught(monkeypatch) -> None:
    workspace_route = sglang_routes._workspace_route

    def wrong_hidden(backend, ctx, *, fused):
        return workspace_route(backend, replace(ctx, hidden=WRONG_HIDDEN), fused=fused)

    monkeypatch.setattr(sglang_routes, "_workspace_route", wrong_hidden)
    row = HIDDEN * 2
    for setting in fusion_settings():
        count, disagreements, error = conformance.check(adapter, setting)
        assert error is None, error
        assert count > 0
        found = {(d.pattern, d.size) for d in disagreements}
        # Between the wrong cap (1024 rows) and SGLang's (2048 rows) the model leaves the workspace
        # that SGLang still runs, for plain and fused calls alike; nowhere else does it differ.
        assert {"allreduce", "allreduce_rmsnorm"} == {pattern for pattern, _ in found}, setting
        assert (("allreduce", FUSION_ROWS * row) in found) and (
            ("allreduce_rmsnorm", FUSION_ROWS * row) in found
        )
        assert all(WRONG_HIDDEN * 2 * FUSION_ROWS < size <= FUSION_ROWS * row for _, size in found), setting
        assert all(d.real is not None and d.real.startswith(("trtllm_", "mnnvl_")) for d in disagreements)


def test_the_unpatched_route_model_agrees_with_sglang_over_the_fusion_settings() -> None:
    for setting in fusion_settings():
        count, disagreements, error = conformance.check(adapter, setting)
        assert (count, error) != (0, None)
        assert error is None, error
        assert disagreements == [], [str(d) for d in disagreements[:5]]


def slice_of_the_grid() -> list[Setting]:
    """Every capability x TP size x group class at SGLang's defaults for each architecture class,
    and each user setting at one group class per node (turning), over both element sizes."""
    settings = []
    variants = adapter_variants()
    step = 0
    for capability in conformance.CAPABILITIES:
        for tp in conformance.TP_SIZES:
            for group_class in GROUP_CLASSES:
                architecture = variants[step % len(variants)]
                itemsize = conformance.ITEMSIZES[step % len(conformance.ITEMSIZES)]
                settings.append(
                    Setting(
                        "sglang",
                        RELEASE,
                        capability,
                        tp,
                        group_class,
                        HIDDEN,
                        Knobs(),
                        itemsize,
                        architecture,
                    )
                )
                step += 1
    for index, knobset in enumerate(adapter.user_settings(RELEASE)):
        for node, (capability, tp) in enumerate(
            (c, t) for c in conformance.CAPABILITIES for t in conformance.TP_SIZES
        ):
            group_class = GROUP_CLASSES[(index + node) % len(GROUP_CLASSES)]
            architecture = variants[(index + node) % len(variants)]
            settings.append(
                Setting("sglang", RELEASE, capability, tp, group_class, HIDDEN, knobset, 2, architecture)
            )
    return settings


def adapter_variants() -> tuple[str, ...]:
    return tuple(a for a in sglang_routes.architecture_variants() if a is not None)


def test_the_route_model_agrees_with_sglang_over_a_slice_of_the_grid() -> None:
    checked = refused = 0
    for setting in slice_of_the_grid():
        try:
            conformance.model_routes(setting)
        except RouteError:
            # Where the route model refuses, SGLang must refuse too (it raises at start-up): the
            # check then passes one point, and says nothing.
            with pytest.raises(RouteError):
                adapter.real_routes(setting, [HIDDEN * setting.itemsize])
            refused += 1
        count, disagreements, error = conformance.check(adapter, setting)
        assert error is None, error
        assert disagreements == [], [str(d) for d in disagreements[:5]]
        checked += count
    assert checked > refused > 0


def test_a_stood_in_object_fails_loudly_on_an_attribute_it_was_not_given() -> None:
    setting = Setting(
        "sglang", RELEASE, (9, 0), 8, "nvswitch", HIDDEN, Knobs(), architecture="LlamaForCausalLM"
    )
    with pytest.MonkeyPatch.context() as patch:
        # A release whose all_reduce reads one more coordinator attribute must fail, not pass.
        original = adapter._sglang().parallel_state.GroupCoordinator.all_reduce

        def reads_more(self, input_):
            self.attribute_of_a_newer_release  # noqa: B018
            return original(self, input_)

        patch.setattr(adapter._sglang().parallel_state.GroupCoordinator, "all_reduce", reads_more)
        with pytest.raises(AttributeError, match="attribute_of_a_newer_release"):
            adapter.real_routes(setting, [HIDDEN * 2])
