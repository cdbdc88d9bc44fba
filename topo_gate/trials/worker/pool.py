"""The backends of one worker session, shared by its patterns: each set up once, closed at the end.

A launcher builds its all-reduce paths once and runs every all-reduce of the model through them; a
session does the same. The ``allreduce`` pattern's plain backend (``trtllm_oneshot``) and the
``allreduce_rmsnorm`` pattern's composite of it (``trtllm_oneshot+rmsnorm``) run on one instance,
so its workspace, IPC handles and JIT build are paid once; backends of different names that share
a resource (FlashInfer's workspace, the NCCL communicator) share it through their own modules,
which works because nothing here closes a backend before the session ends.

Every rank builds, sets up and closes the same instances in the same order: setup and close are
collectives.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from topo_gate.profile.schema import PLAIN_PATTERN
from topo_gate.trials.backends import UnknownBackend, load_backend
from topo_gate.trials.backends.base import Backend, BackendContext
from topo_gate.trials.backends.names import is_composite, plain_of
from topo_gate.trials.worker.admission import local_reason


class BackendPool:
    """Instances by (name, pattern); a composite's plain instance is the ``allreduce`` one."""

    def __init__(self) -> None:
        self._instances: dict[tuple[str, str], Backend] = {}
        self._set_up: list[Backend] = []

    def admit(self, name: str, ctx: BackendContext) -> tuple[Backend | None, str | None]:
        """This rank's ``name`` for ``ctx.pattern`` (built once) and why it cannot run here (None if
        it can). Never raises: an admission problem is a reason, not a crash."""
        try:
            backend = self._instance(name, ctx)
        except UnknownBackend as error:
            return None, str(error)
        except ImportError as error:
            return None, f"cannot import: {error}"
        return backend, local_reason(backend, ctx)

    def _instance(self, name: str, ctx: BackendContext) -> Backend:
        key = (name, ctx.pattern)
        if key not in self._instances:
            backend_class = load_backend(name)
            if is_composite(name):
                plain = self._instance(plain_of(name), replace(ctx, pattern=PLAIN_PATTERN))
                self._instances[key] = backend_class(ctx, plain)  # type: ignore[call-arg]
            else:
                self._instances[key] = backend_class(ctx)
        return self._instances[key]

    def setup(self, backend: Backend) -> None:
        """Set ``backend`` up unless it already is (a composite: its plain instance first)."""
        plain = getattr(backend, "plain", None)
        if isinstance(plain, Backend):
            self.setup(plain)
        if not any(done is backend for done in self._set_up):
            backend.setup()
            self._set_up.append(backend)

    def close_all(self, before_each: Callable[[Backend], None]) -> None:
        """Close every instance set up, last first (a composite before its plain instance);
        ``before_each`` hears of each first (the heartbeat that blames a hung close)."""
        while self._set_up:
            backend = self._set_up.pop()
            before_each(backend)
            backend.close()
