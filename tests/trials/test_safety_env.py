"""The multicast-off settings every trial worker needs, checked by value (DESIGN.md principle 5).

Expected settings are written here from what each library reads, not from topo_gate's table:
NCCL_NVLS_ENABLE=0 (NCCL: no NVLink SHARP / multicast), TORCH_SYMM_MEM_DISABLE_MULTICAST=1 (torch
symmetric memory: no multimem), NVSHMEM_DISABLE_NVLS=1 (NVSHMEM: no NVLS). A variable that is set to
anything else is as unsafe as one that is missing.
"""

from __future__ import annotations

import pytest

from topo_gate.trials.safety import missing_safety_env

REQUIRED = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
WRONG = {"NCCL_NVLS_ENABLE": ["1", "2", "", " 0"], "TORCH_SYMM_MEM_DISABLE_MULTICAST": ["0", "", "true"],
         "NVSHMEM_DISABLE_NVLS": ["0", "", "yes"]}  # fmt: skip


def fresh(text: str) -> str:
    """An equal string that is a different object (values read from a real environment are)."""
    return "".join(list(text))


def safe_env() -> dict[str, str]:
    return {fresh(name): fresh(value) for name, value in REQUIRED.items()} | {"PATH": "/usr/bin"}


def test_an_empty_environment_lacks_every_setting() -> None:
    assert sorted(missing_safety_env({})) == sorted(f"{name}={value}" for name, value in REQUIRED.items())


def test_all_settings_present_is_safe() -> None:
    assert missing_safety_env(safe_env()) == []


def test_the_real_process_environment_is_read_by_value(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name, value in REQUIRED.items():
        monkeypatch.setenv(name, value)
    assert missing_safety_env(os.environ) == []
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "1")
    assert missing_safety_env(os.environ) == ["NCCL_NVLS_ENABLE=0"]


@pytest.mark.parametrize(
    ("name", "wrong"), [(name, value) for name, values in WRONG.items() for value in values]
)
def test_a_wrong_value_is_as_unsafe_as_a_missing_one(name: str, wrong: str) -> None:
    env = safe_env()
    env[name] = wrong
    assert missing_safety_env(env) == [f"{name}={REQUIRED[name]}"]
    del env[name]
    assert missing_safety_env(env) == [f"{name}={REQUIRED[name]}"]
