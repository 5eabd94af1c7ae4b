"""A sparse round's row index when the first dimension is known (and below
2**31): keys and, while it is small enough, a slot map.

``keys``: one int64 per touched row, ``index << SLOT_BITS | slot``, sorted
(so by index), where ``slot`` is the number of the row holding its sum. New
rows are merged in as a second sorted run (numpy's stable sort merges two runs
in one linear pass, several times cheaper than inserting into two arrays; with
the compiled loops and a slot map, one loop finds the rows and merges the
keys: see sparse_kernel). Rows are found through ``places`` when the round has
it: an int32 array over the row indices seen (up to the largest, not the whole
first dimension), holding ``base + slot + 1`` for touched rows, where ``base``
is the round's, and ``base`` or less elsewhere, so finding a gradient's rows
is one gather. It exists only while it takes no more memory than the row
buffer (``MAP_MIN_FILL``); without it the keys are binary-searched. It is kept
with the kept buffers, and the next round's ``base`` is the largest entry the
last round set, so the map is never cleared between rounds (a scatter over the
last round's rows would cost more than the apply): only when entries could
pass int32's range is it zeroed whole, and ``base`` goes back to 0.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from tf_accum import errors
from tf_accum.accumulators import sparse_kernel
from tf_accum.accumulators.sparse_rows import HeldRows, KeptBuffers, RoundWrites, SparseRound

Array = np.ndarray[Any, Any]
SLOT_BITS = sparse_kernel.SLOT_BITS  # keys: the row index above, its slot below
SLOT_MASK = sparse_kernel.SLOT_MASK
INDEX_LIMIT = 1 << 31  # largest first dimension for keys (and int32 slot maps)
MARK_LIMIT = (1 << 31) - 1  # the largest entry of a slot map (int32)
# A round has a slot map (4 bytes per row index up to the largest seen) while
# its row buffer is at least this many times as large; otherwise keys are searched.
MAP_MIN_FILL = 1.0
# A gradient with at most 1/MOSTLY_HELD new rows is added in one piece.
MOSTLY_HELD = 4


class KeyedIndex:
    """Rows found through ``keys`` and ``places`` (see the module's docstring)."""

    def __init__(self, first: int, held: HeldRows, check_range: Callable[[Array], Any]) -> None:
        self.first = first
        self._held = held
        # raises for an index out of range (the accumulator's check)
        self._check_range = check_range

    @staticmethod
    def take_order(state: SparseRound) -> tuple[Array, Array | None]:
        """(the round's row indices in order, the slot of each; None when the
        rows are in index order already)."""
        keys = state.keys
        assert keys is not None
        index = np.right_shift(keys, SLOT_BITS)
        return index, None if state.in_order else np.bitwise_and(keys, SLOT_MASK)

    def start(
        self,
        index: Array,
        borrowed: bool,
        buffer: Array,
        counts: Array,
        kept_buffers: KeptBuffers | None,
    ) -> SparseRound:
        """A round of the gradient ``index`` (sorted, unique) whose rows are
        ``buffer[:len(index)]``, taking over ``kept_buffers``' slot map if it has one."""
        k = index.shape[0]
        slot = np.arange(k, dtype=np.int64)
        keys = np.left_shift(index, SLOT_BITS, dtype=np.int64)
        keys |= slot
        state = SparseRound(
            index=None, slot=None, keys=keys, places=None,
            rows=buffer, counts=counts, used=k, in_order=True,
        )  # fmt: skip
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
        assert self.first is not None and state.keys is not None
        places = state.places
        if places is not None and top < places.shape[0]:
            return
        keys = state.keys
        if keys.shape[0]:
            top = max(top, int(keys[-1]) >> SLOT_BITS)
        size = min(self.first, top + 1 + top // 4)
        if state.rows.nbytes < size * 4 * MAP_MIN_FILL:
            state.places = None
            return
        # np.zeros is calloc'd: pages are committed only where rows are touched
        made = np.zeros(size, np.int32)
        if places is not None:
            made[: places.shape[0]] = places
        else:
            made[np.right_shift(keys, SLOT_BITS)] = np.bitwise_and(keys, SLOT_MASK) + (
                state.base + 1
            )
        # only once whole: an apply failing above (for want of memory) leaves
        # the round's map as it was, not half made
        state.places = made

    @staticmethod
    def _find(state: SparseRound, index: Array) -> tuple[Array, Array]:
        """(a slot per entry of ``index``, which entries are not in the round).

        The slots of entries not in the round are meaningless.
        """
        assert state.keys is not None
        if state.places is not None:
            held = np.take(state.places, index)  # slot + base + 1; base or less: not held
            base = state.base
            # numpy indexes with intp several times faster than with int32
            return np.subtract(held, base + 1, dtype=np.intp), held <= base
        keys = state.keys
        if not keys.shape[0]:  # a round started by a gradient without rows
            return np.zeros_like(index), np.ones(index.shape[0], bool)
        # an index past the last held one lands past the end: "clip" compares it
        # with the last (smaller) one instead, which never matches
        position = np.searchsorted(keys, np.left_shift(index, SLOT_BITS, dtype=np.int64))
        near = np.take(keys, position, mode="clip")
        return np.bitwise_and(near, SLOT_MASK), np.right_shift(near, SLOT_BITS) != index

    def merge(self, state: SparseRound, index: Array, rows: Array) -> RoundWrites:
        """Prepare merging a gradient's rows into the round; returns the
        writes that do it (see SortedIndex.merge)."""
        assert state.keys is not None
        k = index.shape[0]
        if k:
            self.map_covering(state, int(index[-1]))
        kernels = self._claiming_loops(state, index, rows)
        if kernels is not None:
            return self._merge_claimed(state, index, rows, kernels)
        slots, fresh = self._find(state, index)
        fresh_at = np.flatnonzero(fresh)
        added = fresh_at.shape[0]
        if not added:
            return self._held.add(state, slots, rows)
        used = state.used
        if used + added > state.rows.shape[0]:
            self._held.grow(state, used + added)
        new_index = index if added == k else np.take(index, fresh_at)
        new_slots = np.arange(used, used + added, dtype=np.int64)
        new_keys = np.left_shift(new_index, SLOT_BITS, dtype=np.int64)
        new_keys |= new_slots
        keys = np.concatenate((state.keys, new_keys))
        in_order = state.in_order and not (state.keys.shape[0] and new_keys[0] < state.keys[-1])
        if not in_order:
            # two sorted runs: the stable sort (a merge sort) merges them in one pass
            keys.sort(kind="stable")
        places = state.places
        # int32, the map's dtype: a put that had to convert them would allocate
        # after the rows are written
        marks = np.add(new_slots, state.base + 1, dtype=np.int32)
        held: RoundWrites | None = None
        if added == k:
            self._held.append_rows(state, rows, fresh_at)
        elif added * MOSTLY_HELD <= k or self._held.loops_for(state, slots, rows) is not None:
            # mostly rows the round holds: one gather, add and scatter over all
            # the gradient's rows (new rows get their slots, and their values
            # rather than a sum) costs less than splitting the gradient in two;
            # the compiled loop does any mix in one pass, with no gather
            np.put(slots, fresh_at, new_slots)
            state.counts[used : used + added] = 0  # free slots
            held = self._held.add(state, slots, rows, fresh_at, fresh)
        else:
            hit_at = np.flatnonzero(~fresh)
            hit_slots, hit = np.take(slots, hit_at), np.take(rows, hit_at, axis=0)
            self._held.append_rows(state, rows, fresh_at)  # free slots
            held = self._held.add(state, hit_slots, hit)

        def writes() -> None:
            if held is not None:
                held()
            if places is not None:
                places.put(new_index, marks)
            state.keys, state.in_order, state.used = keys, in_order, used + added

        return writes

    def _merge_claimed(
        self, state: SparseRound, index: Array, rows: Array, kernels: sparse_kernel.Kernels
    ) -> RoundWrites:
        """merge for a round with a slot map, by the compiled loops.

        One loop finds the gradient's rows in the map, gives the new ones their
        slots and merges their keys into a new array, changing nothing but its
        own outputs (allocated first); the buffer grows if need be; then the
        writes: one loop writes the rows, their counts and the new rows' map
        entries, allocating nothing, and the round's keys are set. Four numpy
        passes and a sort per apply become two loops.
        """
        keys, places = state.keys, state.places
        assert keys is not None and places is not None
        k, held, used = index.shape[0], keys.shape[0], state.used
        slots = np.empty(k, np.int64)
        fresh = np.empty(k, bool)
        new_keys = np.empty(k, np.int64)
        merged = np.empty(held + k, np.int64)
        added = kernels.claim_rows(
            places, state.base, index, used, keys, slots, fresh, new_keys, merged
        )
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
        round_keys = merged[: held + added] if added else keys
        # keys are distinct: the round's last key is still at held - 1 only if
        # every new key comes after it
        in_order = state.in_order and (not held or not added or bool(merged[held - 1] == keys[-1]))
        write = self._held.write_once(
            kernels.add_or_set_rows,
            (buffer, state.counts, slots, hit, fresh, places, new_keys[:added], state.base + 1),
        )

        def writes() -> None:
            write()
            state.keys, state.in_order, state.used = round_keys, in_order, used + added

        return writes

    def _claiming_loops(
        self, state: SparseRound, index: Array, rows: Array
    ) -> sparse_kernel.Kernels | None:
        """The compiled loops when the round has a slot map and they take the
        gradient's index (int64, C-contiguous, aligned) and rows, else None."""
        if state.places is None or not (index.flags.c_contiguous and index.flags.aligned):
            return None
        return self._held.loops_for(state, index, rows)
