"""A sparse round's row index when the first dimension is not known (or is
2**31 or more): the touched row indices, sorted and unique, and beside each
the slot of the row holding its sum. A gradient's rows are found by binary
search, and new ones inserted into both arrays.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tf_accum.accumulators.sparse_rows import HeldRows, RoundWrites, SparseRound

Array = np.ndarray[Any, Any]


class SortedIndex:
    """Rows found through ``index`` and ``slot`` (see the module's docstring)."""

    def __init__(self, held: HeldRows) -> None:
        self._held = held

    @staticmethod
    def start(
        index: Array, borrowed: bool, buffer: Array, counts: Array, kept_buffers: Any
    ) -> SparseRound:
        """A round of the gradient ``index`` (sorted, unique; the caller's own
        array when ``borrowed``) whose rows are ``buffer[:len(index)]``."""
        slot = np.arange(index.shape[0], dtype=np.int64)
        return SparseRound(
            index=np.array(index, np.int64) if borrowed else index,
            slot=slot, keys=None, places=None,
            rows=buffer, counts=counts, used=index.shape[0], in_order=True,
        )  # fmt: skip

    @staticmethod
    def take_order(state: SparseRound) -> tuple[Array, Array | None]:
        """(the round's row indices in order, the slot of each; None when the
        rows are in index order already)."""
        assert state.index is not None and state.slot is not None
        return state.index, None if state.in_order else state.slot

    def merge(self, state: SparseRound, index: Array, rows: Array) -> RoundWrites:
        """Prepare merging a gradient's rows into the round; returns the writes
        that do it (a :data:`~tf_accum.accumulators.sparse_rows.RoundWrites`).

        Nothing the round shows changes before the writes: what allocates
        comes first (a MemoryError leaves the round as it was; a grown buffer
        holds the same rows), the gradient's new rows go to free slots, which
        no one reads, and the writes add to the held rows and store the new
        index.
        """
        assert state.index is not None and state.slot is not None
        # np.take / np.compress gather whole rows several times faster than
        # fancy or boolean indexing on 2-D arrays.
        m = state.index.shape[0]
        position = np.searchsorted(state.index, index)
        # an index past the last held one lands on m: compare it with the last
        # (smaller) one instead, which never matches
        if m:
            found = np.take(state.index, position, mode="clip") == index
        else:  # a round started by a gradient without rows
            found = np.zeros(index.shape[0], bool)
        all_found = bool(found.all())
        if all_found:
            return self._held.add(state, np.take(state.slot, position), rows)
        some_found = bool(found.any())
        if some_found:
            slots = np.take(state.slot, position[found])
            hit = np.compress(found, rows, axis=0)
        fresh_at = np.flatnonzero(~found)
        new_index = np.take(index, fresh_at)
        added = new_index.shape[0]
        insert_at = np.take(position, fresh_at)
        used = state.used
        if used + added > state.rows.shape[0]:
            self._held.grow(state, used + added)
        merged_index = np.insert(state.index, insert_at, new_index)
        merged_slot = np.insert(state.slot, insert_at, np.arange(used, used + added))
        in_order = state.in_order and bool(insert_at[0] == m)
        self._held.append_rows(state, rows, fresh_at)  # free slots
        held = self._held.add(state, slots, hit) if some_found else None

        def writes() -> None:
            if held is not None:
                held()
            state.in_order, state.index, state.slot, state.used = (
                in_order,
                merged_index,
                merged_slot,
                used + added,
            )

        return writes
