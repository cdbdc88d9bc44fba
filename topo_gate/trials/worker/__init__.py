"""The trial worker: one process per rank, started by the runner or by ``torchrun``.

``python -m topo_gate.trials.worker --spec SPEC --out DIR`` reads the rank from the standard
``torch.distributed`` env rendezvous (``MASTER_ADDR``, ``MASTER_PORT``, ``RANK``, ``WORLD_SIZE``,
``LOCAL_RANK``), checks the safety env, then admits, checks and times every backend of the spec
(``loop.py``) and writes its results to DIR. This package and ``trials/backends`` are the only
importers of torch; importing the package itself imports nothing heavy.
"""
