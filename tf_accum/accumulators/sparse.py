"""The sparse accumulator: per-row sums of gradients given as (indices, values).

State of a round (all guarded by the base's lock):

- ``keys``, when the declared first dimension is known (and below 2**31): one
  int64 per touched row, ``index << SLOT_BITS | slot``, sorted (so by index),
  where ``slot`` is the number of the row holding its sum. New rows are merged
  in as a second sorted run (numpy's stable sort merges two runs in one linear
  pass, several times cheaper than inserting into two arrays; with the
  compiled loops and a slot map, one loop finds the rows and merges the keys:
  see sparse_kernel). Rows are found through ``places`` when the round has it:
  an int32 array over the row indices seen (up to the largest, not the whole
  first dimension), holding ``base + slot + 1`` for touched rows, where
  ``base`` is the round's, and ``base`` or less elsewhere, so finding a
  gradient's rows is one gather. It exists only while it takes no more memory
  than the row buffer (``MAP_MIN_FILL``); without it the keys are
  binary-searched. It is kept with the spare buffer, and the next round's
  ``base`` is the largest entry the last round set, so the map is never
  cleared between rounds (a scatter over the last round's rows cost more than
  half a millisecond at 80,000 rows): only when entries could pass int32's
  range is it zeroed whole, and ``base`` goes back to 0;
- otherwise ``index``: the touched row indices, sorted and unique (int64,
  length m), and ``slot``: for each entry of ``index``, the number of the row
  holding its sum;
- ``rows``: the row sums, in order of arrival: each apply appends its new rows
  at ``used`` (TensorFlow's kernel rebuilds all rows in index order on every
  apply instead); the buffer has spare capacity and grows by a quarter when
  full;
- ``counts``: how many gradients touched each row (same order as ``rows``).

Rows a gradient shares with the round are added in place; only the small
index arrays are merged. A take gathers the rows into index order once (a
MEAN take with the compiled loops of sparse_kernel divides each row as it
gathers it; without them, the rows counted more than once are divided where
they are held when they are few, else in the result; rows already in index
order are copied, not gathered), then keeps the buffer for the next round:
memory that is already mapped, so applies do not pay for faulting in fresh
pages (which costs more than the arithmetic). When the rows arrived in index
order and fill the buffer exactly (a round of one gradient, say) the buffer
itself is handed over instead.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple, Optional

import numpy as np

from tf_accum import errors
from tf_accum.accumulators import sparse_kernel
from tf_accum.accumulators.base import AccumulatorBase, AccumulatorSpec, missing_resource_error
from tf_accum.accumulators.division import divide_in_place
from tf_accum.accumulators.pool import COPY_PARALLEL_MIN_ELEMENTS, split_elementwise
from tf_accum.accumulators.quiet import in_place_adder, quiet_float_errors

Array = np.ndarray[Any, Any]
GROWTH = 1.25  # spare capacity when the row buffer grows
SLOT_BITS = sparse_kernel.SLOT_BITS  # keys: the row index above, its slot below
INDEX_LIMIT = 1 << 31  # largest first dimension for keys (and int32 slot maps)
SLOT_MASK = sparse_kernel.SLOT_MASK
MARK_LIMIT = (1 << 31) - 1  # the largest entry of a slot map (int32)
# A round has a slot map (4 bytes per row index up to the largest seen) while
# its row buffer is at least this many times as large; otherwise keys are searched.
MAP_MIN_FILL = 1.0
# A gradient with at most 1/MOSTLY_HELD new rows is added in one piece.
MOSTLY_HELD = 4
# the compiled add's slot map when the round has none (it marks nothing then)
_NO_MAP = np.empty(0, np.int32)
_NO_KEYS = np.empty(0, np.int64)


class SparseTakeResult(NamedTuple):
    """What a sparse take returns; field names are TensorFlow's."""

    indices: Array
    values: Array
    shape: Array

    def to_scipy(self, format: str = "csr") -> Any:
        """The take as a SciPy sparse array of the accumulator's dense shape.

        See :func:`tf_accum.indexed_slices.rows_to_scipy` (SciPy is imported then).
        """
        from tf_accum.indexed_slices import rows_to_scipy

        return rows_to_scipy(self.indices, self.values, self.shape, format)


@dataclass
class SparseRound:
    index: Array | None  # first dimension unknown (or 2**31 and above)
    slot: Array | None  # as index
    keys: Array | None  # first dimension known: replaces index and slot
    places: Array | None  # with keys: the slot map, when the round has one
    rows: Array
    counts: Array
    used: int
    in_order: bool  # slots ascend with the index: rows are in index order
    items: Array | None = None  # ``rows`` as opaque items (see _rows_as_items), once made
    # a take that divided rows in ``rows`` itself: (their slots, their items as
    # they were), so that a take that fails later puts the round back undivided
    undivided: tuple[Array, Array] | None = None
    # entries of ``places`` above this are the round's rows (slot + base + 1)
    base: int = 0


@dataclass
class _Spare:
    """The last round's buffers, kept for the next round."""

    rows: Array
    counts: Array
    places: Array | None
    top: int  # the largest entry of ``places`` the round may have set


def _invalid(message: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, message)


def _text(shape: tuple[int, ...]) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


def _divide_rows(
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
            np.put(_rows_as_items(rows), kept, _rows_as_items(saved))
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
        increasing = indices.size < 2 or bool(np.all(indices[1:] > indices[:-1]))
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
        with quiet_float_errors():
            rows = np.add.reduceat(rows, starts, axis=0, dtype=rows.dtype)
    return ordered[starts], rows, False


def _rows_as_items(rows: Array) -> Array:
    """``rows`` (C-contiguous) as a 1-D array with one opaque item per row:
    numpy moves such items several times faster than rows of a 2-D array."""
    return rows.reshape(rows.shape[0], -1).view(np.dtype((np.void, rows[0].nbytes))).reshape(-1)


def _gather(rows: Array, order: Array, dividing: Any = None) -> Array:
    """``rows[order]`` in a new array; several threads share large gathers.

    ``dividing``: (the compiled loop, the rows' counts) to divide each row by
    its count as it is gathered (see sparse_kernel.gather_dividing); ``rows``
    is then C-contiguous and its dtype the loop's.
    """
    values = np.empty((order.shape[0], *rows.shape[1:]), rows.dtype)
    fill: Callable[[Array, Array], Any]
    if dividing is None:

        def fill(out: Array, picked: Array) -> Any:
            return np.take(rows, picked, axis=0, out=out, mode="clip")  # "raise" would buffer `out`

    else:
        loop, counts = dividing
        flat = rows.reshape(rows.shape[0], -1)

        def fill(out: Array, picked: Array) -> Any:
            return loop(flat, counts, picked, out.reshape(out.shape[0], -1))

    if values.size < COPY_PARALLEL_MIN_ELEMENTS:
        fill(values, order)
    else:
        split_elementwise(fill, (values, order), COPY_PARALLEL_MIN_ELEMENTS)
    return values


class SparseAccumulator(AccumulatorBase[Optional[SparseRound]]):  # noqa: UP045
    """Accumulates sparse gradients row by row; a take returns (indices, values, shape).

    MEAN divides each row by the number of gradients that touched it; SUM does
    not divide.
    """

    kind: ClassVar[str] = "sparse"

    # the round being accumulated (None shows through once a take detaches it)
    _round: SparseRound | None = None

    def __init__(self, spec: AccumulatorSpec, label: str) -> None:
        super().__init__(spec, label)
        self._add = in_place_adder(self.numpy_dtype)
        # float32/float64: the optional compiled row adds are loaded before the lock
        self._compiled_dtype = self.numpy_dtype in sparse_kernel.KERNEL_DTYPES
        self._round = None
        # the last round's buffers, kept for the next round
        self._spare: _Spare | None = None
        first = spec.shape[0] if spec.shape else None
        # row indices and slots packed into one int64 need a first dimension below 2**31
        self._first = first if first is not None and first < INDEX_LIMIT else None

    def _detach_round_locked(self) -> SparseRound | None:
        # a buffer waiting since before this round is dropped (and on destroy)
        self._spare = None
        # last, in one line: the round is handed over whole or not at all
        # (the class attribute's None shows once the instance's is gone)
        return self.__dict__.pop("_round", None)  # type: ignore[no-any-return]

    def _attach_round_locked(self, state: SparseRound | None) -> None:
        # a round put back may be what the spare was made from: never both
        self._spare = None
        if state is not None and state.undivided is not None:
            slots, saved = state.undivided
            self._held_items(state).put(slots, saved)
            state.undivided = None
        self._round = state

    @staticmethod
    def _held_items(state: SparseRound) -> Array:
        items = state.items
        if items is None:
            items = state.items = _rows_as_items(state.rows)
        return items

    # --- validation that needs no state (docs/departures.md T7: stale gradients too) ----

    def check_gradient(
        self, indices: Array, values: Array, gradient_shape: Array | None
    ) -> tuple[errors.InvalidArgumentError | None, bool]:
        """Raise for a malformed gradient; return (not raise) a declared-values error,
        and whether the indices are strictly increasing (see :func:`normalize`).

        The values-against-declared-shape error is returned so that, for a
        gradient that is not stale, a mismatch with the round's own values
        shape can be reported first, as TensorFlow does.
        """
        if indices.ndim != 1:
            raise _invalid(
                f"Input indices should be vector but received shape: {_text(indices.shape)}"
            )
        if values.ndim == 0:
            raise _invalid("Values cannot be 0-dimensional.")
        if values.shape[0] != indices.shape[0]:
            raise _invalid(
                f"Expected {indices.shape[0]} non-empty input values, got {values.shape[0]}"
            )
        declared = self.shape
        if gradient_shape is not None and declared is not None:
            if gradient_shape.ndim != 1:
                raise _invalid(
                    f"gradient_shape must be a vector, but had shape {_text(gradient_shape.shape)}"
                )
            if gradient_shape.shape[0] < len(declared):
                raise _invalid(
                    f"Shape mismatch: expected shape rank at least {len(declared)}, got "
                    f"{gradient_shape.shape[0]}"
                )
            for i, size in enumerate(declared):
                if size is not None and gradient_shape[i] != size:
                    raise _invalid(
                        f"Shape mismatch: expected shape dim {i} to be {size}, got "
                        f"{int(gradient_shape[i])}"
                    )
        increasing = self._check_index_range(indices)
        return self._check_declared_values(values), increasing

    def _check_index_range(self, indices: Array) -> bool:
        """Raise for an index out of range; say whether the indices strictly increase."""
        if not indices.size:
            return True
        increasing = indices.size < 2 or bool(np.all(indices[1:] > indices[:-1]))
        limit = self.shape[0] if self.shape else None
        # increasing indices have their extremes at the ends; otherwise two
        # reductions clear the common case without temporary arrays
        low, high = (indices[0], indices[-1]) if increasing else (indices.min(), indices.max())
        if low >= 0 and (limit is None or high < limit):
            return increasing
        bad = indices < 0
        if limit is not None:
            bad |= indices >= limit
        if not bad.any():
            return increasing
        position = int(np.argmax(bad))
        value = int(indices[position])
        if value < 0:
            raise _invalid(
                f"Invalid index: index of slice {position} is {value}, which is negative; "
                "indices must be at least 0"
            )
        raise _invalid(
            f"Shape mismatch: index of slice {position} exceeded limits of shape; index is "
            f"{value} exceeded {limit}"
        )

    def _check_declared_values(self, values: Array) -> errors.InvalidArgumentError | None:
        declared = self.shape
        if declared is None:
            return None
        if values.ndim < len(declared):
            return _invalid(
                f"Shape mismatch: expected values rank at least {len(declared)}, got {values.ndim}"
            )
        for i in range(1, len(declared)):
            if declared[i] is not None and values.shape[i] != declared[i]:
                return _invalid(
                    f"Shape mismatch: expected values dim {i} to be {declared[i]}, got "
                    f"{values.shape[i]}"
                )
        return None

    # --- apply -----------------------------------------------------------------

    def apply(
        self,
        local_step: int,
        indices: Array,
        values: Array,
        gradient_shape: Array | None,
        owned: bool = False,
    ) -> None:
        """Merge a sparse gradient unless it is stale.

        ``owned`` says that ``values`` is a new array no one else holds (a
        conversion's result): its rows may then become the accumulator's own
        without another copy.

        Raises InvalidArgumentError for malformed input (whether or not stale)
        and, for a gradient that is not stale, for values whose shape differs
        from the round's. Nothing changes on error.
        """
        declared_error, increasing = self.check_gradient(indices, values, gradient_shape)
        index, rows, borrowed = normalize(indices, values, increasing)
        if self._compiled_dtype and sparse_kernel.load_pending(self.numpy_dtype, values.size):
            # the first load compiles for about a second: not while holding the lock
            sparse_kernel.load()
        with self._lock:
            if self._closed:
                raise missing_resource_error(self.label)
            state = self._round
            stale = local_step < self._global_step
            if not stale and state is not None:
                self._check_round_values(state.rows, values)
            if declared_error is not None:
                raise declared_error
            if stale:
                self._stale_locked()
                return
            if state is None:
                self._round = self._start_round(index, rows, borrowed, owned)
            else:
                self._merge(state, index, rows)
            self._accepted_locked()

    @staticmethod
    def _check_round_values(held: Array, values: Array) -> None:
        if values.ndim != held.ndim:
            raise _invalid(f"Shape mismatch: expected values rank {held.ndim}, got {values.ndim}")
        for i in range(1, held.ndim):
            if values.shape[i] != held.shape[i]:
                raise _invalid(
                    f"Shape mismatch: expected values dim {i} to be {held.shape[i]}, got "
                    f"{values.shape[i]}"
                )

    def _start_round(
        self, index: Array, rows: Array, borrowed: bool, rows_owned: bool
    ) -> SparseRound:
        k = index.shape[0]
        spare, self._spare = self._spare, None
        if (
            spare is not None
            and spare.rows.shape[0] >= k
            and spare.rows.shape[1:] == rows.shape[1:]
        ):
            buffer, counts = spare.rows, spare.counts
            np.copyto(buffer[:k], rows)
            counts[:k] = 1
        else:
            # the caller's arrays must not become the accumulator's (an owned
            # array, a conversion's result, may)
            own = np.array if borrowed and not rows_owned else np.ascontiguousarray
            buffer = own(rows, self.numpy_dtype)
            counts = np.ones(k, np.int64)
        slot = np.arange(k, dtype=np.int64)
        if self._first is None:
            return SparseRound(
                index=np.array(index, np.int64) if borrowed else index,
                slot=slot, keys=None, places=None,
                rows=buffer, counts=counts, used=k, in_order=True,
            )  # fmt: skip
        keys = np.left_shift(index, SLOT_BITS, dtype=np.int64)
        keys |= slot
        state = SparseRound(
            index=None, slot=None, keys=keys, places=None,
            rows=buffer, counts=counts, used=k, in_order=True,
        )  # fmt: skip
        if spare is not None and spare.places is not None:
            # entries up to the last round's largest are not this round's
            state.base = spare.top
            if state.base + self._first > MARK_LIMIT:
                # this round's entries could pass int32's range: start again
                spare.places.fill(0)
                state.base = 0
            state.places = spare.places
        if k:
            self._map_covering(state, int(index[-1]))
            if state.places is not None:
                state.places[index] = slot + (state.base + 1)
        return state

    def _map_covering(self, state: SparseRound, top: int) -> None:
        """Make sure the round's slot map reaches row ``top``, or that it has none.

        A map is made (or enlarged) only while it takes no more memory than the
        round's row buffer (see ``MAP_MIN_FILL``); it reaches the largest row
        index seen, with some room, not the whole first dimension.
        """
        assert self._first is not None and state.keys is not None
        places = state.places
        if places is not None and top < places.shape[0]:
            return
        keys = state.keys
        if keys.shape[0]:
            top = max(top, int(keys[-1]) >> SLOT_BITS)
        size = min(self._first, top + 1 + top // 4)
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

    def _merge(self, state: SparseRound, index: Array, rows: Array) -> None:
        """Merge a gradient's rows into the round.

        Everything that allocates comes first: a MemoryError leaves the round
        as it was (a grown buffer holds the same rows). Then the gradient's new
        rows go to free slots, which no one reads, and the held rows are added
        to last, with no allocation between that and publishing the new index.
        """
        if state.keys is not None:
            self._merge_keyed(state, index, rows)
            return
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
            self._add_to_held_rows(state, np.take(state.slot, position), rows)
            return
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
            self._grow(state, used + added)
        merged_index = np.insert(state.index, insert_at, new_index)
        merged_slot = np.insert(state.slot, insert_at, np.arange(used, used + added))
        in_order = state.in_order and bool(insert_at[0] == m)
        self._append_rows(state, rows, fresh_at)
        if some_found:
            self._add_to_held_rows(state, slots, hit)
        state.in_order = in_order
        state.index = merged_index
        state.slot = merged_slot
        state.used = used + added

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

    def _merge_keyed(self, state: SparseRound, index: Array, rows: Array) -> None:
        # allocations first, as in _merge
        assert state.keys is not None
        k = index.shape[0]
        if k:
            self._map_covering(state, int(index[-1]))
        kernels = self._claiming_loops(state, index, rows)
        if kernels is not None:
            self._merge_claimed(state, index, rows, kernels)
            return
        slots, fresh = self._find(state, index)
        fresh_at = np.flatnonzero(fresh)
        added = fresh_at.shape[0]
        if not added:
            self._add_to_held_rows(state, slots, rows)
            return
        used = state.used
        if used + added > state.rows.shape[0]:
            self._grow(state, used + added)
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
        if added == k:
            self._append_rows(state, rows, fresh_at)
        elif added * MOSTLY_HELD <= k or self._loops_for(state, slots, rows) is not None:
            # mostly rows the round holds: one gather, add and scatter over all
            # the gradient's rows (new rows get their slots, and their values
            # rather than a sum) costs less than splitting the gradient in two;
            # the compiled loop does any mix in one pass, with no gather
            np.put(slots, fresh_at, new_slots)
            state.counts[used : used + added] = 0
            self._add_to_held_rows(state, slots, rows, fresh_at, fresh)
        else:
            hit_at = np.flatnonzero(~fresh)
            hit_slots, hit = np.take(slots, hit_at), np.take(rows, hit_at, axis=0)
            self._append_rows(state, rows, fresh_at)
            self._add_to_held_rows(state, hit_slots, hit)
        if places is not None:
            places.put(new_index, marks)
        state.keys = keys
        state.in_order = in_order
        state.used = used + added

    def _claiming_loops(
        self, state: SparseRound, index: Array, rows: Array
    ) -> sparse_kernel.Kernels | None:
        """The compiled loops when the round has a slot map and they take the
        gradient's index (int64, C-contiguous, aligned) and rows, else None."""
        if state.places is None or not (index.flags.c_contiguous and index.flags.aligned):
            return None
        return self._loops_for(state, index, rows)

    def _merge_claimed(
        self, state: SparseRound, index: Array, rows: Array, kernels: sparse_kernel.Kernels
    ) -> None:
        """_merge_keyed for a round with a slot map, by the compiled loops.

        One loop finds the gradient's rows in the map, gives the new ones their
        slots and merges their keys into a new array, changing nothing but its
        own outputs (allocated first); the buffer grows if need be; then one
        loop writes the rows, their counts and the new rows' map entries,
        allocating nothing. Four numpy passes and a sort per apply become two
        loops: an apply of 1e4 rows of 64 float32 into 7e4 held ones spends
        about 0.75 ms there instead of 1 ms next to TensorFlow's.
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
            self._check_index_range(index)
            raise _invalid(
                "The gradient's indices changed while it was being applied: an index now "
                "lies past every row this round has seen; keep a gradient's arrays "
                "unchanged until its apply returns"
            )
        if used + added > state.rows.shape[0]:
            self._grow(state, used + added)
        width = math.prod(state.rows.shape[1:])
        buffer = state.rows.reshape(state.rows.shape[0], width)
        hit = rows.reshape(k, width)
        # the round's new state is made before the rows change: nothing after may fail
        round_keys = merged[: held + added] if added else keys
        # keys are distinct: the round's last key is still at held - 1 only if
        # every new key comes after it
        in_order = state.in_order and (not held or not added or bool(merged[held - 1] == keys[-1]))
        kernels.add_or_set_rows(
            buffer, state.counts, slots, hit, fresh, places, new_keys[:added], state.base + 1
        )
        state.keys, state.in_order, state.used = round_keys, in_order, used + added

    def _append_rows(self, state: SparseRound, rows: Array, fresh_at: Array) -> None:
        """Put ``rows[fresh_at]`` in the next free slots, counted once (``used`` stays)."""
        used = state.used
        added = fresh_at.shape[0]
        # np.take writes into `out` directly with mode="clip" (np.compress with
        # `out` is several times slower); the positions are valid by construction
        np.take(rows, fresh_at, axis=0, out=state.rows[used : used + added],
                mode="clip")  # fmt: skip
        state.counts[used : used + added] = 1

    @staticmethod
    def _grow(state: SparseRound, needed: int) -> None:
        capacity = max(needed, int(state.rows.shape[0] * GROWTH))
        rows = np.empty((capacity, *state.rows.shape[1:]), state.rows.dtype)
        np.copyto(rows[: state.used], state.rows[: state.used])
        counts = np.empty(capacity, np.int64)
        counts[: state.used] = state.counts[: state.used]
        state.rows, state.counts, state.items = rows, counts, None

    def _loops_for(
        self, state: SparseRound, slots: Array, hit: Array
    ) -> sparse_kernel.Kernels | None:
        """The compiled loops if they are loaded and take these arrays, else None."""
        kernels = sparse_kernel.loaded()
        if (
            kernels is not None
            and self._compiled_dtype
            and hit.dtype == state.rows.dtype
            and slots.dtype == np.int64
            and hit.flags.c_contiguous
            and hit.flags.aligned
            and state.rows.flags.c_contiguous
            and state.rows.flags.writeable
        ):
            return kernels
        return None

    def _add_to_held_rows(
        self,
        state: SparseRound,
        slots: Array,
        hit: Array,
        fresh_at: Array | None = None,
        fresh: Array | None = None,
    ) -> None:
        """Add ``hit[i]`` to the row of ``slots[i]``; the slots are distinct.

        The rows ``fresh_at`` (free slots; ``fresh`` marks them) are set to
        ``hit``'s rows instead. The new rows and counts are made aside and
        written back last by in-place array methods, which allocate nothing
        (or by the compiled loop, which allocates nothing either): a
        MemoryError changes nothing.
        """
        kernels = self._loops_for(state, slots, hit)
        if kernels is not None:
            width = math.prod(state.rows.shape[1:])
            rows = state.rows.reshape(state.rows.shape[0], width)
            hit = hit.reshape(hit.shape[0], width)
            if fresh is None:
                kernels.add_rows(rows, state.counts, slots, hit)
            else:
                kernels.add_or_set_rows(rows, state.counts, slots, hit, fresh, _NO_MAP, _NO_KEYS, 0)
            return
        counts = np.take(state.counts, slots)
        counts += 1
        if hit.size:
            items = self._held_items(state)
            held_items = np.take(items, slots)
            held = held_items.view(state.rows.dtype).reshape(hit.shape)
            self._add(held, hit)  # free slots hold garbage: quietly added, then replaced
            if fresh_at is not None:
                np.put(held_items, fresh_at, _rows_as_items(np.take(hit, fresh_at, axis=0)))
            items.put(slots, held_items)
        state.counts.put(slots, counts)

    # --- take ------------------------------------------------------------------

    apply_sparse = apply

    def _finish_round(self, state: SparseRound | None, count: int, serial: int) -> SparseTakeResult:
        assert state is not None
        used = state.used
        rows = state.rows[:used]
        if state.keys is not None:
            index = np.right_shift(state.keys, SLOT_BITS)
            order = None if state.in_order else np.bitwise_and(state.keys, SLOT_MASK)
        else:
            assert state.index is not None
            index, order = state.index, state.slot
        handed_over = state.in_order and used == state.rows.shape[0]
        if state.in_order:
            order = None  # the rows are in index order already
        mean = self.reduction_type == "MEAN" and rows.size > 0
        # MEAN rows gathered by the compiled loop are divided as they are gathered
        dividing = self._dividing_gather(state, order) if mean and order is not None else None
        divided = (
            mean and not handed_over and (dividing is not None or self._divide_held_rows(state))
        )
        if handed_over:
            values = state.rows  # already in index order and exactly full: handed over
        elif order is not None:
            values = _gather(rows, order, dividing)
        else:
            values = rows.copy()
        counts = state.counts[:used]
        if mean and not divided and not handed_over:
            # after the copy: a take that fails before it (no memory for the
            # result) puts back the round's rows as they were, undivided
            _divide_rows(values, counts if order is None else counts[order])
        result = SparseTakeResult(index, values, self._dense_shape(values.shape))
        # the round's buffers go to the next round only once its take can no
        # longer fail for want of memory (a failed take puts the round back)
        kept = values[:0].copy() if handed_over else state.rows
        with self._lock:
            if self._spare is None and not self._closed:
                # a handed-over buffer is the caller's now; the slot map stays ours
                self._spare = _Spare(kept, state.counts, state.places, state.base + state.used)
        if mean and handed_over:
            # the round's own rows, divided where they are: last, once nothing
            # else can fail, since a round put back must be undivided
            _divide_rows(values, counts, lambda: self._keep_for_taker(serial))
        return result

    def _dividing_gather(self, state: SparseRound, order: Array) -> tuple[Any, Array] | None:
        """(the compiled dividing gather, the round's counts) when the loops are
        loaded and take the round's rows and ``order``, else None."""
        # the round's counts are int64 and its rows of the accumulator's dtype
        kernels = sparse_kernel.loaded()
        rows = state.rows
        if (
            kernels is None
            or not self._compiled_dtype
            or not rows.flags.c_contiguous
            or not rows.flags.aligned
            or order.dtype != np.int64
        ):
            return None
        return kernels.gather_rows_dividing, state.counts

    def _divide_held_rows(self, state: SparseRound) -> bool:
        """MEAN: divide the round's rows counted more than once where they are
        held, before they are gathered into the result, when they are few; say
        whether that was done. A few rows divided here cost less than finding
        them again in index order (a gather of the counts and a pass over
        them). Their undivided values are kept in ``state.undivided`` for a
        take that fails after this, so the round goes back as it was."""
        counts = state.counts[: state.used]
        several = counts > 1
        many = np.count_nonzero(several)
        if many * 4 > counts.shape[0]:
            # divided in the result: two copies of them here would take more
            # memory than half the round's buffer
            return False
        if not many:
            return True
        picked = np.flatnonzero(several)
        items = self._held_items(state)
        saved = np.take(items, picked)
        part = saved.copy()
        tail = (1,) * (state.rows.ndim - 1)
        divide_in_place(
            part.view(state.rows.dtype).reshape((-1, *state.rows.shape[1:])),
            np.take(counts, picked).reshape((-1, *tail)),
        )
        # recorded before the rows change: a put back restores them either way
        state.undivided = (picked, saved)
        items.put(picked, part)
        return True

    def _dense_shape(self, values_shape: tuple[int, ...]) -> Array:
        declared = self.shape
        first = declared[0] if declared and declared[0] is not None else -1
        return np.array([first, *values_shape[1:]], np.int64)
