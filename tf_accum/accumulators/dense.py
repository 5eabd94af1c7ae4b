"""The dense accumulator: one running sum of same-shaped gradients."""

from __future__ import annotations

import sys
import threading
import weakref
from collections.abc import Callable
from functools import partial
from typing import Any, ClassVar, Optional

import numpy as np

from tf_accum import errors
from tf_accum.accumulators import half_kernel, stripes
from tf_accum.accumulators.base import AccumulatorBase, AccumulatorSpec, missing_resource_error
from tf_accum.accumulators.division import divide_in_place
from tf_accum.accumulators.float_errors import CONTEXT_LOCAL_ERRORS, runner_ignoring_float_errors
from tf_accum.accumulators.pool import (
    PARALLEL_MIN_ELEMENTS,
    WORKERS,
    parallel_copy,
    split_add,
    splits_add,
)
from tf_accum.accumulators.running_sum import (
    NARROW_MIN_ELEMENTS,
    RoundSum,
    divided_sum,
    start_sum,
    sum_adder,
    sum_result,
)
from tf_accum.accumulators.uninterrupted import run_uninterrupted
from tf_accum.shapes import is_compatible, kernel_text

_Sum = Optional[RoundSum]  # noqa: UP045 - runtime alias on 3.10

# From this size a round's first gradient is copied into the buffer of an
# earlier round when its taker has dropped it, instead of into new memory:
# faulting in fresh pages costs more than the copy (a copy into new memory
# takes a few times a copy into warm memory), and above glibc's mmap
# threshold (32 MB at most) every new buffer is fresh memory.
RECYCLE_MIN_BYTES = 1 << 20
# Handed-over buffers watched for their takers to drop them: two, so that a
# round starting while the last take still divides its result finds the one before.
_WATCHED = 2


# A handed-over buffer is known to be dropped when its reference count is that
# of an array only the accumulator's list holds. That holds on CPython with its
# GIL; free-threaded CPython (biased and deferred counts) and PyPy (no counts)
# give no such answer, so there a handed-over buffer is never reused: the
# taker owns it for good. (Lending the buffer through a memoryview instead
# would tell by a weak reference, but the taker's array would no longer own
# its data, which callers can see.)
def _counts_references() -> bool:
    if sys.implementation.name != "cpython":
        return False
    if sys.platform != "win32":
        return "t" not in sys.abiflags  # "t": a free-threaded build (PEP 703)
    import sysconfig  # abiflags are POSIX's; sysconfig is slow to import

    return not sysconfig.get_config_var("Py_GIL_DISABLED")


RECYCLING = _counts_references()


def _references(array: object) -> int:
    return sys.getrefcount(array)


def _lone_references() -> int:
    # What _references says of an array held by one local variable only, in
    # this interpreter (its conventions for arguments differ between versions).
    probe = np.empty(1)
    return _references(probe)


_LONE = _lone_references()


# How often an add stopped outside the lock is begun again when interrupted itself.
_FINISH_TRIES = 10


def _in_place_operands(
    total: np.ndarray[Any, Any], gradient: np.ndarray[Any, Any]
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """``(out, addend)`` for ``np.add(out, addend, out)`` to add ``gradient``
    into the sum ``total``: a one-element sum adds into its pair (see
    running_sum.start_sum), numpy's overlap copy spared."""
    if total.size == 1:
        return total.base, gradient.reshape(())  # type: ignore[return-value]
    return total, gradient


def _shape_mismatch(expected: str, got: tuple[int, ...]) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(
        None, None, f"Shape mismatch: expected {expected}, got {kernel_text(got)}"
    )


class DenseAccumulator(AccumulatorBase[_Sum]):
    """Sums gradients in place; a take returns the sum or the mean.

    The first gradient of a round is copied (and fixes the round's shape); each
    later one is added in place, so applying allocates nothing after the first.
    A completed take hands the sum buffer itself to the taker, which divides it
    outside the lock; once the taker has let go of it (no array, view or weak
    reference left), a later round of its shape copies its first gradient into
    it rather than into new memory (see RECYCLE_MIN_BYTES). The later
    gradients of a large round are added outside the lock, through the
    stripes of :mod:`stripes`, so that several threads add at once. (float16 and
    bfloat16 sums are kept in float32 and rounded per add: see
    running_sum.start_sum.)
    """

    kind: ClassVar[str] = "dense"

    _round: _Sum = None
    # handed-over round buffers, oldest first (see RECYCLE_MIN_BYTES)
    _watched: list[np.ndarray[Any, Any]]

    def _detach_round_locked(self) -> _Sum:
        total = self._round
        if (
            RECYCLING
            and type(total) is np.ndarray
            and total.nbytes >= RECYCLE_MIN_BYTES
            and total.flags.owndata  # not a view of memory somebody else owns
        ):
            # the taker owns it; once it lets go, a later round may reuse it
            watched = self._watched
            watched.append(total)
            if len(watched) > _WATCHED:
                del watched[0]
        return total

    def _attach_round_locked(self, state: _Sum) -> None:
        self._watched = [a for a in self._watched if a is not state]
        self._round = state

    def _merge_round_locked(self, state: _Sum, count: int, serial: int) -> bool:
        total = self._round
        if total is None or state is None:
            # an empty round takes the served one as it is
            self._watched = [a for a in self._watched if a is not state and a is not total]
            # one statement: merged exactly when counted and marked given back
            self._round, self._count, self._given_back[serial] = (
                state if total is None else total,
                self._count + count,
                True,
            )
            return True
        if self._in_flight:
            return False  # adds run into the current sum outside the lock
        gradient = sum_result(state)
        if gradient.shape != total.shape:
            return False  # the current round has another shape (none was declared)
        if type(total) is np.ndarray and total.size < PARALLEL_MIN_ELEMENTS:
            out, addend = _in_place_operands(total, gradient)
            if CONTEXT_LOCAL_ERRORS:
                run = runner_ignoring_float_errors()
                # counted first, added by the very next call (see _count_and_add_locked)
                self._count, self._given_back[serial] = self._count + count, True
                run(np.add, out, addend, out)
            else:
                with np.errstate(all="ignore"):
                    self._count, self._given_back[serial] = self._count + count, True
                    np.add(out, addend, out)
            return True

        def merge() -> None:
            self._add(total, gradient)
            self._count, self._given_back[serial] = self._count + count, True

        # several calls: on a thread where no signal handler runs (this one holds the lock)
        run_uninterrupted(merge)
        return True

    def close(self) -> None:
        super().close()
        with self._lock:
            self._watched = []

    def _dropped_buffer_locked(
        self,
        gradient: Optional[np.ndarray[Any, Any]],  # noqa: UP045 - as _Sum
    ) -> Optional[np.ndarray[Any, Any]]:  # noqa: UP045 - as _Sum
        """A watched buffer no one else references any more, shaped for
        ``gradient`` (None: wanted for none), or None. Forgets the other dropped
        ones: once a round has started, the accumulator keeps no idle buffer
        besides the round's own."""
        watched, self._watched = self._watched, []
        found = None
        while watched:
            spare = watched.pop(0)  # oldest first: the order is kept
            if _references(spare) != _LONE:
                self._watched.append(spare)  # still in use: the taker's, not ours
            elif weakref.getweakrefcount(spare):
                pass  # writing into it would show through the weak reference: let it go
            elif (
                found is None
                and gradient is not None
                and spare.shape == gradient.shape
                and spare.dtype == self.numpy_dtype
                # memory of its own: not a view of somebody's buffer
                and spare.flags.owndata
                and spare.flags.writeable
            ):
                found = spare
        return found

    def _start_round_locked(self, gradient: np.ndarray[Any, Any], owned: bool) -> _Sum:
        if self._watched:
            wanted = not owned and gradient.nbytes >= RECYCLE_MIN_BYTES
            spare = self._dropped_buffer_locked(gradient if wanted else None)
            if spare is not None:
                return parallel_copy(gradient, self.numpy_dtype, spare)
        return start_sum(gradient, self.numpy_dtype, owned)

    def __init__(self, spec: AccumulatorSpec, label: str) -> None:
        super().__init__(spec, label)
        self._watched = []
        self._add: Callable[[Any, np.ndarray[Any, Any]], None] = sum_adder(self.numpy_dtype)
        self._stripes = stripes.Stripes()
        declared = spec.shape
        self._exact_shape = declared if declared is not None and None not in declared else None
        # float16/bfloat16: the optional compiled loops are loaded before the lock
        self._narrow = half_kernel.is_narrow(self.numpy_dtype)
        # From this many elements an add into a round may be several calls (a
        # narrow sum's passes, or an add over the pool that is not a
        # pool.Split): applied from the main thread, on a helper thread (see apply)
        self._whole_min = (
            min(NARROW_MIN_ELEMENTS, PARALLEL_MIN_ELEMENTS)
            if self._narrow
            else PARALLEL_MIN_ELEMENTS
        )

    def _fits_declared(self, shape: tuple[int, ...]) -> bool:
        if self._exact_shape is not None:
            return shape == self._exact_shape
        return is_compatible(self.shape, shape)

    def apply(self, local_step: int, gradient: np.ndarray[Any, Any], owned: bool = False) -> None:
        """Merge ``gradient`` unless it is stale (``local_step`` below the global step).

        The caller has checked the dtype. Raises InvalidArgumentError when the
        shape does not fit the declared shape, or, for a gradient that is not
        stale, the shape fixed by the round's first gradient. Nothing changes on error.
        ``owned`` says that ``gradient`` is a new array no one else holds (a
        conversion's result): a round's first gradient then becomes the sum
        buffer without another copy.
        """
        if self._narrow and half_kernel.load_pending(gradient.dtype, gradient.size):
            # the first load compiles the loops, which is slow: not while holding the lock
            half_kernel.load()
        if (
            gradient.size >= self._whole_min
            and threading.current_thread() is threading.main_thread()
            and self._several_calls(gradient)
        ):
            # The add is several calls, between which CPython may raise a
            # signal handler's exception (Ctrl-C) in this thread: the apply
            # runs whole on a thread where no handler runs (there, not being
            # the main thread, it goes on past this branch), and the interrupt
            # follows once it is done (or, if it escapes the wait, the apply
            # still completes, under its own lock).
            run_uninterrupted(partial(self.apply, local_step, gradient, owned))
            return
        flight: stripes.StripedAdd | None = None  # an add running outside the lock
        try:
            while True:
                with self._lock:
                    if self._closed:
                        raise missing_resource_error(self.label)
                    if not self._gate_shut:
                        job = self._apply_locked(local_step, gradient, owned)
                        if job is None:
                            return
                        # one statement: running exactly when noted so
                        self._in_flight, flight = self._in_flight + 1, job
                        break
                self._wait_at_gate()
            # a later gradient of a large round: added while other applies add too
            self._stripes.run(flight)
            self._land(flight)
        except BaseException:
            if flight is not None:
                # begun: the gradient goes in whole and is counted (or, if the
                # add itself fails, neither), then the error surfaces
                self._finish_flight(flight)
            raise

    def _several_calls(self, gradient: np.ndarray[Any, Any]) -> bool:
        """Whether adding ``gradient`` to the round as it stands takes several
        calls (read without the lock: a guess, which _add_large_locked makes
        good when it was wrong)."""
        total = self._round
        if total is None:
            return False  # a round's start is stored in one statement
        if isinstance(total, np.ndarray):
            # a large add is a pool.Split, whole by itself (_add_large_locked)
            return total.size >= PARALLEL_MIN_ELEMENTS and not splits_add(total, gradient)
        return total.one_call(gradient) is None

    def _finish_flight(self, flight: stripes.StripedAdd) -> None:
        """Complete and count an add that an exception stopped outside the
        lock: its pieces are finished, begun again if an exception (Ctrl-C
        pressed again) stops that too, and only then is it landed, counted
        exactly when whole (a whole add numpy itself refuses writes nothing,
        and lands uncounted); then the last such exception is raised."""
        again: BaseException | None = None
        for _ in range(_FINISH_TRIES):
            try:
                self._stripes.finish(flight)  # and lets its stripes go
                break
            except BaseException as exc:
                again = exc
        for _ in range(_FINISH_TRIES):
            try:
                self._land(flight)  # once: it notes that it has
                break
            except BaseException as exc:
                again = exc
        if again is not None:
            raise again

    def _apply_locked(
        self, local_step: int, gradient: np.ndarray[Any, Any], owned: bool
    ) -> stripes.StripedAdd | None:
        """apply's work under the lock, with the gate open: the gradient added
        (or refused, or counted stale), or, for a later gradient of a large
        round, the add to run outside the lock, which the caller notes."""
        shape = gradient.shape
        total = self._round
        if local_step < self._global_step or total is None:
            if not self._fits_declared(shape):
                # stale: only the declared attributes are checked (docs/departures.md T7)
                self._n_rejected += 1
                raise _shape_mismatch(kernel_text(self.shape), shape)
            if local_step < self._global_step:
                self._stale_locked()
                return None
            # one statement after the call: the round starts exactly when its
            # first gradient is counted
            self._round, self._count, self._n_accepted = (
                self._start_round_locked(gradient, owned),
                self._count + 1,
                self._n_accepted + 1,
            )
        elif total.shape != shape:
            # the round's shape already fits the declared one
            self._n_rejected += 1
            raise _shape_mismatch(kernel_text(total.shape), shape)
        elif (
            type(total) is np.ndarray
            and total.size >= stripes.MIN_ELEMENTS
            and self._striped(total)
        ):
            # split when someone adds alongside (maybe into a sealed round:
            # the stripes are shared)
            job = self._stripes.prepare(
                total, gradient, self._in_flight > 0 or self._sealed is not None
            )
            job.round = self._served
            return job
        elif type(total) is np.ndarray and total.size < PARALLEL_MIN_ELEMENTS:
            self._count_and_add_locked(total, gradient)
        else:
            self._add_large_locked(total, gradient)
        if self._waiting:
            self._flush_locked()
        return None

    def _add_large_locked(self, total: RoundSum, gradient: np.ndarray[Any, Any]) -> None:
        """Count ``gradient`` and add it into ``total`` (a narrow sum, or an
        array of PARALLEL_MIN_ELEMENTS or more) as one step: by one compiled
        loop, counted just before it (see Float32ShadowSum.one_call), by a pool.Split
        counted just before it, or else, in the main thread, on a thread where
        no signal handler's exception lands."""
        if isinstance(total, np.ndarray):
            if not splits_add(total, gradient):
                run_uninterrupted(partial(self._add_then_count, total, gradient))
                return
            split, begun = split_add(total, gradient), False
            try:
                # Counted first, the add next: once this statement has run,
                # every part is added exactly once even if an exception
                # (Ctrl-C) lands in between (pool.Split), and only then is
                # the lock let go.
                self._count, self._n_accepted, begun = self._count + 1, self._n_accepted + 1, True
                split.run()
            except BaseException:
                if begun:
                    split.finish()
                raise
            return
        call = total.one_call(gradient)
        if call is None:
            run_uninterrupted(partial(self._add_then_count, total, gradient))
            return
        narrow: Any = total
        loop, arguments = call
        flat = gradient.reshape(-1)
        begun = False
        try:
            # counted and marked begun in one statement, the loop the very next
            # call (see _count_and_add_locked)
            self._count, self._n_accepted, narrow.pending, begun = (
                self._count + 1,
                self._n_accepted + 1,
                flat,
                True,
            )
            returned = loop(*arguments)
            if narrow.after_call(returned):
                return
        except BaseException:
            if begun:  # the loop has run: finish the add, then let the error out
                run_uninterrupted(narrow.settle)
            raise
        run_uninterrupted(narrow.settle)  # infinities, NaNs or an overflow to check: rare

    def _add_then_count(self, total: RoundSum, gradient: np.ndarray[Any, Any]) -> None:
        self._add(total, gradient)
        self._count, self._n_accepted = self._count + 1, self._n_accepted + 1

    def _count_and_add_locked(
        self, total: np.ndarray[Any, Any], gradient: np.ndarray[Any, Any]
    ) -> None:
        """Count ``gradient`` and add it into ``total`` (an array of fewer than
        PARALLEL_MIN_ELEMENTS elements) as one step: the count is stored
        first, and the add is the very next call. CPython raises a signal
        handler's exception (Ctrl-C) only after a call returns, at a backward
        jump or at a function's start, so one landing here finds both done
        or neither. (An add of a same-shaped array of the sum's dtype
        allocates nothing to fail on.)"""
        out, addend = _in_place_operands(total, gradient)
        if CONTEXT_LOCAL_ERRORS:
            run = runner_ignoring_float_errors()
            self._count, self._n_accepted = self._count + 1, self._n_accepted + 1
            run(np.add, out, addend, out)
        else:
            with np.errstate(all="ignore"):
                self._count, self._n_accepted = self._count + 1, self._n_accepted + 1
                np.add(out, addend, out)

    @staticmethod
    def _striped(total: np.ndarray[Any, Any]) -> bool:
        """Whether later gradients of the round ``total`` (an array of at least
        stripes.MIN_ELEMENTS) are added outside the lock, through the stripes:
        larger sums split every add over the thread pool instead."""
        return total.size < PARALLEL_MIN_ELEMENTS and WORKERS > 1 and total.flags.c_contiguous

    # counts its own rejections (above), sparing every apply the base's
    # counting wrapper: a Python frame on the 1-element path
    apply._counts_rejections = True  # type: ignore[attr-defined]
    apply_dense = apply

    def _finish_round(self, state: _Sum, count: int, serial: int) -> np.ndarray[Any, Any]:
        assert state is not None
        mean = self.reduction_type == "MEAN"
        divided = divided_sum(state, count) if mean else None
        if divided is not None:
            return divided
        total = sum_result(state)
        if total.size == 1 or (mean and total.nbytes < RECYCLE_MIN_BYTES):
            # a one-element sum is a view of a scratch pair (see running_sum.start_sum):
            # the caller gets an array of its own, as for every other size; a
            # MEAN whose buffer would not be reused is divided in a copy, so that
            # its round stays as it was until the take returns (see division.COPY_MAX_BYTES)
            total = np.array(total)
            if mean:
                divide_in_place(total, count)
            return total
        if mean:
            divide_in_place(total, count, lambda: self._keep_for_taker(serial))
        return total
