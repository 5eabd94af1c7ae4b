"""Reductions in the accumulator's own dtype, shared by dense and sparse results."""

from __future__ import annotations

from typing import Any

import numpy as np


def divide_in_place(total: np.ndarray[Any, Any], counts: Any) -> np.ndarray[Any, Any]:
    """Divide ``total`` by ``counts`` (a scalar or per-row array), in its own dtype.

    Floating and complex types divide by the count converted to the dtype (so
    float16 rounds exactly as TensorFlow's kernels do). Integer types divide
    exactly and truncate toward zero; the quotient always fits the dtype because
    its magnitude never exceeds the total's.
    """
    dtype = total.dtype
    if dtype.kind not in "iu":
        with np.errstate(all="ignore"):
            np.divide(total, np.asarray(counts).astype(dtype), out=total)
        return total
    wide_type = np.int64 if dtype.kind == "i" else np.uint64
    wide = total.astype(wide_type)
    divisor = np.asarray(counts, dtype=wide_type)
    quotient = wide // divisor
    if dtype.kind == "i":
        # floor division rounds negative quotients down; truncation rounds up.
        quotient += (wide - quotient * divisor != 0) & (wide < 0)
    total[...] = quotient.astype(dtype)
    return total
