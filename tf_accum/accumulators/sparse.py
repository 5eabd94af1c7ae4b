"""The sparse accumulator: per-row sums of gradients given as (indices, values).

State of a round (all guarded by the base's lock):

- ``_index``: the touched row indices, sorted and unique (int64, length m);
- ``_slot``: for each entry of ``_index``, the row of ``_rows`` holding its sum;
- ``_rows``: an append-only buffer of row sums, in first-touch order, with
  spare capacity so that appending is amortised O(rows added);
- ``_counts``: per slot, how many gradients touched that row.

A gradient's rows that are already present are added in place; new rows are
appended, and only the small index arrays are merged. No apply ever copies the
rows accumulated so far (TensorFlow's kernel rebuilds them on every apply), and
a take gathers them into index order once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple, Optional

import numpy as np

from tf_accum import errors
from tf_accum.accumulators.arithmetic import divide_in_place, in_place_adder
from tf_accum.accumulators.base import AccumulatorBase, AccumulatorSpec, missing_resource_error

Array = np.ndarray[Any, Any]
_GROWTH = 1.5


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


def _invalid(message: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, message)


def _text(shape: tuple[int, ...]) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


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
        rows = np.add.reduceat(rows, starts, axis=0)
    return ordered[starts], rows, False


class SparseAccumulator(AccumulatorBase[Optional[SparseRound]]):  # noqa: UP045
    """Accumulates sparse gradients row by row; a take returns (indices, values, shape).

    MEAN divides each row by the number of gradients that touched it; SUM does
    not divide.
    """

    kind: ClassVar[str] = "sparse"

    def __init__(self, spec: AccumulatorSpec, label: str) -> None:
        super().__init__(spec, label)
        self._numpy_dtype = spec.dtype.numpy_dtype
        self._add = in_place_adder(self._numpy_dtype)
        self._round: SparseRound | None = None

    def _detach_round_locked(self) -> SparseRound | None:
        state, self._round = self._round, None
        return state

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
        # the caller's arrays must not become the accumulator's
        own = np.array if borrowed else np.asarray
        return SparseRound(
            index=own(index, np.int64),
            slot=np.arange(k, dtype=np.int64),
            rows=own(rows, self._numpy_dtype),
            counts=np.ones(k, np.int64),
            used=k,
        )

    def _merge(self, state: SparseRound, index: Array, rows: Array) -> None:
        m = state.index.shape[0]
        position = np.searchsorted(state.index, index)
        found = position < m
        found[found] = state.index[position[found]] == index[found]
        if found.any():
            slots = state.slot[position[found]]
            hit = rows[found] if not found.all() else rows
            state.rows[slots] = self._sum_rows(state.rows[slots], hit)
            state.counts[slots] += 1
        if found.all():
            return
        fresh = ~found
        new_index = index[fresh]
        added = new_index.shape[0]
        used = state.used
        self._reserve(state, used + added)
        state.rows[used : used + added] = rows[fresh]
        state.counts[used : used + added] = 1
        state.used = used + added
        insert_at = position[fresh]
        state.index = np.insert(state.index, insert_at, new_index)
        state.slot = np.insert(state.slot, insert_at, np.arange(used, used + added))

    def _sum_rows(self, held: Array, added: Array) -> Array:
        self._add(held, added)
        return held

    @staticmethod
    def _reserve(state: SparseRound, needed: int) -> None:
        capacity = state.rows.shape[0]
        if needed <= capacity:
            return
        grown = max(needed, int(capacity * _GROWTH) + 1)
        rows = np.empty((grown, *state.rows.shape[1:]), state.rows.dtype)
        rows[: state.used] = state.rows[: state.used]
        counts = np.empty(grown, np.int64)
        counts[: state.used] = state.counts[: state.used]
        state.rows, state.counts = rows, counts

    # --- take ------------------------------------------------------------------

    def _finish_round(self, state: SparseRound | None, count: int) -> SparseTakeResult:
        assert state is not None
        in_order = state.used == state.rows.shape[0] and bool(
            np.array_equal(state.slot, np.arange(state.used))
        )
        values = state.rows if in_order else state.rows[state.slot]
        if self.reduction_type == "MEAN":
            counts = state.counts[: state.used] if in_order else state.counts[state.slot]
            divide_in_place(values, counts.reshape((-1,) + (1,) * (values.ndim - 1)))
        return SparseTakeResult(state.index, values, self._dense_shape(values.shape))

    def _dense_shape(self, values_shape: tuple[int, ...]) -> Array:
        declared = self.shape
        first = declared[0] if declared and declared[0] is not None else -1
        return np.array([first, *values_shape[1:]], np.int64)
