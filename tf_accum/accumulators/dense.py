"""The dense accumulator: one running sum of same-shaped gradients."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, Optional

import numpy as np

from tf_accum import errors
from tf_accum.accumulators.arithmetic import (
    RoundSum,
    divide_in_place,
    start_sum,
    sum_adder,
    sum_result,
)
from tf_accum.accumulators.base import AccumulatorBase, AccumulatorSpec, missing_resource_error
from tf_accum.shapes import is_compatible, kernel_text

_Sum = Optional[RoundSum]  # noqa: UP045 - runtime alias on 3.10


def _shape_mismatch(expected: str, got: tuple[int, ...]) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(
        None, None, f"Shape mismatch: expected {expected}, got {kernel_text(got)}"
    )


class DenseAccumulator(AccumulatorBase[_Sum]):
    """Sums gradients in place; a take returns the sum or the mean.

    The first gradient of a round is copied (and fixes the round's shape); each
    later one is added in place, so applying allocates nothing after the first.
    A completed take hands the sum buffer itself to the taker, which divides it
    outside the lock. (float16 and bfloat16 sums are kept in float32 and
    rounded per add: see arithmetic.start_sum.)
    """

    kind: ClassVar[str] = "dense"

    _sum: _Sum = None

    def _detach_round_locked(self) -> _Sum:
        total, self._sum = self._sum, None
        return total

    def _attach_round_locked(self, state: _Sum) -> None:
        self._sum = state

    def __init__(self, spec: AccumulatorSpec, label: str) -> None:
        super().__init__(spec, label)
        self._add: Callable[[Any, np.ndarray[Any, Any]], None] = sum_adder(self.numpy_dtype)
        declared = spec.shape
        self._exact_shape = declared if declared is not None and None not in declared else None

    def _fits_declared(self, shape: tuple[int, ...]) -> bool:
        if self._exact_shape is not None:
            return shape == self._exact_shape
        return is_compatible(self.shape, shape)

    def apply(self, local_step: int, gradient: np.ndarray[Any, Any]) -> None:
        """Merge ``gradient`` unless it is stale (``local_step`` below the global step).

        The caller has checked the dtype. Raises InvalidArgumentError when the
        shape does not fit the declared shape, or, for a gradient that is not
        stale, the shape fixed by the round's first gradient. Nothing changes on error.
        """
        shape = gradient.shape
        with self._lock:
            if self._closed:
                raise missing_resource_error(self.label)
            total = self._sum
            if local_step >= self._global_step:
                if total is not None:
                    # the round's shape already fits the declared one
                    if total.shape != shape:
                        self._n_rejected += 1
                        raise _shape_mismatch(kernel_text(total.shape), shape)
                    self._add(total, gradient)
                else:
                    if not self._fits_declared(shape):
                        self._n_rejected += 1
                        raise _shape_mismatch(kernel_text(self.shape), shape)
                    self._sum = start_sum(gradient, self.numpy_dtype)
                self._accepted_locked()
            elif not self._fits_declared(shape):
                # stale: only the declared attributes are checked (decisions T7)
                self._n_rejected += 1
                raise _shape_mismatch(kernel_text(self.shape), shape)
            else:
                self._stale_locked()

    # counts its own rejections (above), sparing every apply the base's
    # counting wrapper: a Python frame on the 1-element path
    apply._counts_rejections = True  # type: ignore[attr-defined]
    apply_dense = apply

    def _finish_round(self, state: _Sum, count: int) -> np.ndarray[Any, Any]:
        assert state is not None
        total = sum_result(state)
        if self.reduction_type == "MEAN":
            divide_in_place(total, count)
        return total
