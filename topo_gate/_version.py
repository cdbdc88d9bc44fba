"""The package version: the one place it is written.

pyproject.toml reads it statically (``[tool.setuptools.dynamic]``), ``topo_gate.__version__``
re-exports it and ``topo-gate --version`` prints it. A module constant rather than
``importlib.metadata``, whose import and distribution lookup a launcher would pay at start-up.
"""

__version__ = "0.1.0"
