"""The evidence floor: what the trials record and what ``decide`` reads, below both of them.

``trials/`` gathers evidence and ``decide/`` turns it into rules; neither imports the other
(DESIGN.md, "Gather -> evidence -> pure decision"; the contracts in pyproject.toml hold it). What
both sides must agree on is written here once:

- ``document``: the evidence document (``topo-gate/evidence/v1.N``): built from plan results,
  written atomically, loaded checked, and its runs typed (``runs_of``) for decide to read by field;
- ``check``: what a document must hold to be used (one line naming the field otherwise);
- ``limits``: caps on the work a document asks of ``decide`` and ``report``;
- ``stats``: medians, their CIs, and the paired bootstrap of speed-ups;
- ``names``: the baseline backend and the layer graphs' GEMM, by name;
- ``bar``: decide's bar, which the worker applies too: the margin, the calls of a step, and what a
  size transition costs.

Below them only the profile schema (the checks build on it), the guarded file reader and writer,
and the topology model (to rebuild a recorded capture). This ``__init__`` imports nothing, so a
module that needs one constant loads only its own.
"""
