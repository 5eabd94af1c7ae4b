"""A sparse round: its row buffer and the adds into it, and its row index.

The buffer keeps the round's row sums in order of arrival (``rows``, with
spare capacity, growing by a quarter when full) and how many gradients
touched each row (``counts``). Every apply makes what it needs aside first (a
MemoryError changes nothing), and returns the writes that change the round (a
:data:`RoundWrites`): in-place array methods storing values made aside, which
a second run stores again unchanged, and at most one compiled loop, which
runs once (:meth:`HeldRows.write_once`: the loop's own last store says it
ran). The accumulator counts the gradient and keeps its writes in one
statement, then runs them; if an exception (Ctrl-C) cuts them short, they run
again, whole, before anyone next reads the round (sparse.py), so a gradient
is in the round whole or not at all, wherever the exception landed.

The row index (:class:`RowIndex`) holds the touched row indices, sorted and
unique (``index``), beside each the slot of the row holding its sum
(``slot``), and, while it is small enough, a slot map. A gradient's rows are
found through the slot map when the round has one, else by binary search in
``index``; its new rows get the next free slots and are merged into ``index``
and ``slot`` (new arrays: the round's change only in its writes). The map,
``places``, is an int32 array over the row indices seen (up to the largest,
not the whole first dimension), holding ``base + slot + 1`` for touched rows,
where ``base`` is the round's, and ``base`` or less elsewhere, so finding a
gradient's rows is one gather. A round has one only when the first dimension
is declared and below 2**31, and only while it takes no more memory than the
row buffer (``MAP_MIN_FILL``). It is kept with the kept buffers, and the next
round's ``base`` is the largest entry the last round set, so the map is never
cleared between rounds (a scatter over the last round's rows would cost more
than the apply): only when entries could pass int32's range is it zeroed
whole, and ``base`` goes back to 0. With a map and the compiled loops
(sparse_kernel), one loop finds the rows and merges the index, another writes
the rows and the map.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from tf_accum import errors
from tf_accum.accumulators import sparse_kernel
from tf_accum.accumulators.division import divide_in_place
from tf_accum.accumulators.float_errors import float_errors_ignored, in_place_adder

Array = np.ndarray[Any, Any]
GROWTH = 1.25  # spare capacity when the row buffer grows
INDEX_LIMIT = 1 << 31  # a slot map needs a declared first dimension below this
MARK_LIMIT = (1 << 31) - 1  # the largest entry of a slot map (int32)
# A round has a slot map (4 bytes per row index up to the largest seen) while
# its row buffer is at least this many times as large; otherwise the index is searched.
MAP_MIN_FILL = 1.0
_SLOT_BITS = 32  # a packed key (see merged_runs): the row index above these bits, its slot in them
_SLOT_MASK = (1 << _SLOT_BITS) - 1

# The writes that apply a prepared gradient to a round: running them again,
# after an exception cut them short or after they ran whole, leaves the round
# as one whole run does.
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
    index: Array  # the touched row indices, sorted (see RowIndex)
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
        store puts this write's ticket in the stamp, so whoever runs the write
        again finds the loop over and stamped, or not begun (no exception of
        Python's lands inside a compiled call)."""
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


def merged_runs(
    held_index: Array, held_slot: Array, new_index: Array, new_slot: Array
) -> tuple[Array, Array]:
    """The sorted run ``held_index`` (with ``held_slot``) and the sorted run
    ``new_index`` (with ``new_slot``), no index in both, merged into new arrays."""
    held, added = held_index.shape[0], new_index.shape[0]
    if not held or new_index[0] > held_index[-1]:
        return np.concatenate((held_index, new_index)), np.concatenate((held_slot, new_slot))
    if max(held_index[-1], new_index[-1]) < INDEX_LIMIT and held + added <= _SLOT_MASK:
        # each index and its slot packed into one int64 (index above, slot
        # below), so that numpy's stable sort, a merge sort, merges the two
        # sorted runs in one pass: several times faster than moving two
        # arrays apart
        keys = np.empty(held + added, np.int64)
        np.left_shift(held_index, _SLOT_BITS, out=keys[:held])
        keys[:held] |= held_slot
        np.left_shift(new_index, _SLOT_BITS, out=keys[held:])
        keys[held:] |= new_slot
        keys.sort(kind="stable")
        return np.right_shift(keys, _SLOT_BITS), np.bitwise_and(keys, _SLOT_MASK)
    # indices of 2**31 and above (no first dimension declared)
    merged = np.concatenate((held_index, new_index))
    order = np.argsort(merged, kind="stable")
    return np.take(merged, order), np.take(np.concatenate((held_slot, new_slot)), order)


class RowIndex:
    """Rows found through ``index``, ``slot`` and ``places`` (see the module's docstring)."""

    def __init__(
        self, first: int | None, held: HeldRows, check_range: Callable[[Array], Any]
    ) -> None:
        # the declared first dimension when a slot map may cover it, else None
        self.first = first if first is not None and first < INDEX_LIMIT else None
        self._held = held
        # raises for an index out of range (the accumulator's check)
        self._check_range = check_range

    @staticmethod
    def take_order(state: SparseRound) -> tuple[Array, Array | None]:
        """(the round's row indices in order, the slot of each; None when the
        rows are in index order already)."""
        return state.index, None if state.in_order else state.slot

    def start(
        self,
        index: Array,
        borrowed: bool,
        buffer: Array,
        counts: Array,
        kept_buffers: KeptBuffers | None,
    ) -> SparseRound:
        """A round of the gradient ``index`` (sorted, unique; the caller's own
        array when ``borrowed``) whose rows are ``buffer[:len(index)]``, taking
        over ``kept_buffers``' slot map if it has one."""
        k = index.shape[0]
        slot = np.arange(k, dtype=np.int64)
        state = SparseRound(
            index=np.array(index, np.int64) if borrowed else index, slot=slot, places=None,
            rows=buffer, counts=counts, used=k, in_order=True,
        )  # fmt: skip
        if self.first is None:
            return state
        if kept_buffers is not None and kept_buffers.places is not None:
            # entries up to the last round's largest are not this round's
            state.base = kept_buffers.top
            if state.base + self.first > MARK_LIMIT:
                # this round's entries could pass int32's range: start again
                kept_buffers.places.fill(0)
                state.base = 0
            state.places = kept_buffers.places
        if k:
            self.map_covering(state, int(index[-1]))
            if state.places is not None:
                state.places[index] = slot + (state.base + 1)
        return state

    def map_covering(self, state: SparseRound, top: int) -> None:
        """Make sure the round's slot map reaches row ``top``, or that it has none.

        A map is made (or enlarged) only while it takes no more memory than the
        round's row buffer (see ``MAP_MIN_FILL``); it reaches the largest row
        index seen, with some room, not the whole first dimension.
        """
        assert self.first is not None
        places = state.places
        if places is not None and top < places.shape[0]:
            return
        if state.index.shape[0]:
            top = max(top, int(state.index[-1]))
        size = min(self.first, top + 1 + top // 4)
        if state.rows.nbytes < size * 4 * MAP_MIN_FILL:
            state.places = None
            return
        # np.zeros is calloc'd: pages are committed only where rows are touched
        made = np.zeros(size, np.int32)
        if places is not None:
            made[: places.shape[0]] = places
        else:
            made[state.index] = state.slot + (state.base + 1)
        # only once whole: an apply failing above (for want of memory) leaves
        # the round's map as it was, not half made
        state.places = made

    @staticmethod
    def _find(state: SparseRound, index: Array) -> tuple[Array, Array]:
        """(a slot per entry of ``index``, which entries are not in the round).

        The slots of entries not in the round are meaningless.
        """
        if state.places is not None:
            held = np.take(state.places, index)  # slot + base + 1; base or less: not held
            base = state.base
            # numpy indexes with intp several times faster than with int32
            return np.subtract(held, base + 1, dtype=np.intp), held <= base
        if not state.index.shape[0]:  # a round started by a gradient without rows
            return np.zeros_like(index), np.ones(index.shape[0], bool)
        # an index past the last held one lands past the end: "clip" compares it
        # with the last (smaller) one instead, which never matches
        position = np.searchsorted(state.index, index)
        near = np.take(state.index, position, mode="clip")
        return np.take(state.slot, position, mode="clip"), near != index

    def merge(self, state: SparseRound, index: Array, rows: Array) -> RoundWrites:
        """Prepare merging a gradient's rows into the round; returns the writes
        that do it (a :data:`RoundWrites`).

        Nothing the round shows changes before the writes: what allocates
        comes first (a MemoryError leaves the round as it was; a grown buffer
        holds the same rows), the gradient's new rows go to free slots, which
        no one reads, and the writes add to the held rows and store the new
        index (and the new rows' entries in the slot map).
        """
        k = index.shape[0]
        if k and self.first is not None:
            self.map_covering(state, int(index[-1]))
        kernels = self._claiming_loops(state, index, rows)
        if kernels is not None:
            return self._merge_claimed(state, index, rows, kernels)
        slots, fresh = self._find(state, index)
        fresh_at = np.nonzero(fresh)[0]  # (flatnonzero: two calls more)
        added = fresh_at.shape[0]
        if not added:
            return self._held.add(state, slots, rows)
        used = state.used
        if used + added > state.rows.shape[0]:
            self._held.grow(state, used + added)
        new_index = index if added == k else np.take(index, fresh_at)
        new_slots = np.arange(used, used + added, dtype=np.int64)
        merged_index, merged_slot = merged_runs(state.index, state.slot, new_index, new_slots)
        held_count = state.index.shape[0]
        in_order = state.in_order and (not held_count or bool(new_index[0] > state.index[-1]))
        places = state.places
        # int32, the map's dtype: a put that had to convert them would allocate
        # after the rows are written
        marks = None if places is None else np.add(new_slots, state.base + 1, dtype=np.int32)
        held: RoundWrites | None = None
        if added < k:
            hit_at = np.nonzero(~fresh)[0]
            held = self._held.add(state, np.take(slots, hit_at), np.take(rows, hit_at, axis=0))
        self._held.append_rows(state, rows, fresh_at)  # free slots

        def writes() -> None:
            if held is not None:
                held()
            if places is not None and marks is not None:
                places.put(new_index, marks)
            state.index, state.slot, state.in_order, state.used = (
                merged_index,
                merged_slot,
                in_order,
                used + added,
            )

        return writes

    def _merge_claimed(
        self, state: SparseRound, index: Array, rows: Array, kernels: sparse_kernel.Kernels
    ) -> RoundWrites:
        """merge for a round with a slot map, by the compiled loops.

        One loop finds the gradient's rows in the map, gives the new ones their
        slots and merges them into new index and slot arrays, changing nothing
        but its own outputs (allocated first); the buffer grows if need be;
        then the writes: one loop writes the rows, their counts and the new
        rows' map entries, allocating nothing, and the round's index is set.
        """
        places = state.places
        assert places is not None
        k, held, used = index.shape[0], state.index.shape[0], state.used
        slots = np.empty(k, np.int64)
        fresh = np.empty(k, bool)
        new_index = np.empty(k, np.int64)
        merged_index = np.empty(held + k, np.int64)
        merged_slot = np.empty(held + k, np.int64)
        added = kernels.claim_rows(
            places, state.base, index, used, state.index, state.slot,
            slots, fresh, new_index, merged_index, merged_slot,
        )  # fmt: skip
        if added < 0:
            # the range was checked before the lock: another thread changed the indices since
            self._check_range(index)
            raise errors.InvalidArgumentError(
                None,
                None,
                "The gradient's indices changed while it was being applied: an index now "
                "lies past every row this round has seen; keep a gradient's arrays "
                "unchanged until its apply returns",
            )
        if used + added > state.rows.shape[0]:
            self._held.grow(state, used + added)
        width = math.prod(state.rows.shape[1:])
        buffer = state.rows.reshape(state.rows.shape[0], width)
        hit = rows.reshape(k, width)
        # the round's new state is made before the rows change: nothing after may fail
        if added:
            round_index, round_slot = merged_index[: held + added], merged_slot[: held + added]
        else:
            round_index, round_slot = state.index, state.slot
        # indices are distinct: the round's last row is still at held - 1 only
        # if every new row comes after it
        in_order = state.in_order and (
            not held or not added or bool(merged_index[held - 1] == state.index[-1])
        )
        write = self._held.write_once(
            kernels.add_or_set_rows,
            (buffer, state.counts, slots, hit, fresh, places, new_index[:added],
             used + state.base + 1),
        )  # fmt: skip

        def writes() -> None:
            write()
            state.index, state.slot, state.in_order, state.used = (
                round_index,
                round_slot,
                in_order,
                used + added,
            )

        return writes

    def _claiming_loops(
        self, state: SparseRound, index: Array, rows: Array
    ) -> sparse_kernel.Kernels | None:
        """The compiled loops when the round has a slot map and they take the
        gradient's index (int64, C-contiguous, aligned) and rows, else None."""
        if state.places is None or not (index.flags.c_contiguous and index.flags.aligned):
            return None
        return self._held.loops_for(state, index, rows)
