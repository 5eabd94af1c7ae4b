"""A sparse round's row buffer: its state, and the adds into the rows it holds.

A round keeps its row sums in order of arrival (``rows``, with spare capacity,
growing by a quarter when full) and how many gradients touched each row
(``counts``); how a row index finds its row is the business of the round's row
index (tf_accum/accumulators/sparse_index.py). Every apply
makes what it needs aside first (a MemoryError changes nothing), and returns
the writes that change the round (a :data:`RoundWrites`): in-place array methods
storing values made aside, which a second run stores again unchanged, and at
most one compiled loop, which runs once (:meth:`HeldRows.write_once`). An
exception that cuts them short (Ctrl-C lands between any two calls) is
followed by running them again, so a gradient is in the round whole or not
at all.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from tf_accum.accumulators import sparse_kernel
from tf_accum.accumulators.division import divide_in_place
from tf_accum.accumulators.float_errors import float_errors_ignored, in_place_adder

Array = np.ndarray[Any, Any]
GROWTH = 1.25  # spare capacity when the row buffer grows

# The writes that apply a prepared gradient to a round: running them again
# after an exception cut them short finishes them, and changes nothing more.
RoundWrites = Callable[[], Any]


class Writes:
    """Several :data:`RoundWrites`, in order."""

    __slots__ = ("parts",)

    def __init__(self, *parts: RoundWrites) -> None:
        self.parts = parts

    def __call__(self) -> None:
        for part in self.parts:
            part()


@dataclass
class SparseRound:
    index: Array  # the touched row indices, sorted (see sparse_index)
    slot: Array  # the slot of each in ``rows``
    places: Array | None  # the slot map, when the round has one
    rows: Array
    counts: Array
    used: int
    in_order: bool  # slots ascend with the index: rows are in index order
    items: Array | None = None  # ``rows`` as opaque items (see rows_as_items), once made
    # entries of ``places`` above this are the round's rows (slot + base + 1)
    base: int = 0
    # its buffers became a later round's (see KeptBuffers): it cannot go back
    reused: bool = False


@dataclass
class KeptBuffers:
    """The last round's buffers, kept for the next round."""

    rows: Array
    counts: Array
    places: Array | None
    top: int  # the largest entry of ``places`` the round may have set
    source: SparseRound  # the round they are from


def divide_rows(
    rows: Array, counts: Array, before_writing: Callable[[], None] | None = None
) -> None:
    """Divide each row by its count, in place. Rows touched once are left as they
    are (with scattered updates most rows are). ``before_writing`` is called
    once nothing can fail any more, just before ``rows`` change."""
    several = counts > 1
    picked = np.flatnonzero(several)
    picked_count = picked.shape[0]
    if not picked_count:
        return
    tail = (1,) * (rows.ndim - 1)
    if picked_count == counts.shape[0]:
        divide_in_place(rows, counts.reshape((-1, *tail)), before_writing)
        return
    if picked_count * 2 > counts.shape[0]:
        # mostly rows touched several times: one pass over all rows, then the
        # others put back as they were, costs less than gathering the many
        kept = np.flatnonzero(~several)
        saved = np.take(rows, kept, axis=0)
        divide_in_place(rows, counts.reshape((-1, *tail)), before_writing)
        if saved.size:
            np.put(rows_as_items(rows), kept, rows_as_items(saved))
        return
    part = np.take(rows, picked, axis=0)
    divide_in_place(part, counts[picked].reshape((-1, *tail)))
    if before_writing is not None:
        before_writing()
    rows[picked] = part


def normalize(
    indices: Array, values: Array, increasing: bool | None = None
) -> tuple[Array, Array, bool]:
    """Sort a gradient's rows by index and sum duplicate indices (docs/departures.md T5).

    ``increasing``: whether the indices are known to be strictly increasing
    (None: not known yet). Returns (unique sorted indices, their rows, whether
    the rows are the caller's own array, unchanged). Already sorted unique
    indices cost one O(k) comparison, or nothing when known.
    """
    if increasing is None:
        increasing = indices.size < 2 or bool((indices[1:] > indices[:-1]).all())
    if increasing:
        return indices, values, True
    order = np.argsort(indices, kind="stable")
    ordered = indices[order]
    starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
    rows = values[order]
    if starts.size != ordered.size:
        # numpy's add reductions widen integers narrower than 64 bits to
        # int64/uint64; duplicates must wrap in the gradient's own dtype.
        # quietly, as every other sum of the accumulator: an overflow is an
        # infinity, not a warning
        with float_errors_ignored():
            rows = np.add.reduceat(rows, starts, axis=0, dtype=rows.dtype)
    return ordered[starts], rows, False


def rows_as_items(rows: Array) -> Array:
    """``rows`` (C-contiguous) as a 1-D array with one opaque item per row:
    numpy moves such items several times faster than rows of a 2-D array."""
    return rows.reshape(rows.shape[0], -1).view(np.dtype((np.void, rows[0].nbytes))).reshape(-1)


def gather(rows: Array, order: Array, dividing: Any = None) -> Array:
    """``rows[order]`` in a new array.

    ``dividing``: (the compiled loop, the rows' counts) to divide each row by
    its count as it is gathered (see sparse_kernel.gather_dividing); ``rows``
    is then C-contiguous and its dtype the loop's.
    """
    values = np.empty((order.shape[0], *rows.shape[1:]), rows.dtype)
    if dividing is None:
        np.take(rows, order, axis=0, out=values, mode="clip")  # "raise" would buffer `out`
    else:
        loop, counts = dividing
        loop(rows.reshape(rows.shape[0], -1), counts, order, values.reshape(values.shape[0], -1))
    return values


class HeldRows:
    """The adds into a round's rows for an accumulator of one dtype: numpy's
    (quietly: an overflow is an infinity) or, for float32 and float64 when
    loaded, sparse_kernel's compiled loops."""

    def __init__(self, dtype: np.dtype[Any]) -> None:
        self._add = in_place_adder(dtype)
        # float32/float64: the optional compiled row adds
        self.compiled = dtype in sparse_kernel.KERNEL_DTYPES
        # the ticket of the last compiled write that ran (see write_once);
        # changed under the accumulator's lock, as the rows are
        self._stamp = np.zeros(1, np.int64)
        self._stamp_read = self._stamp.data  # reads a Python int, unlike the array
        self._tickets = 0

    def write_once(self, loop: Callable[..., Any], arguments: tuple[Any, ...]) -> RoundWrites:
        """The write ``loop(*arguments, stamp, ticket)`` (a compiled row loop),
        run at most once however often the result is called: the loop's last
        store puts this write's ticket in the stamp, inside the one C call, so
        an exception (raised only between bytecodes) finds the loop not begun,
        or over and stamped; never over and unmarked."""
        self._tickets = ticket = self._tickets + 1
        stamp = self._stamp_read
        arguments = (*arguments, self._stamp, ticket)

        def write() -> None:
            if stamp[0] != ticket:
                loop(*arguments)

        return write

    @staticmethod
    def held_items(state: SparseRound) -> Array:
        items = state.items
        if items is None:
            items = state.items = rows_as_items(state.rows)
        return items

    def append_rows(self, state: SparseRound, rows: Array, fresh_at: Array) -> None:
        """Put ``rows[fresh_at]`` in the next free slots, counted once (``used`` stays)."""
        used = state.used
        added = fresh_at.shape[0]
        # np.take writes into `out` directly with mode="clip" (np.compress with
        # `out` is several times slower); the positions are valid by construction
        np.take(rows, fresh_at, axis=0, out=state.rows[used : used + added],
                mode="clip")  # fmt: skip
        state.counts[used : used + added] = 1

    @staticmethod
    def grow(state: SparseRound, needed: int) -> None:
        capacity = max(needed, int(state.rows.shape[0] * GROWTH))
        rows = np.empty((capacity, *state.rows.shape[1:]), state.rows.dtype)
        np.copyto(rows[: state.used], state.rows[: state.used])
        counts = np.empty(capacity, np.int64)
        counts[: state.used] = state.counts[: state.used]
        state.rows, state.counts, state.items = rows, counts, None

    def loops_for(
        self, state: SparseRound, slots: Array, hit: Array
    ) -> sparse_kernel.Kernels | None:
        """The compiled loops if they are loaded and take these arrays, else None."""
        kernels = sparse_kernel.loaded()
        if (
            kernels is not None
            and self.compiled
            and hit.dtype == state.rows.dtype
            and slots.dtype == np.int64
            and hit.flags.c_contiguous
            and hit.flags.aligned
            and state.rows.flags.c_contiguous
            and state.rows.flags.writeable
        ):
            return kernels
        return None

    def add(self, state: SparseRound, slots: Array, hit: Array) -> RoundWrites:
        """Prepare adding ``hit[i]`` to the row of ``slots[i]``; the slots are
        distinct. Returns the writes that do it (see :data:`RoundWrites`).

        The new rows and counts are made aside and written by in-place array
        methods, which allocate nothing (or by the compiled loop, which
        allocates nothing either, and runs once).
        """
        kernels = self.loops_for(state, slots, hit)
        if kernels is not None:
            width = math.prod(state.rows.shape[1:])
            rows = state.rows.reshape(state.rows.shape[0], width)
            hit = hit.reshape(hit.shape[0], width)
            return self.write_once(kernels.add_rows, (rows, state.counts, slots, hit))
        counts = np.take(state.counts, slots)
        counts += 1
        put_counts = partial(state.counts.put, slots, counts)
        if not hit.size:
            return put_counts
        items = self.held_items(state)
        held_items = np.take(items, slots)
        held = held_items.view(state.rows.dtype).reshape(hit.shape)
        self._add(held, hit)
        return Writes(partial(items.put, slots, held_items), put_counts)

    def dividing_gather(self, state: SparseRound, order: Array) -> tuple[Any, Array] | None:
        """(the compiled dividing gather, the round's counts) when the loops are
        loaded and take the round's rows and ``order``, else None."""
        # the round's counts are int64 and its rows of the accumulator's dtype
        kernels = sparse_kernel.loaded()
        rows = state.rows
        if (
            kernels is None
            or not self.compiled
            or not rows.flags.c_contiguous
            or not rows.flags.aligned
            or order.dtype != np.int64
        ):
            return None
        return kernels.gather_rows_dividing, state.counts
