"""The dense accumulator: one running sum of same-shaped gradients."""

from __future__ import annotations

from typing import Any, ClassVar, Optional

import numpy as np

from tf_accum import errors
from tf_accum.accumulators.arithmetic import divide_in_place, in_place_adder
from tf_accum.accumulators.base import AccumulatorBase, AccumulatorSpec, missing_resource_error
from tf_accum.shapes import is_compatible, kernel_text

_Sum = Optional[np.ndarray]  # noqa: UP045 - runtime alias on 3.10


def _shape_mismatch(expected: str, got: tuple[int, ...]) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(
        None, None, f"Shape mismatch: expected {expected}, got {kernel_text(got)}"
    )


class DenseAccumulator(AccumulatorBase[_Sum]):
    """Sums gradients in place; a take returns the sum or the mean.

    The first gradient of a round is copied (and fixes the round's shape); each
    later one is added in place, so applying allocates nothing after the first.
    A completed take hands the sum buffer itself to the taker, which divides it
    outside the lock.
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
        self._add = in_place_adder(self.numpy_dtype)
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
                        raise _shape_mismatch(kernel_text(total.shape), shape)
                    self._add(total, gradient)
                else:
                    if not self._fits_declared(shape):
                        raise _shape_mismatch(kernel_text(self.shape), shape)
                    self._sum = np.array(gradient, dtype=self.numpy_dtype, copy=True)
                self._accepted_locked()
            elif not self._fits_declared(shape):
                # stale: only the declared attributes are checked (decisions T7)
                raise _shape_mismatch(kernel_text(self.shape), shape)
            else:
                self._stale_locked()

    apply_dense = apply

    def _finish_round(self, state: _Sum, count: int) -> np.ndarray[Any, Any]:
        assert state is not None
        if self.reduction_type == "MEAN":
            divide_in_place(state, count)
        return state
