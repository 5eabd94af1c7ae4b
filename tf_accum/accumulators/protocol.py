"""What the raw ops may ask of an accumulator, wherever it lives.

The raw ops see accumulators only through this protocol, so an accumulator
held in another process (a distributed table's proxy) serves them exactly as
an in-process one does. It carries the spec and the operations, nothing else:
no lock, no buffers, no queue.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from tf_accum.accumulators.attempts import Cancellation
from tf_accum.accumulators.spec import AccumulatorSpec

Array = np.ndarray[Any, Any]


class Accumulator(Protocol):
    """An accumulator as the raw ops use it.

    Errors are ``tf_accum.errors`` classes: NotFoundError once destroyed,
    InvalidArgumentError for a gradient that does not fit.
    """

    @property
    def spec(self) -> AccumulatorSpec:
        """Kind, dtype, declared shape and reduction, fixed at creation."""

    @property
    def label(self) -> str:
        """``container/name``, as resource messages print it."""

    def apply_dense(self, local_step: int, gradient: Array, owned: bool = False) -> None:
        """Merge a dense gradient of the accumulator's dtype unless it is stale.

        ``owned``: the gradient is a new array no one else holds, which an
        in-process accumulator may keep instead of copying (a remote one ignores it).
        """

    def apply_sparse(
        self,
        local_step: int,
        indices: Array,
        values: Array,
        gradient_shape: Array | None,
        owned: bool = False,
    ) -> None:
        """Merge a sparse gradient (int64 indices, values of the dtype) unless it is stale.

        ``owned``: as for :meth:`apply_dense`, about ``values``.
        """

    def take(
        self,
        num_required: int,
        timeout: float | None = None,
        cancellation: Cancellation | None = None,
    ) -> Any:
        """Wait for ``num_required`` gradients, take them all, return the round's result.

        A dense result is an ndarray; a sparse one a ``SparseTakeResult``. A take
        that times out or is cancelled is withdrawn and consumes nothing.
        """

    def num_accumulated(self) -> int:
        """Gradients accepted since the last completed take."""

    def set_global_step(self, new_global_step: int) -> None:
        """Set the int64 global step (a lower value too)."""

    def num_waiting(self) -> int:
        """Takes waiting now."""

    def stats(self) -> dict[str, int | None]:
        """A consistent snapshot of the counters (a plain dict of ints and None).

        Keys: accepted, stale, rejected, takes_served, takes_timed_out,
        takes_cancelled, takes_interrupted, waiting, head_num_required (None
        when nobody waits), num_accumulated, global_step. See
        :func:`tf_accum.accumulator_stats`. Reading them holds up no apply or
        take for longer than copying them.
        """
