"""Adds into one dense sum from several threads at once, in one order.

Without this, two threads applying large gradients to one accumulator take
turns: the whole add runs under the accumulator's lock, and one core idles.
Here a sum is cut into stripes, each with a lock. An add holds a stripe's lock
while it adds into that stripe, and takes the next stripe's lock before it lets
this one go, so a second add follows the first stripe by stripe: both cores add
at once, and no add overtakes another. Every element therefore receives the
gradients in the same order, and the sum is, bit for bit, the sum the adds
would give one after the other (benchmarks/bench_stripes.py measures it; four
stripes did better than two or eight).

An add that finds no other add running takes every stripe's lock and adds the
whole gradient in one call: a lone applier pays only for the locks.
"""

from __future__ import annotations

import operator
import threading
from collections import deque
from collections.abc import Sequence
from functools import partial
from itertools import chain
from typing import Any

import numpy as np

from tf_accum.accumulators.quiet import CONTEXT_LOCAL_ERRORS, quiet_float_errors, quiet_runner
from tf_accum.accumulators.whole import in_turn, then_mark

Array = np.ndarray[Any, Any]

_CALL = operator.methodcaller("__call__")
_ACQUIRE = operator.methodcaller("acquire")
_RELEASE = operator.attrgetter("release")

STRIPES = 4
# From this many elements a round's later gradients are added outside the
# accumulator's lock, through the stripes: below it two threads lost to one
# (benchmarks/bench_stripes.py), and a lone applier pays for the locks. Sums
# of pool.PARALLEL_MIN_ELEMENTS and more split each add over the thread
# pool instead.
MIN_ELEMENTS = 1 << 19


def splittable(total: Array, gradient: Array) -> bool:
    """Whether ``gradient`` can be added stripe by stripe into ``total`` (flat,
    C-ordered) with no allocation: an add that failed after some stripes would
    leave half a gradient in the sum."""
    flags = gradient.flags
    return (
        gradient.dtype == total.dtype
        and flags.c_contiguous
        and flags.aligned
        and not np.may_share_memory(total, gradient)
    )


class StripedAdd:
    """One add into a sum: how far it got, the stripe locks it holds (in
    order), whether the accumulator has counted it (``landed``), and into
    which of its rounds (``round``, set by the accumulator)."""

    __slots__ = ("total", "gradient", "bounds", "done", "held", "landed", "round")

    def __init__(self, total: Array, gradient: Array, pieces: int) -> None:
        self.total = total
        self.gradient = gradient
        size = total.shape[0]
        step = -(-size // pieces)
        # whole: one piece, added once every stripe's lock is held
        self.bounds = [(lo, min(lo + step, size)) for lo in range(0, size, step)] or [(0, 0)]
        self.done = 0  # pieces added so far
        self.held: list[Any] = []  # locks
        self.landed = False
        self.round = 0  # which of the accumulator's rounds it adds into

    @property
    def complete(self) -> bool:
        """Whether every piece has been added."""
        return self.done == len(self.bounds)


class Stripes:
    """The stripe locks of one accumulator's sums (one round at a time)."""

    __slots__ = ("locks",)

    def __init__(self, count: int = STRIPES) -> None:
        self.locks = tuple(threading.Lock() for _ in range(count))

    def prepare(self, total: Array, gradient: Array, split: bool) -> StripedAdd:
        """An add of ``gradient`` into the C-ordered sum ``total`` (same shape),
        to :meth:`run`: stripe by stripe when ``split`` and the gradient is
        :func:`splittable`, else whole, once every stripe is held."""
        if split and splittable(total, gradient):
            return StripedAdd(total.reshape(-1), gradient.reshape(-1), len(self.locks))
        return StripedAdd(total, gradient, 1)

    def run(self, job: StripedAdd) -> None:
        """Do ``job``, ordered after every add already holding a stripe and
        before every later one. If this raises (an exception raised into this
        thread midway), the caller completes the job with :meth:`finish`."""
        if CONTEXT_LOCAL_ERRORS:
            quiet_runner()(self._run, job)  # cheaper than entering np.errstate
        else:
            with quiet_float_errors():
                self._run(job)

    def finish(self, job: StripedAdd) -> None:
        """Complete ``job`` from wherever it stopped (or do all of it), and let
        its locks go, even if that fails. Only a whole add can fail for real
        (numpy's buffers for a gradient :func:`splittable` refuses), and it
        fails before writing anything: ``job.complete`` then stays false."""
        try:
            with quiet_float_errors():
                self._run(job)
        finally:
            while job.held:
                _let_go(job.held[-1], job.held)

    def _run(self, job: StripedAdd) -> None:
        # Written so that it can be run again from wherever an exception left
        # it. A piece is added and marked added (``done``) in one step
        # (whole.then_mark), so an exception landing anywhere finds the marks
        # true and a piece is never added twice nor skipped; a whole add (one
        # piece) that numpy itself refuses (its buffers for a gradient
        # :func:`splittable` refused) has written nothing and is not marked.
        # Each line that changes what is held does it in one statement.
        # Quiet, as every sum of the accumulator.
        locks, held = self.locks, job.held
        pieces = len(job.bounds)
        if pieces == 1:
            if job.done == 0 and len(held) < len(locks):
                _take_all(locks[len(held) :], held)
            if job.done == 0:
                add = partial(np.add, job.total, job.gradient, out=job.total)
                then_mark(add, job, "done", 1)
        else:
            while job.done < pieces:
                lock = locks[job.done]
                if lock not in held:
                    _take(lock, held)  # the next first: no one overtakes
                while held[0] is not lock:
                    _let_go(held[0], held)
                lo, hi = job.bounds[job.done]
                total = job.total[lo:hi]
                add = partial(np.add, total, job.gradient[lo:hi], out=total)
                then_mark(add, job, "done", job.done + 1)
        _let_go_all(held)


def _take_all(locks: Sequence[Any], held: list[Any]) -> None:
    """:func:`_take` for each of ``locks`` in turn, all in one call: an
    exception (an interrupted acquire) stops it between two locks, each
    acquired lock noted held."""
    deque(map(held.append, filter(_ACQUIRE, locks)), 0)


def _let_go_all(held: list[Any]) -> None:
    """Release every lock in ``held``, the last first, and forget them, in one call."""
    deque(map(_CALL, chain(map(_RELEASE, reversed(held)), (held.clear,))), 0)


def _take(lock: Any, held: list[Any]) -> None:
    """Acquire ``lock`` and note it held, as one step (whole.in_turn): an
    exception finds it both or neither, never held and forgotten."""
    in_turn(lock.acquire, partial(held.append, lock))


def _let_go(lock: Any, held: list[Any]) -> None:
    """Release ``lock`` and forget it, as one step."""
    in_turn(lock.release, partial(held.remove, lock))
