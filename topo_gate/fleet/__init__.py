"""Fleets: evidence from many nodes of one class, merged into one profile, and nodes slower than
their twins. Pure functions of evidence files (``evidence_set`` loads and checks them)."""
