"""Large element-wise work split over a small pool of threads.

numpy releases the GIL inside its loops, so an add, a division or a copy of a
large array runs on several cores when cut along its first axis. Each split
gives exactly the bits of the whole operation (tests/test_fast_paths.py holds
the callers to it).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from tf_accum.accumulators.quiet import in_place_adder

if TYPE_CHECKING:  # imported with the pool, which most processes never start
    from concurrent.futures import Future, ThreadPoolExecutor

Array = np.ndarray[Any, Any]

WORKERS = max(1, min(os.cpu_count() or 1, 4))
# Element counts from which splitting pays (benchmarks/bench_threads.py): below
# them a thread hand-off costs more than it saves. Copies into new arrays gain
# most (page faults run in parallel); adds and divisions of warm float32 are
# bound by memory and gain only when another core is idle. Copies start lower
# than adds, but not so low that threads already applying in parallel lose.
PARALLEL_MIN_ELEMENTS = 4_000_000
COPY_PARALLEL_MIN_ELEMENTS = 2_000_000

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _forget_pool() -> None:
    # a forked child has none of the parent's threads: start a new pool there
    global _pool, _pool_lock
    _pool = None
    _pool_lock = threading.Lock()


if hasattr(os, "register_at_fork"):  # not on Windows
    os.register_at_fork(after_in_child=_forget_pool)


def _helpers() -> ThreadPoolExecutor:
    global _pool
    pool = _pool
    if pool is None:
        with _pool_lock:
            if _pool is None:
                from concurrent.futures import ThreadPoolExecutor

                _pool = ThreadPoolExecutor(WORKERS - 1, thread_name_prefix="tf_accum")
            pool = _pool
    return pool


def run_split(parts: Sequence[Callable[[], None]]) -> None:
    """Run ``parts`` (independent pieces of one operation) on the pool and here.

    Returns when every part has finished, even when one raised (or the caller
    was interrupted), so no helper still writes into the arrays afterwards;
    then re-raises the first error.
    """
    if len(parts) == 1:
        parts[0]()
        return
    pool = _helpers()
    futures: list[Future[None]] = [pool.submit(part) for part in parts[1:]]
    error: BaseException | None = None
    try:
        parts[0]()
    except BaseException as exc:
        error = exc
    for future in futures:
        while True:
            try:
                future.result()
                break
            except BaseException as exc:  # the part's error, or an interrupt while waiting
                if error is None:
                    error = exc
                if future.done():
                    break
    if error is not None:
        raise error


def bounds(length: int, pieces: int) -> list[tuple[int, int]]:
    """``[lo, hi)`` ranges cutting ``range(length)`` into at most ``pieces`` equal parts."""
    step = -(-length // pieces)
    return [(lo, min(lo + step, length)) for lo in range(0, length, step)]


def split_elementwise(
    fn: Callable[..., None], arrays: Sequence[Array], min_elements: int | None = None
) -> None:
    """``fn(*arrays)`` for same-shaped arrays, split along the first axis over threads.

    ``fn`` must be element-wise, so that its result on slices is its result on
    the whole. Small arrays (and arrays with a first axis of length 1) run here.
    """
    first = arrays[0]
    if min_elements is None:
        min_elements = PARALLEL_MIN_ELEMENTS
    if WORKERS < 2 or first.size < min_elements or first.ndim == 0 or first.shape[0] < 2:
        fn(*arrays)
        return

    def part(lo: int, hi: int) -> Callable[[], None]:
        return lambda: fn(*(a[lo:hi] for a in arrays))

    run_split([part(lo, hi) for lo, hi in bounds(first.shape[0], WORKERS)])


def parallel_copy(source: Array, dtype: np.dtype[Any], out: Array | None = None) -> Array:
    """A C-ordered array of ``dtype`` equal to ``source`` (the simple path:
    ``np.array(source, dtype, copy=True)``), filled by several threads when large:
    a new one, or ``out`` (C-ordered, of ``source``'s shape and ``dtype``)."""
    if out is None:
        if source.size < COPY_PARALLEL_MIN_ELEMENTS:
            return np.array(source, dtype, copy=True)
        out = np.empty(source.shape, dtype)
    elif source.size < COPY_PARALLEL_MIN_ELEMENTS:
        np.copyto(out, source, casting="unsafe")
        return out
    split_elementwise(
        lambda o, s: np.copyto(o, s, casting="unsafe"), (out, source), COPY_PARALLEL_MIN_ELEMENTS
    )
    return out


def add_in_place(total: Array, gradient: Array) -> None:
    """``total += gradient`` quietly, in ``total``'s dtype, split over threads when large."""
    adder = in_place_adder(total.dtype)
    if total.size < PARALLEL_MIN_ELEMENTS:
        adder(total, gradient)
    else:
        split_elementwise(adder, (total, gradient))
