import sys

from topo_gate.cli import main

sys.exit(main())
