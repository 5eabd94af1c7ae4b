"""The sparse accumulator: per-row sums of gradients given as (indices, values).

State of a round (all guarded by the base's lock):

- ``index``: the touched row indices, sorted and unique (int64, length m);
- ``slot``: for each entry of ``index``, the number of the row holding its sum;
- ``chunks``: the row sums, in blocks: each apply appends its new rows as one
  block (slots ``starts[c]`` onwards), so no apply ever copies the rows
  accumulated so far (TensorFlow's kernel rebuilds them all on every apply);
  blocks are joined when there are more than ``MAX_CHUNKS``;
- ``counts``: per block, how many gradients touched each row.

Rows a gradient shares with the round are added in place; only the small
index arrays are merged. A take divides each block in place and scatters it
into index order once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple, Optional

import numpy as np

from tf_accum import errors
from tf_accum.accumulators.arithmetic import divide_in_place, in_place_adder
from tf_accum.accumulators.base import AccumulatorBase, AccumulatorSpec, missing_resource_error

Array = np.ndarray[Any, Any]
MAX_CHUNKS = 16


class SparseTakeResult(NamedTuple):
    """What a sparse take returns; field names are TensorFlow's."""

    indices: Array
    values: Array
    shape: Array


@dataclass
class SparseRound:
    index: Array
    slot: Array
    chunks: list[Array]
    counts: list[Array]
    starts: list[int]
    used: int


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
        self._add = in_place_adder(self.numpy_dtype)
        self._round: SparseRound | None = None

    def _detach_round_locked(self) -> SparseRound | None:
        state, self._round = self._round, None
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
                self._check_round_values(state.chunks[0], values)
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
        # the caller's arrays must not become the accumulator's
        own = np.array if borrowed else np.asarray
        return SparseRound(
            index=own(index, np.int64),
            slot=np.arange(k, dtype=np.int64),
            chunks=[own(rows, self.numpy_dtype)],
            counts=[np.ones(k, np.int64)],
            starts=[0],
            used=k,
        )

    def _merge(self, state: SparseRound, index: Array, rows: Array) -> None:
        # np.take / np.compress gather whole rows several times faster than
        # fancy or boolean indexing on 2-D arrays.
        m = state.index.shape[0]
        position = np.searchsorted(state.index, index)
        found = position < m
        found[found] = state.index[position[found]] == index[found]
        all_found = bool(found.all())
        if all_found or found.any():
            slots = np.take(state.slot, position if all_found else position[found])
            hit = rows if all_found else np.compress(found, rows, axis=0)
            self._add_to_held_rows(state, slots, hit)
        if all_found:
            return
        fresh = ~found
        new_index = index[fresh]
        added = new_index.shape[0]
        insert_at = position[fresh]
        state.index = np.insert(state.index, insert_at, new_index)
        state.slot = np.insert(state.slot, insert_at, np.arange(state.used, state.used + added))
        state.chunks.append(np.compress(fresh, rows, axis=0))
        state.counts.append(np.ones(added, np.int64))
        state.starts.append(state.used)
        state.used += added
        if len(state.chunks) > MAX_CHUNKS:
            state.chunks = [np.concatenate(state.chunks)]
            state.counts = [np.concatenate(state.counts)]
            state.starts = [0]

    def _add_to_held_rows(self, state: SparseRound, slots: Array, hit: Array) -> None:
        """Add ``hit[i]`` to the row of ``slots[i]``; the slots are distinct."""
        if len(state.chunks) == 1:
            groups = [(0, slots, hit)]
        else:
            chunk_of = np.searchsorted(np.array(state.starts), slots, side="right") - 1
            order = np.argsort(chunk_of, kind="stable")
            bounds = np.searchsorted(chunk_of[order], np.arange(len(state.chunks) + 1))
            groups = []
            for c in range(len(state.chunks)):  # a loop over blocks, never rows
                lo, hi = bounds[c], bounds[c + 1]
                if lo < hi:
                    pick = order[lo:hi]
                    groups.append((c, slots[pick] - state.starts[c], np.take(hit, pick, axis=0)))
        for c, local, added in groups:
            chunk = state.chunks[c]
            held = np.take(chunk, local, axis=0)
            self._add(held, added)
            chunk[local] = held
            state.counts[c][local] += 1

    # --- take ------------------------------------------------------------------

    apply_sparse = apply

    def _finish_round(self, state: SparseRound | None, count: int) -> SparseTakeResult:
        assert state is not None
        if self.reduction_type == "MEAN":
            for chunk, counts in zip(state.chunks, state.counts, strict=True):
                _divide_rows(chunk, counts)
        if len(state.chunks) == 1 and bool(np.array_equal(state.slot, np.arange(state.used))):
            values = state.chunks[0]
        else:
            # every slot holds exactly one index entry: scatter each block into
            # the entry's place in index order
            place = np.empty(state.used, np.int64)
            place[state.slot] = np.arange(state.used)
            first = state.chunks[0]
            values = np.empty((state.used, *first.shape[1:]), first.dtype)
            for chunk, start in zip(state.chunks, state.starts, strict=True):
                values[place[start : start + chunk.shape[0]]] = chunk
        return SparseTakeResult(state.index, values, self._dense_shape(values.shape))

    def _dense_shape(self, values_shape: tuple[int, ...]) -> Array:
        declared = self.shape
        first = declared[0] if declared and declared[0] is not None else -1
        return np.array([first, *values_shape[1:]], np.int64)
