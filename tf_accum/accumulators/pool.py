"""Large element-wise work split over a small pool of threads.

numpy releases the GIL inside its loops, so work on a large array runs on
several cores when cut along its first axis. Each split gives exactly the
bits of the whole operation. (The dense accumulator's adds, copies and
divisions are one numpy call each: split, they were memory-bound and gained
less than the 1.3x a path must buy, see docs/performance.md.)
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tf_accum.accumulators.uninterrupted import Helpers, Job

Array = np.ndarray[Any, Any]

WORKERS = max(1, min(os.cpu_count() or 1, 4))
# Copies into new arrays gain from splitting (page faults run in parallel)
# from this many elements (benchmarks/bench_threads.py).
COPY_PARALLEL_MIN_ELEMENTS = 2_000_000

# The parts of a split but the first, which runs in the calling thread
_helpers = Helpers(max(1, WORKERS - 1), "tf_accum pool")


def _queue_all(parts: Sequence[Job]) -> None:
    for part in parts:
        if not part.queued and not part.ended:
            _helpers.queue(part)


def _wait_all(parts: Sequence[Job]) -> None:
    for part in parts:
        part.wait()


def run_split(works: Sequence[Callable[[], None]]) -> None:
    """Run ``works`` (independent pieces of one operation) at once: the first
    in the calling thread, the others on the pool.

    Returns when every part has finished, even when one raised (or the caller
    was interrupted: a part once queued runs to its end, and the caller waits
    for it), so no pool thread still writes into the arrays afterwards; then
    re-raises the first error.
    """
    if len(works) == 1:
        works[0]()
        return
    first, *rest = works
    parts = [Job(work) for work in rest]
    try:
        _queue_all(parts)
        first()
    finally:
        _queue_all(parts)
        _wait_all(parts)
    for part in parts:
        if part.error is not None:
            raise part.error


def bounds(length: int, pieces: int) -> list[tuple[int, int]]:
    """``[lo, hi)`` ranges cutting ``range(length)`` into at most ``pieces`` equal parts."""
    step = -(-length // pieces)
    return [(lo, min(lo + step, length)) for lo in range(0, length, step)]


def split_elementwise(fn: Callable[..., None], arrays: Sequence[Array], min_elements: int) -> None:
    """``fn(*arrays)`` for same-shaped arrays, split along the first axis over
    threads from ``min_elements`` elements.

    ``fn`` must be element-wise, so that its result on slices is its result on
    the whole. Small arrays (and arrays with a first axis of length 1) run here.
    """
    first = arrays[0]
    if WORKERS < 2 or first.size < min_elements or first.ndim == 0 or first.shape[0] < 2:
        fn(*arrays)
        return

    def part(lo: int, hi: int) -> Callable[[], None]:
        return lambda: fn(*(a[lo:hi] for a in arrays))

    run_split([part(lo, hi) for lo, hi in bounds(first.shape[0], WORKERS)])
