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

An add is a fixed list of steps (:func:`steps_of`) run as C calls from one C
call, each followed by a note that it is done, so that an exception (Ctrl-C
interrupting a lock's acquire in the main thread) finds the add exactly as
far as its notes say, and :meth:`Stripes.finish` goes on from there.
"""

from __future__ import annotations

import operator
import threading
from collections import deque
from collections.abc import Sequence
from functools import partial
from itertools import chain, repeat
from typing import Any

import numpy as np

from tf_accum.accumulators.float_errors import (
    CONTEXT_LOCAL_ERRORS,
    float_errors_ignored,
    runner_ignoring_float_errors,
)
from tf_accum.accumulators.uninterrupted import in_turn, then_mark

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


# What a step of an add does: take a stripe's lock, add a piece, let a lock go
TAKE, ADD, LET_GO = "take", "add", "let go"
Step = tuple[str, int]  # (what, which stripe or piece)


def steps_of(stripes: int, pieces: int) -> tuple[Step, ...]:
    """The steps of an add in ``pieces`` (1: whole) over ``stripes`` locks: a
    whole add takes every lock, adds, and lets them go, the last first; a
    split one adds piece ``i`` under lock ``i``, taking the next lock before it
    lets the last one go, so that no later add overtakes it."""
    if pieces == 1:
        taken = [(TAKE, i) for i in range(stripes)]
        return (*taken, (ADD, 0), *((LET_GO, i) for _, i in reversed(taken)))
    steps: list[Step] = []
    for i in range(pieces):
        steps.append((TAKE, i))
        if i:
            steps.append((LET_GO, i - 1))
        steps.append((ADD, i))
    steps.append((LET_GO, pieces - 1))
    return tuple(steps)


class StripedAdd:
    """One add into a sum, in :func:`steps_of`'s steps: how far it got (while
    it runs, ``left`` holds one entry per step still to do; once an exception
    stopped it, ``done`` pieces and the locks ``held``, in order), whether the
    accumulator has counted it (``landed``), and into which of its rounds
    (``round``, set by the accumulator)."""

    __slots__ = ("total", "gradient", "bounds", "steps", "left", "done", "held", "landed", "round")

    def __init__(
        self,
        total: Array,
        gradient: Array,
        bounds: list[tuple[int, int]],
        steps: tuple[Step, ...],
    ) -> None:
        self.total = total
        self.gradient = gradient
        self.bounds = bounds  # [lo, hi) of each piece along the first axis
        self.steps = steps
        self.left: list[None] | None = [None] * len(steps)
        self.done = 0  # pieces added so far (once settled)
        self.held: list[Any] = []  # locks (once settled)
        self.landed = False
        self.round = 0  # which of the accumulator's rounds it adds into

    @property
    def complete(self) -> bool:
        """Whether every piece has been added."""
        left = self.left
        if left is None:  # settled
            return self.done == len(self.bounds)
        if not left:  # every step ran
            return True
        # stopped: only steps that let locks go are left
        return all(what == LET_GO for what, _ in self.steps[len(self.steps) - len(left) :])


class Stripes:
    """The stripe locks of one accumulator's sums (one round at a time)."""

    __slots__ = ("locks", "_plans", "_bounds")

    def __init__(self, count: int = STRIPES) -> None:
        self.locks = tuple(threading.Lock() for _ in range(count))
        # per piece count: the steps, their calls (the adds and the notes left
        # out), and where the adds go
        self._plans = {pieces: self._plan(pieces) for pieces in {1, count}}
        self._bounds: dict[int, list[tuple[int, int]]] = {}  # a split add's pieces, by size

    def _plan(self, pieces: int) -> tuple[tuple[Step, ...], list[Any], list[int]]:
        steps = steps_of(len(self.locks), pieces)
        calls: list[Any] = []
        for what, i in steps:
            lock = self.locks[i]
            call = lock.acquire if what == TAKE else lock.release if what == LET_GO else None
            calls += (call, None)  # then a place for the note that it is done
        return steps, calls, [2 * k for k, (what, _) in enumerate(steps) if what == ADD]

    def prepare(self, total: Array, gradient: Array, split: bool) -> StripedAdd:
        """An add of ``gradient`` into the C-ordered sum ``total`` (same shape),
        to :meth:`run`: stripe by stripe when ``split`` and the gradient is
        :func:`splittable`, else whole, once every stripe is held."""
        size = total.shape[0]
        if split and splittable(total, gradient):
            pieces = len(self.locks)
            bounds = self._bounds.get(size)
            if bounds is None:
                # pieces of a sum shorter than their count may be empty: each has its steps
                step = -(-size // pieces)
                bounds = [(min(i * step, size), min(i * step + step, size)) for i in range(pieces)]
                self._bounds = {size: bounds}  # an accumulator's sums mostly keep one size
            return StripedAdd(
                total.reshape(-1), gradient.reshape(-1), bounds, self._plans[pieces][0]
            )
        return StripedAdd(total, gradient, [(0, size)], self._plans[1][0])

    def run(self, job: StripedAdd) -> None:
        """Do ``job``, ordered after every add already holding a stripe and
        before every later one. If this raises (an exception raised into this
        thread midway), the caller completes the job with :meth:`finish`."""
        # Every step is a C call followed by one that notes it done (pops an
        # entry of ``left``), and all run from one C call (a deque draining a
        # map), so no bytecode runs between a step and its note: an exception
        # comes before the first step, or from a step itself (a lock's
        # acquire, interrupted in the main thread; a whole add that numpy
        # refuses), which then has not happened; either way ``left`` is true.
        steps, calls, adds = self._plans[len(job.bounds)]
        calls = calls.copy()
        calls[1::2] = repeat(job.left.pop, len(steps))  # type: ignore[union-attr]
        total, gradient = job.total, job.gradient
        if len(adds) == 1:
            calls[adds[0]] = partial(np.add, total, gradient, total)
        else:
            for k, (lo, hi) in zip(adds, job.bounds, strict=True):
                part = total[lo:hi]
                calls[k] = partial(np.add, part, gradient[lo:hi], part)
        if CONTEXT_LOCAL_ERRORS:
            # cheaper than entering np.errstate
            runner_ignoring_float_errors()(deque, map(_CALL, calls), 0)
        else:
            with float_errors_ignored():
                deque(map(_CALL, calls), 0)

    def finish(self, job: StripedAdd) -> None:
        """Complete ``job`` from wherever it stopped (or do all of it), and let
        its locks go, even if that fails. Only a whole add can fail for real
        (numpy's buffers for a gradient :func:`splittable` refuses), and it
        fails before writing anything: ``job.complete`` then stays false."""
        try:
            self._settle(job)
            with float_errors_ignored():
                self._run(job)
        finally:
            while job.held:
                _let_go(job.held[-1], job.held)

    def _settle(self, job: StripedAdd) -> None:
        """Turn how many steps a stopped :meth:`run` did into the pieces done
        and the locks held, for :meth:`_run` to go on from (once, and in one
        statement: an exception finds it settled or not)."""
        left = job.left
        if left is None:
            return
        done, held = 0, []
        for what, i in job.steps[: len(job.steps) - len(left)]:
            if what == TAKE:
                held.append(self.locks[i])
            elif what == LET_GO:
                held.remove(self.locks[i])
            else:
                done += 1
        job.done, job.held, job.left = done, held, None

    def _run(self, job: StripedAdd) -> None:
        # Goes on from wherever an exception left a settled job, and can be run
        # again from wherever an exception leaves it. A piece is added and
        # marked added (``done``) in one step (whole.then_mark), so an
        # exception landing anywhere finds the marks true and a piece is never
        # added twice nor skipped; a whole add (one piece) that numpy itself
        # refuses (its buffers for a gradient :func:`splittable` refused) has
        # written nothing and is not marked. Each line that changes what is
        # held does it in one statement. Quiet, as every sum of the accumulator.
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
