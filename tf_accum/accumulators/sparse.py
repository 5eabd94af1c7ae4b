"""The sparse accumulator: per-row sums of gradients given as (indices, values).

A round (all of it guarded by the base's lock) holds the row sums in order of
arrival and a count per row, and a row
index that finds a gradient's rows among them: the sorted row indices, the
slot of each, and a slot map while it is small enough (both in
tf_accum/accumulators/sparse_round.py). Rows
a gradient shares with the round are added in place; only the small index
arrays are merged (TensorFlow's kernel rebuilds all rows in index order on
every apply instead).

A take gathers the rows into index order once (a MEAN take with the compiled
loops of sparse_kernel divides each row as it gathers it; without them, the
rows counted more than once are divided in the result; rows already in index
order are copied, not gathered), then keeps the buffer for the next round:
memory that is already mapped, so applies do not pay for faulting in fresh
pages (which costs more than the arithmetic). When the rows arrived in index order and fill the buffer
exactly (a round of one gradient, say) the buffer itself is handed over
instead.
"""

from __future__ import annotations

from typing import Any, ClassVar, NamedTuple, Optional

import numpy as np

from tf_accum import errors
from tf_accum.accumulators import sparse_kernel
from tf_accum.accumulators.base import AccumulatorBase, AccumulatorSpec, missing_resource_error
from tf_accum.accumulators.division import COPY_MAX_BYTES
from tf_accum.accumulators.sparse_round import (
    HeldRows,
    KeptBuffers,
    RoundWrites,
    RowIndex,
    SparseRound,
    divide_rows,
    gather,
    normalize,
)

Array = np.ndarray[Any, Any]

__all__ = ["SparseAccumulator", "SparseTakeResult", "normalize"]


class SparseTakeResult(NamedTuple):
    """What a sparse take returns; field names are TensorFlow's."""

    indices: Array
    values: Array
    shape: Array

    def to_scipy(self, format: str = "csr") -> Any:
        """The take as a SciPy sparse array of the accumulator's dense shape.

        See :func:`tf_accum.scipy_export.rows_to_scipy` (SciPy is imported then).
        """
        from tf_accum.scipy_export import rows_to_scipy

        return rows_to_scipy(self.indices, self.values, self.shape, format)


def _invalid(message: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, message)


def _text(shape: tuple[int, ...]) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


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
        self._held = HeldRows(self.numpy_dtype)
        self._round = None
        # the writes of the last merged gradient, until they have run whole
        self._unwritten: RoundWrites | None = None
        # the last round's buffers, kept for the next round
        self._kept_buffers: KeptBuffers | None = None
        first = spec.shape[0] if spec.shape else None
        self._index = RowIndex(first, self._held, self._check_index_range)

    def _detach_round_locked(self) -> SparseRound | None:
        self._write_locked()
        # a buffer waiting since before this round is dropped (and on destroy)
        self._kept_buffers = None
        return self._round

    def _before_attach_locked(self, state: SparseRound | None) -> None:
        # the kept buffers may be made from this round (a take changes no
        # round's rows while it can still go back: see _finish_round)
        self._kept_buffers = None

    def _merge_round_locked(self, state: SparseRound | None, count: int, serial: int) -> bool:
        if state is not None and state.reused:
            # its rows were overwritten by the round that took over its buffers
            return False
        self._write_locked()
        self._kept_buffers = None  # as in _before_attach_locked
        current = self._round
        merged = state
        if current is not None:
            merged = _merged_rounds(self._index, current, state)
            if merged is None:
                return False  # rows of another shape (none was declared)
        self._round, self._count, self._given_back[serial] = merged, self._count + count, True
        return True

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
        increasing = indices.size < 2 or bool((indices[1:] > indices[:-1]).all())
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
        if self._held.compiled and sparse_kernel.load_pending(self.numpy_dtype, values.size):
            # the first load compiles the loops, which is slow: not while holding the lock
            sparse_kernel.load()
        with self._lock:
            if self._closed:
                raise missing_resource_error(self.label)
            self._write_locked()
            state = self._round
            stale = local_step < self._global_step
            if not stale and state is not None:
                self._check_round_values(state.rows, values)
            if declared_error is not None:
                raise declared_error
            if stale:
                self._stale_locked()
                return
            count, accepted = self._count + 1, self._n_accepted + 1
            if state is None:
                start = self._start_round(index, rows, borrowed, owned)
                self._round, self._count, self._n_accepted = start, count, accepted
            else:
                writes = self._index.merge(state, index, rows)  # changes nothing yet
                # committed: counted, and its writes due before anyone reads the round
                self._count, self._n_accepted, self._unwritten = count, accepted, writes
                try:
                    self._write_locked()
                except Exception:
                    # the writes failed of themselves (no memory for the compiled
                    # loop's arguments, say) before writing: its first write is
                    # that loop, or array methods that allocate nothing
                    self._count, self._n_accepted, self._unwritten = count - 1, accepted - 1, None
                    raise
            if self._waiting:
                self._flush_locked()

    def _write_locked(self) -> None:
        """Run the writes of a merged gradient that an exception cut short, if
        any (they may run again: see sparse_round.RoundWrites)."""
        writes = self._unwritten
        if writes is not None:
            writes()
            self._unwritten = None

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
        kept_buffers, self._kept_buffers = self._kept_buffers, None
        if (
            kept_buffers is not None
            and kept_buffers.rows.shape[0] >= k
            and kept_buffers.rows.shape[1:] == rows.shape[1:]
        ):
            buffer, counts = kept_buffers.rows, kept_buffers.counts
            kept_buffers.source.reused = True
            np.copyto(buffer[:k], rows)
            counts[:k] = 1
        else:
            # the caller's arrays must not become the accumulator's (an owned
            # array, a conversion's result, may)
            own = np.array if borrowed and not rows_owned else np.ascontiguousarray
            buffer = own(rows, self.numpy_dtype)
            counts = np.ones(k, np.int64)
        return self._index.start(index, borrowed, buffer, counts, kept_buffers)

    # --- take ------------------------------------------------------------------

    apply_sparse = apply

    def _finish_round(self, state: SparseRound | None, count: int, serial: int) -> SparseTakeResult:
        assert state is not None
        index, order = self._index.take_order(state)
        # exactly full and in index order: the buffer itself is the result
        handed_over = state.in_order and state.used == state.rows.shape[0]
        mean = self.reduction_type == "MEAN" and state.rows[: state.used].size > 0
        values = state.rows if handed_over else self._gathered(state, order, mean)
        result = SparseTakeResult(index, values, self._dense_shape(values.shape))
        # the round's buffers go to the next round only once its take can no
        # longer fail for want of memory (a failed take puts the round back)
        self._keep_buffers(state, values[:0].copy() if handed_over else state.rows)
        if mean and handed_over:
            counts = state.counts[: state.used]
            if values.nbytes < COPY_MAX_BYTES:
                # divided in a copy: the round stays as it was until the take returns
                values = values.copy()
                divide_rows(values, counts)
                return SparseTakeResult(index, values, result.shape)
            # the round's own rows, divided where they are: last, once nothing
            # else can fail, since a round put back must be undivided
            divide_rows(values, counts, lambda: self._keep_for_taker(serial))
        return result

    def _gathered(self, state: SparseRound, order: Array | None, mean: bool) -> Array:
        """The round's rows in index order (``order``: their slots, None when
        they are in order already) in a new array, divided by their counts
        for a MEAN. The round does not change."""
        used = state.used
        rows, counts = state.rows[:used], state.counts[:used]
        values: Array
        if order is None:
            values = rows.copy()
        else:
            # MEAN rows gathered by the compiled loop are divided as they are gathered
            dividing = self._held.dividing_gather(state, order) if mean else None
            values = gather(rows, order, dividing)
            if dividing is not None:
                return values
        if mean:
            divide_rows(values, counts if order is None else np.take(counts, order))
        return values

    def _keep_buffers(self, state: SparseRound, kept: Array) -> None:
        """Keep the round's buffers (``kept``: its rows, or an empty array when
        the buffer was handed over) for the next round; the slot map stays ours."""
        with self._lock:
            if self._kept_buffers is None and not self._closed:
                self._kept_buffers = KeptBuffers(
                    kept, state.counts, state.places, state.base + state.used, state
                )

    def _dense_shape(self, values_shape: tuple[int, ...]) -> Array:
        declared = self.shape
        first = declared[0] if declared and declared[0] is not None else -1
        return np.array([first, *values_shape[1:]], np.int64)


def _merged_rounds(
    index: RowIndex, current: SparseRound, served: SparseRound | None
) -> SparseRound | None:
    """A new round holding the rows of ``current`` and of the round
    ``served`` (given back by its take), each row summed (``current``'s
    first) and counted over both; None when their rows' shapes differ.
    Neither round changes."""
    if served is None:
        return current
    if served.rows.shape[1:] != current.rows.shape[1:]:
        return None
    parts = []
    for state in (current, served):
        order_index, order = index.take_order(state)
        rows, counts = state.rows[: state.used], state.counts[: state.used]
        if order is not None:
            rows, counts = np.take(rows, order, axis=0), np.take(counts, order)
        parts.append((order_index, rows, counts))
    (now_index, now_rows, now_counts), (old_index, old_rows, old_counts) = parts
    merged = index.start(now_index, True, np.array(now_rows), np.array(now_counts), None)
    # the served round's rows are merged as a gradient's, which counts each once
    index.merge(merged, old_index, old_rows)()
    at = np.take(merged.slot, np.searchsorted(merged.index, old_index))
    merged.counts[at] += old_counts - 1
    return merged
