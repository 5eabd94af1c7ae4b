"""The dense accumulator: one running sum of same-shaped gradients."""

from __future__ import annotations

import operator
import sys
import threading
import weakref
from collections.abc import Callable
from functools import partial
from typing import Any, ClassVar, Optional

import numpy as np

from tf_accum import errors
from tf_accum.accumulators import half_kernel
from tf_accum.accumulators.base import AccumulatorBase, AccumulatorSpec, missing_resource_error
from tf_accum.accumulators.division import divide_in_place
from tf_accum.accumulators.float_errors import (
    CONTEXT_LOCAL_ERRORS,
    ignoring_float_errors,
    runner_ignoring_float_errors,
)
from tf_accum.accumulators.narrow_sum import NarrowSum
from tf_accum.accumulators.running_sum import (
    RoundSum,
    divided_sum,
    start_sum,
    sum_adder,
    sum_result,
)
from tf_accum.accumulators.threads import run_uninterrupted
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

# Up to this size an add into a round that is one array is made aside, into a
# second buffer the round then switches to; above it, in place (see
# DenseAccumulator._add_in_place_locked), where the second buffer's extra
# pass over memory would cost more than finding an element the add changes.
ASIDE_MAX_BYTES = 1 << 15
# Elements looked at, spread over the array, for one an add in place changes
# when the first element is not one.
_SAMPLED = 64

# A change to the round under way (DenseAccumulator._change): the count and
# the accepted count before it, then either the round's new array and the
# spare (an add made aside, or a round's start: spare None) or the array, the
# gradient added in place, and an element the add changes with its value before.
_Change = tuple[Any, ...]


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


def _shape_mismatch(expected: str, got: tuple[int, ...]) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(
        None, None, f"Shape mismatch: expected {expected}, got {kernel_text(got)}"
    )


class DenseAccumulator(AccumulatorBase[_Sum]):
    """Sums gradients; a take returns the sum or the mean.

    The first gradient of a round is copied (and fixes the round's shape). A
    later one is added into a second buffer the round then switches to, up
    to ASIDE_MAX_BYTES, else in place, so applying allocates nothing after
    the first two. Each apply is whole or undone whatever line an exception
    lands on (see _settle_locked). A completed take hands the sum buffer
    itself to the taker, which divides it outside the lock; once the taker
    has let go of it (no array, view or weak reference left), a later round
    of its shape copies its first gradient into it rather than into new
    memory (see RECYCLE_MIN_BYTES). (float16 and bfloat16 sums are kept in
    float32 and rounded per add: see running_sum.start_sum.)
    """

    kind: ClassVar[str] = "dense"

    _round: _Sum = None
    # handed-over round buffers, oldest first (see RECYCLE_MIN_BYTES)
    _watched: list[np.ndarray[Any, Any]]
    # the buffer the round's next add made aside writes into (None: none yet);
    # the round's own, dropped when the round is handed over
    _spare: Optional[np.ndarray[Any, Any]] = None  # noqa: UP045 - as _Sum
    # a change to the round under way (see _settle_locked)
    _change: Optional[_Change] = None  # noqa: UP045 - as _Sum
    # (size, flat positions) of the elements _witness_locked samples
    _sample: tuple[int, np.ndarray[Any, Any]] = (0, np.empty(0, np.intp))

    def _detach_round_locked(self) -> _Sum:
        if self._change is not None:
            self._settle_locked()
        self._spare = None
        total = self._round
        if isinstance(total, NarrowSum):
            total.finish()
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

    def _before_attach_locked(self, state: _Sum) -> None:
        if self._change is not None:
            self._settle_locked()
        self._watched = [a for a in self._watched if a is not state]

    def _merge_round_locked(self, state: _Sum, count: int, serial: int) -> bool:
        if self._change is not None:
            self._settle_locked()
        total = self._round
        if isinstance(total, NarrowSum):
            total.finish()
        if total is None or state is None:
            # an empty round takes the served one as it is
            self._watched = [a for a in self._watched if a is not state and a is not total]
            self._round, self._count, self._given_back[serial] = (
                state if total is None else total,
                self._count + count,
                True,
            )
            return True
        gradient = sum_result(state)
        if gradient.shape != total.shape:
            return False  # the current round has another shape (none was declared)
        # added aside into a copy of the current round (a rare path), then stored
        merged = start_sum(sum_result(total), self.numpy_dtype)
        self._add(merged, gradient)
        self._round, self._count, self._given_back[serial] = merged, self._count + count, True
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

    def _start_round_locked(self, gradient: np.ndarray[Any, Any], owned: bool) -> RoundSum:
        if self._watched:
            wanted = not owned and gradient.nbytes >= RECYCLE_MIN_BYTES
            spare = self._dropped_buffer_locked(gradient if wanted else None)
            if spare is not None:
                np.copyto(spare, gradient, casting="unsafe")
                return spare
        return start_sum(gradient, self.numpy_dtype, owned)

    def __init__(self, spec: AccumulatorSpec, label: str) -> None:
        super().__init__(spec, label)
        self._watched = []
        self._add: Callable[[Any, np.ndarray[Any, Any]], None] = sum_adder(self.numpy_dtype)
        declared = spec.shape
        self._exact_shape = declared if declared is not None and None not in declared else None
        self._integers = self.numpy_dtype.kind in "iu"
        # float16/bfloat16: the optional compiled loops are loaded before the lock
        self._narrow = half_kernel.is_narrow(self.numpy_dtype)

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
        with self._lock:
            if self._closed:
                raise missing_resource_error(self.label)
            try:
                done = self._apply_locked(local_step, gradient, owned)
            finally:
                if self._change is not None:  # an exception cut it short
                    self._settle_locked()
        if not done:
            # The add takes several calls, between which a signal handler's
            # exception (Ctrl-C) could land in this thread, the main one: the
            # apply runs whole on a thread where no handler runs (under the
            # lock there), and this waits for it; an interrupt stops the
            # wait, not the apply.
            run_uninterrupted(partial(self.apply, local_step, gradient, owned))

    def _apply_locked(self, local_step: int, gradient: np.ndarray[Any, Any], owned: bool) -> bool:
        """apply's work under the lock: the gradient added, refused, or counted
        stale; False when it must be done on another thread (see apply), and
        nothing changed."""
        if self._change is not None:
            self._settle_locked()
        shape = gradient.shape
        total = self._round
        if local_step < self._global_step or total is None:
            if not self._fits_declared(shape):
                # stale: only the declared attributes are checked (docs/departures.md T7)
                self._n_rejected += 1
                raise _shape_mismatch(kernel_text(self.shape), shape)
            if local_step < self._global_step:
                self._stale_locked()
                return True
            self._switch_locked(self._start_round_locked(gradient, owned), None)
        elif total.shape != shape:
            # the round's shape already fits the declared one
            self._n_rejected += 1
            raise _shape_mismatch(kernel_text(total.shape), shape)
        elif isinstance(total, NarrowSum):
            total.finish()
            if not self._add_narrow_locked(total, gradient):
                return False
        elif total.nbytes <= ASIDE_MAX_BYTES:
            self._add_aside_locked(total, gradient)
        else:
            self._add_in_place_locked(total, gradient)
        if self._waiting:
            self._flush_locked()
        return True

    def _add_narrow_locked(self, total: NarrowSum, gradient: np.ndarray[Any, Any]) -> bool:
        """Count ``gradient`` and add it into the narrow sum ``total``: by one
        compiled call, counted and made the sum's pending add in one
        statement, then finished (see NarrowSum.finish: an add cut short is
        finished before the sum is next read); else by several calls, but not
        in the main thread (False: nothing changed)."""
        pending = total.prepare_add(gradient)
        if pending is None:
            if threading.current_thread() is threading.main_thread():
                return False
            self._add_then_count(total, gradient)
            return True
        count, accepted = self._count + 1, self._n_accepted + 1
        self._count, self._n_accepted, total.pending = count, accepted, pending
        total.finish()
        return True

    def _add_then_count(self, total: RoundSum, gradient: np.ndarray[Any, Any]) -> None:
        self._add(total, gradient)
        self._count, self._n_accepted = self._count + 1, self._n_accepted + 1

    def _add_aside_locked(
        self, total: np.ndarray[Any, Any], gradient: np.ndarray[Any, Any]
    ) -> None:
        """Count ``gradient`` and add it to ``total``, the round's array: the
        sum is made in the spare buffer, which then becomes the round."""
        spare = self._spare
        if spare is None:
            spare = np.empty(total.shape, total.dtype)
        if CONTEXT_LOCAL_ERRORS:
            runner_ignoring_float_errors()(np.add, total, gradient, spare)
        else:
            with np.errstate(all="ignore"):
                np.add(total, gradient, spare)
        self._switch_locked(spare, total)

    def _switch_locked(
        self,
        new: RoundSum,
        old: Optional[np.ndarray[Any, Any]],  # noqa: UP045 - as _Sum
    ) -> None:
        """Make ``new`` the round, with one more gradient counted, and ``old``
        (unless None) the spare buffer (see _settle_locked)."""
        count, accepted = self._count, self._n_accepted
        self._change = (count, accepted, new, old)
        self._count = count + 1  # the change is made: see _settle_locked
        self._round = new
        if old is not None:
            self._spare = old
        self._n_accepted = accepted + 1
        self._change = None

    def _add_in_place_locked(
        self, total: np.ndarray[Any, Any], gradient: np.ndarray[Any, Any]
    ) -> None:
        """Count ``gradient`` and add it into ``total``, the round's array,
        in place: with an element the add changes, and its value before,
        recorded first, so that an add cut short can be told from one made
        (see _settle_locked); made aside when no such element is found."""
        witness = self._witness_locked(total, gradient)
        if witness is None:
            self._add_aside_locked(total, gradient)
            return
        index, before = witness
        count, accepted = self._count, self._n_accepted
        self._change = (count, accepted, total, gradient, index, before)
        self._count = count + 1  # the change is made: see _settle_locked
        self._add(total, gradient)
        self._n_accepted = accepted + 1
        self._change = None

    def _settle_locked(self) -> None:
        """Carry through, or drop, the change to the round that an exception
        cut short (``_change``, recorded before anything it changes).

        Storing the count is the change's one point: before it, nothing of
        the round has changed (an add made aside wrote only the spare, an
        add in place comes after it), and the change is dropped; from it on,
        the gradient is the round's, and the rest is done: the round switched
        to its new array, or the add in place made unless the recorded
        element shows it made (an add changes that element for sure). Each
        step stores what the record says, so that this, cut short in turn,
        finishes the change once when run again. Everything that reads the
        round, or changes its count, runs this first."""
        change = self._change
        if change is None:
            return
        count, accepted = change[0], change[1]
        if self._count != count:
            if len(change) == 4:
                self._round = change[2]
                if change[3] is not None:
                    self._spare = change[3]
            else:
                total, gradient, index, before = change[2:]
                if total[index] == before:
                    self._add(total, gradient)
            self._n_accepted = accepted + 1
        self._change = None

    def _witness_locked(
        self, total: np.ndarray[Any, Any], gradient: np.ndarray[Any, Any]
    ) -> tuple[tuple[Any, ...], Any] | None:
        """An element of ``total`` that adding ``gradient`` changes for sure,
        as ``(index, value before)``: the first element, else the first of a
        sample spread over the array; None when neither has one (the
        gradient is zero there, or too small to change the sum). Elements
        whose sum is NaN are passed over: which NaN an add gives is not fixed."""
        index = (0,) * total.ndim
        before = total[index]
        addend = gradient[index]
        if self._integers:
            if addend != 0:
                return index, before
        elif before == before and ignoring_float_errors(operator.add, before, addend) != before:
            return index, before
        size, positions = self._sample
        if size != total.size:
            size = total.size
            positions = np.unique(np.linspace(0, size - 1, _SAMPLED).astype(np.intp))
            self._sample = size, positions
        befores = total.reshape(-1)[positions]
        addends = gradient.flat[positions]
        if self._integers:
            changed = addends != 0
        else:
            sums = ignoring_float_errors(np.add, befores, addends)
            changed = (befores == befores) & (sums != befores)
        found = int(changed.argmax())
        if not changed[found]:
            return None
        return np.unravel_index(positions[found], total.shape), befores[found]

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
        if mean and total.nbytes < RECYCLE_MIN_BYTES:
            # a MEAN whose buffer would not be reused is divided in a copy, so that
            # its round stays as it was until the take returns (see division.COPY_MAX_BYTES)
            total = np.array(total)
            divide_in_place(total, count)
            return total
        if mean:
            divide_in_place(total, count, lambda: self._keep_for_taker(serial))
        return total
