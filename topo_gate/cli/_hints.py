"""Where a person on a machine without a GPU can start: real recorded inputs in a topo-gate clone.

One place for the paths, so every "no driver" line names the same real files (never a synthetic
example, never a path inside an installed wheel). The paths are relative to a clone's root, where
the README's quickstart runs; tests/cli/test_no_gpu_hints.py checks that both files exist and are
real recordings.
"""

from __future__ import annotations

#: A real 2x H200 probe's evidence (profiles/h200-x2/README.md): what ``--replay`` redoes offline.
REAL_EVIDENCE = "profiles/h200-x2/h7168-run1.evidence.json"
#: The NVML capture of that same probe's node, for ``--from``.
REAL_CAPTURE = "profiles/h200-x2/h200-x2.capture.json"

REPLAY_HINT = (
    f"replay the real 2x H200 evidence in a topo-gate clone: `topo-gate probe --replay {REAL_EVIDENCE}`"
)
CAPTURE_HINT = (
    f"read a recorded node with --from CAPTURE, e.g. `--from {REAL_CAPTURE}` "
    "(a real 2x H200 capture in a topo-gate clone)"
)
