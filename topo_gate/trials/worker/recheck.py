"""The captured graphs checked again, after timing: the very graphs that were timed, on fresh inputs.

Per backend, its graph at each timed ladder size and a one-call graph at each of ODD_TOKENS between
the ladder's powers of two gets fresh seeded inputs with every zero negative (``checks.py``: the
Lamport kernels' "not arrived" value), is replayed right after the backend's largest size's graph,
and its answer is judged and voted. A wrong answer disqualifies the ladder sizes around it. A clear
loser is not rechecked where it stopped (it cannot be chosen there), unless it is a launcher default
path, which a plan leaves in place and must know to be correct.
"""

from __future__ import annotations

from topo_gate.trials.worker import checks
from topo_gate.trials.worker.state import RankPattern

#: Token counts between the ladder's powers of two that the captured graphs are also checked at.
ODD_TOKENS = (3, 24, 3000)


def recheck_graphs(trials: RankPattern) -> None:
    """Into ``trials.graph_checks``: one voted record per (backend, size) rechecked."""
    ladder = trials.plan.tokens
    sizes = sorted(set(ladder) | {t for t in ODD_TOKENS if t < ladder[-1]})
    seed = trials.plan.seed + 1
    for name, backend in trials.backends.items():
        timed = trials.timed_sizes(name)
        if not timed:
            continue
        top = trials.predecessors[name]
        for tokens in sizes:
            if tokens in ladder and not _rechecked_there(trials, name, tokens, timed):
                continue
            trials.beat("recheck", name, tokens)
            if tokens in ladder:
                graph, buffers = trials.measurables[(name, tokens)], trials.buffers[tokens]
            else:
                if trials.agreed_size_reason(name, tokens) is not None:
                    continue
                buffers = checks.make_buffers(trials.ctx, tokens, seed)
                call = trials.call(name, tokens, buffers)
                # One call: the answer checked is the first call after the larger size.
                graph = trials.timer.prepare(call, after_capture=backend.after_capture, calls=1)
            checks.load_graph_inputs(buffers, trials.ctx, tokens, seed)
            reference = checks.expected(buffers, trials.ctx)
            trials.timer.replay(top)
            checks.poison(buffers)
            trials.timer.replay(graph)
            max_err, wrong = trials.vote(checks.judge(buffers, reference, trials.ctx))
            record = {
                "backend": name,
                "tokens": tokens,
                "status": "ok",
                "reason": None,
                "max_abs_err": max_err,
            }
            trials.graph_checks.append(record)
            if wrong:
                rank, verdict = wrong
                reason = (
                    f"captured graph, fresh inputs, after {timed[-1]} tokens: wrong answer on rank {rank}: "
                    f"{verdict.describe()}"
                )
                record.update(status="wrong", reason=reason)
                _disqualify(trials, name, tokens, reason)


def _rechecked_there(trials: RankPattern, name: str, tokens: int, timed: list[int]) -> bool:
    if tokens not in timed:
        return False
    return not trials.cell(name, tokens).stopped_early or trials.is_default_path(name)


def _disqualify(trials: RankPattern, name: str, tokens: int, reason: str) -> None:
    """A wrong answer at ``tokens`` disqualifies the ladder sizes around it (itself if on it)."""
    ladder = trials.plan.tokens
    if tokens in ladder:
        around = [tokens]
    else:
        below = [t for t in ladder if t < tokens]
        above = [t for t in ladder if t > tokens]
        around = ([below[-1]] if below else []) + ([above[0]] if above else [])
    for size in around:
        cell = trials.cell(name, size)
        if cell.status == "ok":
            cell.status, cell.reason = "wrong", f"at {tokens} tokens: {reason}"
    trials.mark_wrong(name, tokens, reason)
