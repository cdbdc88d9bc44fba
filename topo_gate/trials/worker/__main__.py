"""``python -m topo_gate.trials.worker --spec SPEC --out DIR``: one rank of a trial session.

Everything that can refuse the run is checked before torch is imported, so a refusal touches no GPU.
Refusals are one line on stderr and exit status 1.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

from topo_gate.trials.plan import session_from_spec
from topo_gate.trials.safety import missing_safety_env
from topo_gate.trials.worker.faults import FAULT_INJECTION_ENV, fault_injection_allowed

#: Exit status of a worker whose parent (runner or torchrun agent) died: it must not live on alone.
ORPHANED_EXIT_CODE = 75
_ORPHAN_POLL_S = 0.5


def _refusal(message: str) -> int:
    print(f"topo-gate worker: {message}", file=sys.stderr)
    return 1


def _exit_when_orphaned() -> None:
    """Exit as soon as the parent process is gone. The runner kills the worker group on every exit it
    controls (errors, Ctrl-C, SIGTERM); this covers the one it cannot: the runner being SIGKILLed."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            threading.Event().wait(_ORPHAN_POLL_S)
        os._exit(ORPHANED_EXIT_CODE)

    threading.Thread(target=watch, name="orphan-watch", daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    started = time.monotonic()
    parser = argparse.ArgumentParser(prog="python -m topo_gate.trials.worker", description=__doc__)
    parser.add_argument("--spec", required=True, type=Path, help="trial spec JSON (plan.session_to_spec)")
    parser.add_argument("--out", required=True, type=Path, help="folder for heartbeat and result files")
    args = parser.parse_args(argv)
    try:
        session, device = session_from_spec(json.loads(args.spec.read_text(encoding="utf-8")))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        return _refusal(f"cannot read spec {args.spec}: {error}")
    missing = missing_safety_env(os.environ)
    if missing and not session.allow_multicast:
        return _refusal(
            f"refusing to start without {', '.join(missing)} (keeps trials from creating NVLink "
            "multicast objects; the runner sets them; the user may pass --allow-multicast)"
        )
    if any(plan.faults for plan in session.plans) and not fault_injection_allowed():
        return _refusal(f"the spec asks for fault injection but {FAULT_INJECTION_ENV} is not 1")
    if not args.out.is_dir():
        return _refusal(f"--out {args.out} is not a folder")
    _exit_when_orphaned()
    # ``kill -USR1 <worker>`` writes every thread's stack to the worker's log: where a hung rank waits.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    from topo_gate.trials.worker.session import run_worker  # torch: only after every refusal

    run_worker(session, device, args.out, started=started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
