"""The dense accumulator: one running sum of same-shaped gradients."""

from __future__ import annotations

from typing import Any, ClassVar, Optional

import numpy as np

from tf_accum import errors
from tf_accum.accumulators.arithmetic import divide_in_place
from tf_accum.accumulators.base import AccumulatorBase
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

    def apply(self, local_step: int, gradient: np.ndarray[Any, Any]) -> None:
        """Merge ``gradient`` unless it is stale (``local_step`` below the global step).

        The caller has checked the dtype. Raises InvalidArgumentError when the
        shape does not fit the declared shape, or, for a gradient that is not
        stale, the shape fixed by the round's first gradient. Nothing changes on error.
        """
        fits_declared = is_compatible(self.shape, gradient.shape)
        with self._lock:
            self._check_open_locked()
            stale = local_step < self._global_step
            total = self._sum
            if not stale and total is not None and total.shape != gradient.shape:
                raise _shape_mismatch(kernel_text(total.shape), gradient.shape)
            if not fits_declared:
                raise _shape_mismatch(kernel_text(self.shape), gradient.shape)
            if stale:
                return
            if total is None:
                self._sum = np.array(gradient, dtype=self.dtype.numpy_dtype, copy=True)
            else:
                # IEEE overflow and NaN are results here, not errors (as in TensorFlow).
                with np.errstate(all="ignore"):
                    np.add(total, gradient, out=total)
            self._accepted_locked()

    def _finish_round(self, state: _Sum, count: int) -> np.ndarray[Any, Any]:
        assert state is not None
        if self.reduction_type == "MEAN":
            divide_in_place(state, count)
        return state
