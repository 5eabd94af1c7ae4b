"""Large element-wise work split over a small pool of threads.

numpy releases the GIL inside its loops, so an add, a division or a copy of a
large array runs on several cores when cut along its first axis. Each split
gives exactly the bits of the whole operation (tests/test_fast_paths.py holds
the callers to it).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np

from tf_accum.accumulators.float_errors import (
    CONTEXT_LOCAL_ERRORS,
    in_place_adder,
    runner_ignoring_float_errors,
)
from tf_accum.accumulators.uninterrupted import Helpers, Job, then_mark

Array = np.ndarray[Any, Any]

WORKERS = max(1, min(os.cpu_count() or 1, 4))
# Element counts from which splitting pays (benchmarks/bench_threads.py): below
# them a thread hand-off costs more than it saves. Copies into new arrays gain
# most (page faults run in parallel); adds and divisions of warm float32 are
# bound by memory and gain only when another core is idle. Copies start lower
# than adds, but not so low that threads already applying in parallel lose.
PARALLEL_MIN_ELEMENTS = 4_000_000
COPY_PARALLEL_MIN_ELEMENTS = 2_000_000


# How often finishing a split is begun again when interrupted itself.
_FINISH_TRIES = 10

# The parts of a split but the first, which runs in the calling thread
_helpers = Helpers(max(1, WORKERS - 1), "tf_accum pool")


class Split:
    """Independent parts (two or more) of one operation, run at once.

    :meth:`run` returns when every part is over: the first part runs in the
    calling thread, the others on the pool, each queued and marked queued in
    one step (uninterrupted.Helpers.queue), and once queued run to its end there,
    whatever happens to the calling thread. In a ``whole`` split the first
    part is one C call, run and marked done in one step (uninterrupted.then_mark),
    so an exception raised into the caller (Ctrl-C) finds it done or not
    begun: :meth:`finish` then runs what was not and waits for the rest, and
    every part runs exactly once. (Of any other split, :meth:`finish` does
    not run the first part again, which may have stopped midway; it queues
    and waits for the others, so that none still writes afterwards.)
    """

    __slots__ = ("parts", "whole")

    def __init__(self, works: Sequence[Callable[[], Any]], whole: bool = False) -> None:
        self.parts = [Job(work) for work in works]
        self.whole = whole

    def run(self) -> None:
        """Run every part; once all are over, raise the first part's error, if any."""
        self._queue_all(self.parts[1:])
        first = self.parts[0]
        if self.whole:
            then_mark(first.work, first, "ended", True)
        else:
            try:
                first.work()
            except BaseException as exc:  # raised once the others are over
                first.error = exc
            first.ended = True
        self._wait_all()
        self._raise_error()

    def finish(self) -> None:
        """Complete a run that an exception raised into this thread stopped:
        queue what was not, run a whole split's first part if it was not,
        wait for every part (again if interrupted meanwhile), then raise the
        first part's error, if any; else the caller raises its exception."""
        again: BaseException | None = None
        for _ in range(_FINISH_TRIES):
            try:
                self._queue_all(self.parts[1:])
                first = self.parts[0]
                if self.whole and not first.ended:
                    then_mark(first.work, first, "ended", True)
                self._wait_all()
                again = None
                break
            except BaseException as exc:
                again = exc
        if again is not None:
            raise again
        self._raise_error()

    @staticmethod
    def _queue_all(parts: Sequence[Job]) -> None:
        for part in parts:
            if not part.queued and not part.ended:
                _helpers.queue(part)

    def _wait_all(self) -> None:
        for part in self.parts:
            part.wait()

    def _raise_error(self) -> None:
        for part in self.parts:
            if part.error is not None:
                raise part.error


def run_split(works: Sequence[Callable[[], None]]) -> None:
    """Run ``works`` (independent pieces of one operation) at once (see :class:`Split`).

    Returns when every part has finished, even when one raised (or the caller
    was interrupted), so no pool thread still writes into the arrays
    afterwards; then re-raises the first error.
    """
    if len(works) == 1:
        works[0]()
        return
    split = Split(works)
    try:
        split.run()
    except BaseException:
        split.finish()
        raise


def splits_add(total: Array, gradient: Array) -> bool:
    """Whether ``total += gradient`` (same shape) is a :func:`split_add`: a
    large sum whose first axis is long enough, with a pool thread, operands
    whose add cannot fail nor read what it writes (one dtype, no shared
    memory), and numpy's error state in a context (numpy 2), which lets the
    first part be one C call."""
    return (
        WORKERS > 1
        and CONTEXT_LOCAL_ERRORS
        and total.size >= PARALLEL_MIN_ELEMENTS
        and total.ndim > 0
        and total.shape[0] > 1
        and gradient.dtype == total.dtype
        and not np.may_share_memory(total, gradient)
    )


def split_add(total: Array, gradient: Array) -> Split:
    """``total += gradient``, quiet as :func:`add_in_place`, as a whole
    :class:`Split` over the first axis, for operands :func:`splits_add`
    accepts, to run in the calling thread."""
    adder = in_place_adder(total.dtype)
    (lo, hi), *rest = bounds(total.shape[0], WORKERS)
    head = total[lo:hi]
    # one C call: the calling thread's quiet context running numpy's add
    first = partial(runner_ignoring_float_errors(), np.add, head, gradient[lo:hi], head)
    return Split(
        [first, *(partial(adder, total[lo:hi], gradient[lo:hi]) for lo, hi in rest)],
        whole=True,
    )


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
