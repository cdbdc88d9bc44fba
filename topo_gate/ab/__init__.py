"""``topo-gate ab``: the user's own benchmark run with and without the plan, interleaved, and judged.

Pure parts: ``schedule`` (the order of runs), ``benchmarks`` (which launcher benchmark a command runs,
the result file it writes and the metrics in it), ``metrics`` (reading one number from a run),
``verdict`` (medians, the paired bootstrap ratio and the verdict), ``redact`` (secrets out of a
command line) and ``record`` (the sealed ``topo-gate/ab/v1`` file). Acting parts: ``arms`` (the
command and environment of each arm, exactly as ``topo-gate exec`` would build them) and ``session``
(running the commands). Importing this package imports nothing heavy.
"""
