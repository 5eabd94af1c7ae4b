"""Starting a take op without waiting: its attempt is queued in the
accumulator (Rounds.try_take) and its callback says when it is served, so
that an executor can wait on many takes with no thread per take."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tf_accum.accumulators.attempts import Cancellation
from tf_accum.accumulators.rounds import Rounds
from tf_accum.accumulators.sparse import SparseTakeResult
from tf_accum.raw_ops import _lookup
from tf_accum.raw_ops.arguments import positive_num_required

# the take ops: their accumulator kind and outputs (as check_take_dtype spells them)
TAKE_OPS = {
    "AccumulatorTakeGradient": ("dense", "{}"),
    "ResourceAccumulatorTakeGradient": ("dense", "{}"),
    "SparseAccumulatorTakeGradient": ("sparse", "int64, {}, int64"),
}


class StartedTake:
    """A take op whose attempt is queued in its accumulator."""

    __slots__ = ("accumulator", "attempt", "sparse")

    def __init__(self, accumulator: Rounds[Any], attempt: Any, sparse: bool) -> None:
        self.accumulator = accumulator
        self.attempt = attempt
        self.sparse = sparse

    def collect(self) -> tuple[Any, ...]:
        """The op's outputs, once its attempt is served (or its error)."""
        result = self.accumulator.collect(self.attempt)
        if self.sparse:
            taken: SparseTakeResult = result
            return tuple(taken)
        return (result,)

    def give_up(self, reason: str) -> bool:
        """Withdraw the attempt, or give back the round it was served; says
        whether it consumed nothing (see Rounds.cancel)."""
        return self.accumulator.cancel(self.attempt, reason)


def start_take(
    op_type: str,
    handle: Any,
    num_required: Any,
    dtype: Any,
    callback: Callable[[], Any],
    cancellation: Cancellation | None,
) -> StartedTake | None:
    """Queue the take op ``op_type``'s attempt; ``callback()`` is called once
    it is served or cancelled (with the accumulator's lock held: see
    Rounds.try_take). None when the accumulator is not in this process (the
    op then runs as a blocking call).

    Raises:
        as the op does before it waits (unknown handle, wrong dtype, bad num_required).
    """
    kind, outputs = TAKE_OPS[op_type]
    accumulator = _lookup.accumulator(handle, op_type, kind)
    if not isinstance(accumulator, Rounds):
        return None
    _lookup.check_take_dtype(accumulator, dtype, op_type, outputs)
    required = positive_num_required(num_required)
    attempt = accumulator.try_take(required, callback, cancellation)
    return StartedTake(accumulator, attempt, kind == "sparse")
