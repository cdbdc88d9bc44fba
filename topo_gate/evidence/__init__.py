"""The evidence floor: what the trials record and what ``decide`` reads, below both of them.

``trials/`` gathers evidence and ``decide/`` turns it into rules; neither imports the other
(DESIGN.md, "Gather -> evidence -> pure decision"; the contracts in pyproject.toml hold it). What
both sides must agree on is written here once:

- ``document``: the evidence document (``topo-gate/evidence/v1.N``): built from plan results,
  written atomically, loaded checked;
- ``check``: what a document must hold to be used (one line naming the field otherwise);
- ``limits``: caps on the work a document asks of ``decide`` and ``report``;
- ``stats``: medians, their CIs, and the paired bootstrap of speed-ups;

Pure and stdlib (plus the profile schema the checks build on); this ``__init__`` imports nothing, so
a module that needs one constant loads only its own.
"""
