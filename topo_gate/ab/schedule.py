"""The order of an A/B session's runs: a warm-up per arm, then ``runs`` rounds of every arm once.

Interleaving is what makes the comparison fair: drift over the session (clocks, thermals, a
neighbour's job) hits every arm of a round alike, and the rounds pair the arms' samples for the
bootstrap (``verdict``). ``alternate`` runs the arms in the order given in every round (A B A B);
``shuffle`` draws each round's order from a generator seeded with ``seed``, so a position effect
(the second run of a round always a little slower, say) is spread over the arms instead of
charged to one of them, and the same seed gives the same order again.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

ORDERS = ("alternate", "shuffle")


@dataclass(frozen=True)
class Slot:
    """One run of the session: its position (from 0), arm, and round (from 1; None: a warm-up)."""

    index: int
    arm: str
    round: int | None

    @property
    def warmup(self) -> bool:
        return self.round is None


def schedule(arms: Sequence[str], *, runs: int, order: str, seed: int, warmups: int = 1) -> list[Slot]:
    """Every run of the session in the order it happens."""
    if order not in ORDERS:
        raise ValueError(f"order must be one of {', '.join(ORDERS)}, not {order!r}")
    if len(set(arms)) != len(arms) or not arms:
        raise ValueError(f"arms must be distinct and at least one, got {list(arms)}")
    if runs < 1 or warmups < 0:
        raise ValueError(f"need runs >= 1 and warmups >= 0, got {runs} and {warmups}")
    rng = random.Random(seed)
    names: list[tuple[str, int | None]] = [(arm, None) for arm in arms for _ in range(warmups)]
    for round_index in range(1, runs + 1):
        ordered = list(arms) if order == "alternate" else rng.sample(list(arms), len(arms))
        names.extend((arm, round_index) for arm in ordered)
    return [Slot(index, arm, round_index) for index, (arm, round_index) in enumerate(names)]
