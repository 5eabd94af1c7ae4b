"""The sparse accumulator: per-row sums of gradients given as (indices, values).

State of a round (all guarded by the base's lock):

- ``index``: the touched row indices, sorted and unique (int64, length m);
- ``slot``: for each entry of ``index``, the number of the row holding its sum;
- ``rows``: the row sums, in order of arrival: each apply appends its new rows
  at ``used`` (TensorFlow's kernel rebuilds all rows in index order on every
  apply instead); the buffer has spare capacity and grows by a quarter when
  full;
- ``counts``: how many gradients touched each row (same order as ``rows``).

Rows a gradient shares with the round are added in place; only the small
index arrays are merged. A take divides the rows in place and gathers them
into index order once, then keeps the buffer for the next round: memory that
is already mapped, so applies do not pay for faulting in fresh pages (which
costs more than the arithmetic). When the rows arrived in index order and fill
the buffer exactly (a round of one gradient, say) the buffer itself is handed
over instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple, Optional

import numpy as np

from tf_accum import errors
from tf_accum.accumulators.arithmetic import (
    COPY_PARALLEL_MIN_ELEMENTS,
    divide_in_place,
    in_place_adder,
    split_elementwise,
)
from tf_accum.accumulators.base import AccumulatorBase, AccumulatorSpec, missing_resource_error

Array = np.ndarray[Any, Any]
GROWTH = 1.25  # spare capacity when the row buffer grows


class SparseTakeResult(NamedTuple):
    """What a sparse take returns; field names are TensorFlow's."""

    indices: Array
    values: Array
    shape: Array


@dataclass
class SparseRound:
    index: Array
    slot: Array
    rows: Array
    counts: Array
    used: int
    in_order: bool  # slot is arange(used): rows are in index order


def _invalid(message: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, message)


def _text(shape: tuple[int, ...]) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


def _divide_rows(rows: Array, counts: Array) -> None:
    """Divide each row by its count, in place. Rows touched once are left alone:
    dividing by 1 changes nothing, and with scattered updates most rows are."""
    several = counts > 1
    if not several.any():
        return
    tail = (1,) * (rows.ndim - 1)
    if several.all():
        divide_in_place(rows, counts.reshape((-1, *tail)))
        return
    picked = np.flatnonzero(several)
    part = np.take(rows, picked, axis=0)
    divide_in_place(part, counts[picked].reshape((-1, *tail)))
    rows[picked] = part


def normalize(indices: Array, values: Array) -> tuple[Array, Array, bool]:
    """Sort a gradient's rows by index and sum duplicate indices (decisions T5).

    Returns (unique sorted indices, their rows, whether the rows are the
    caller's own array, unchanged). Already sorted unique indices cost one
    O(k) comparison.
    """
    if indices.size < 2 or bool(np.all(indices[1:] > indices[:-1])):
        return indices, values, True
    order = np.argsort(indices, kind="stable")
    ordered = indices[order]
    starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
    rows = values[order]
    if starts.size != ordered.size:
        # numpy's add reductions widen integers narrower than 64 bits to
        # int64/uint64; duplicates must wrap in the gradient's own dtype.
        rows = np.add.reduceat(rows, starts, axis=0, dtype=rows.dtype)
    return ordered[starts], rows, False


def _rows_as_items(rows: Array) -> Array:
    """``rows`` (C-contiguous) as a 1-D array with one opaque item per row:
    numpy moves such items several times faster than rows of a 2-D array."""
    return rows.reshape(rows.shape[0], -1).view(np.dtype((np.void, rows[0].nbytes))).reshape(-1)


def _gather(rows: Array, order: Array) -> Array:
    """``rows[order]`` in a new array; several threads share large gathers."""
    values = np.empty((order.shape[0], *rows.shape[1:]), rows.dtype)
    if values.size < COPY_PARALLEL_MIN_ELEMENTS:
        np.take(rows, order, axis=0, out=values, mode="clip")  # "raise" would buffer `out`
    else:
        split_elementwise(
            lambda out, picked: np.take(rows, picked, axis=0, out=out, mode="clip"),
            (values, order),
            COPY_PARALLEL_MIN_ELEMENTS,
        )
    return values


class SparseAccumulator(AccumulatorBase[Optional[SparseRound]]):  # noqa: UP045
    """Accumulates sparse gradients row by row; a take returns (indices, values, shape).

    MEAN divides each row by the number of gradients that touched it; SUM does
    not divide.
    """

    kind: ClassVar[str] = "sparse"

    def __init__(self, spec: AccumulatorSpec, label: str) -> None:
        super().__init__(spec, label)
        self._add = in_place_adder(self.numpy_dtype)
        self._round: SparseRound | None = None
        # the last round's row buffer (and counts), kept for the next round
        self._spare: tuple[Array, Array] | None = None

    def _detach_round_locked(self) -> SparseRound | None:
        state, self._round = self._round, None
        # a buffer waiting since before this round is dropped (and on destroy)
        self._spare = None
        return state

    def _attach_round_locked(self, state: SparseRound | None) -> None:
        self._round = state

    # --- validation that needs no state (decisions T7: stale gradients too) ----

    def check_gradient(
        self, indices: Array, values: Array, gradient_shape: Array | None
    ) -> errors.InvalidArgumentError | None:
        """Raise for a malformed gradient; return (not raise) a declared-values error.

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
        self._check_index_range(indices)
        return self._check_declared_values(values)

    def _check_index_range(self, indices: Array) -> None:
        if not indices.size:
            return
        limit = self.shape[0] if self.shape else None
        # two reductions clear the common case without temporary arrays
        if indices.min() >= 0 and (limit is None or indices.max() < limit):
            return
        bad = indices < 0
        if limit is not None:
            bad |= indices >= limit
        if not bad.any():
            return
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
        self, local_step: int, indices: Array, values: Array, gradient_shape: Array | None
    ) -> None:
        """Merge a sparse gradient unless it is stale.

        Raises InvalidArgumentError for malformed input (whether or not stale)
        and, for a gradient that is not stale, for values whose shape differs
        from the round's. Nothing changes on error.
        """
        declared_error = self.check_gradient(indices, values, gradient_shape)
        index, rows, borrowed = normalize(indices, values)
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
                self._round = self._start_round(index, rows, borrowed)
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

    def _start_round(self, index: Array, rows: Array, borrowed: bool) -> SparseRound:
        k = index.shape[0]
        spare, self._spare = self._spare, None
        if spare is not None and spare[0].shape[0] >= k and spare[0].shape[1:] == rows.shape[1:]:
            buffer, counts = spare
            np.copyto(buffer[:k], rows)
            counts[:k] = 1
        else:
            # the caller's arrays must not become the accumulator's
            own = np.array if borrowed else np.ascontiguousarray
            buffer = own(rows, self.numpy_dtype)
            counts = np.ones(k, np.int64)
        return SparseRound(
            index=np.array(index, np.int64) if borrowed else index,
            slot=np.arange(k, dtype=np.int64),
            rows=buffer,
            counts=counts,
            used=k,
            in_order=True,
        )

    def _merge(self, state: SparseRound, index: Array, rows: Array) -> None:
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
        if all_found or found.any():
            slots = np.take(state.slot, position if all_found else position[found])
            hit = rows if all_found else np.compress(found, rows, axis=0)
            self._add_to_held_rows(state, slots, hit)
        if all_found:
            return
        fresh_at = np.flatnonzero(~found)
        new_index = np.take(index, fresh_at)
        added = new_index.shape[0]
        insert_at = np.take(position, fresh_at)
        used = state.used
        if used + added > state.rows.shape[0]:
            self._grow(state, used + added)
        # np.take writes into `out` directly with mode="clip" (np.compress with
        # `out` is several times slower); the positions are valid by construction
        np.take(rows, fresh_at, axis=0, out=state.rows[used : used + added],
                mode="clip")  # fmt: skip
        state.counts[used : used + added] = 1
        state.in_order = state.in_order and bool(insert_at[0] == m)
        state.index = np.insert(state.index, insert_at, new_index)
        state.slot = np.insert(state.slot, insert_at, np.arange(used, used + added))
        state.used = used + added

    @staticmethod
    def _grow(state: SparseRound, needed: int) -> None:
        capacity = max(needed, int(state.rows.shape[0] * GROWTH))
        rows = np.empty((capacity, *state.rows.shape[1:]), state.rows.dtype)
        np.copyto(rows[: state.used], state.rows[: state.used])
        counts = np.empty(capacity, np.int64)
        counts[: state.used] = state.counts[: state.used]
        state.rows, state.counts = rows, counts

    def _add_to_held_rows(self, state: SparseRound, slots: Array, hit: Array) -> None:
        """Add ``hit[i]`` to the row of ``slots[i]``; the slots are distinct."""
        held = np.take(state.rows, slots, axis=0)
        self._add(held, hit)
        if held.size:
            _rows_as_items(state.rows)[slots] = _rows_as_items(held)
        state.counts[slots] += 1

    # --- take ------------------------------------------------------------------

    apply_sparse = apply

    def _finish_round(self, state: SparseRound | None, count: int) -> SparseTakeResult:
        assert state is not None
        used = state.used
        rows = state.rows[:used]
        if self.reduction_type == "MEAN":
            _divide_rows(rows, state.counts[:used])
        if state.in_order and used == state.rows.shape[0]:
            values = state.rows  # already in index order and exactly full: handed over
        else:
            values = _gather(rows, state.slot) if not state.in_order else rows.copy()
            with self._lock:
                if self._spare is None and not self._closed:
                    self._spare = (state.rows, state.counts)
        return SparseTakeResult(state.index, values, self._dense_shape(values.shape))

    def _dense_shape(self, values_shape: tuple[int, ...]) -> Array:
        declared = self.shape
        first = declared[0] if declared and declared[0] is not None else -1
        return np.array([first, *values_shape[1:]], np.int64)
