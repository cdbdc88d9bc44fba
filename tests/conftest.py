"""Settings for the whole suite.

Hypothesis's per-example deadline (200 ms) and its too-slow health check measure wall time, which on a
shared 2-core CI machine says more about the neighbours than about the code: a property test must fail
on a wrong answer, never on a slow moment. Timing targets live in benchmarks/ instead.
"""

from hypothesis import HealthCheck, settings

settings.register_profile("suite", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("suite")
