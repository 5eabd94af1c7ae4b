"""What "the same as TensorFlow, within float rounding" means for an optimizer step."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

# TensorFlow's CPU kernels round some operations differently from numpy (its
# pow, its vectorised reciprocal square root, float16 kept wide inside a fused
# expression): results differ in their last bits, and a difference of a unit in
# the last place of a value near 1 is still there when the step's result is
# near 0. So the bound is a few units of the dtype's precision at the scale of
# the values (1, or the largest value if that is larger).
EPSILONS = 4


def numpy_dtype(name: Any) -> np.dtype[Any]:
    """The numpy dtype of a dtype name, bfloat16 (from ml_dtypes) included."""
    found: np.dtype[Any] = np.dtype(ml_dtypes.bfloat16 if str(name) == "bfloat16" else name)
    return found


def within_rounding(ours: Any, theirs: Any, dtype: Any) -> bool:
    """Whether ``ours`` is ``theirs`` up to float rounding in ``dtype`` (NaN where NaN)."""
    a = np.asarray(ours, np.float64)
    b = np.asarray(theirs, np.float64)
    if a.shape != b.shape or not np.array_equal(np.isnan(a), np.isnan(b)):
        return False
    if numpy_dtype(dtype).kind in "iub":
        return bool(np.array_equal(a, b))
    finite = np.isfinite(b)
    if not np.array_equal(a[~finite & ~np.isnan(b)], b[~finite & ~np.isnan(b)]):
        return False  # the same infinities
    scale = max(1.0, float(np.max(np.abs(b[finite]), initial=0.0)))
    bound = EPSILONS * float(ml_dtypes.finfo(numpy_dtype(dtype)).eps) * scale
    return bool(np.all(np.abs(a[finite] - b[finite]) <= bound))
