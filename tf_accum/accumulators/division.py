"""A MEAN's division of a sum by its count, in the sum's own dtype.

Floating and complex types divide by the count converted to the dtype, as
TensorFlow's kernels do (so a float16 count from 65520 on is infinite);
integer types divide exactly and truncate toward zero. With numba's loops
loaded (tf_accum/accumulators/half_kernel.py), float16 and bfloat16 divide in
one compiled pass, where numpy's and ml_dtypes' narrow loops are scalar code:
the same bits (tests/test_half_kernel.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tf_accum.accumulators import half_kernel
from tf_accum.accumulators.float_errors import ignoring_float_errors
from tf_accum.dtypes import is_bfloat16

Array = np.ndarray[Any, Any]

# A MEAN's result of fewer bytes is divided in a copy, so that its round stays
# as it was until the take has returned, and goes back if the take is stopped
# (Ctrl-C) before; a larger one is divided where it is (a copy into fresh
# memory costs more than the division), and is the take's from then on.
COPY_MAX_BYTES = 1 << 20


def count_in(dtype: np.dtype[Any], counts: Any) -> Array:
    """``counts`` (a MEAN take's, a scalar or per-row) converted to ``dtype``,
    which a MEAN divides by, as TensorFlow's kernels do; from 65520 on a
    float16 count is infinite, quietly."""
    converted: Array = ignoring_float_errors(np.asarray(counts).astype, dtype)
    return converted


def _compiled_narrow_division(total: Array, divisor: Array) -> Callable[[Array], None] | None:
    """The compiled division of a C-contiguous float16 or bfloat16 ``total`` by
    the scalar ``divisor`` (taking its uint16 bits), when half_kernel's loops
    are loaded; else None. numpy's own float16 division and ml_dtypes' bfloat16
    division are scalar code, the loops vector code with the same bits."""
    kernels = half_kernel.loaded()
    if kernels is None or divisor.ndim or not total.flags.c_contiguous:
        return None
    if total.dtype == np.float16:
        loop = kernels.divide_half
    elif is_bfloat16(total.dtype):
        loop = kernels.divide_bfloat16
    else:
        return None
    wide = np.float32(divisor)  # exact: every float16 and bfloat16 is a float32

    def divide(bits: Array) -> None:
        loop(bits, wide)

    return divide


def divide_in_place(
    total: Array, counts: Any, before_writing: Callable[[], None] | None = None
) -> Array:
    """Divide ``total`` by ``counts`` (a scalar or per-row array), in its own dtype.

    ``before_writing`` is called once nothing can fail any more, just before
    ``total`` changes (an integer division allocates first).

    Floating and complex types divide by the count converted to the dtype (so
    float16 rounds exactly as TensorFlow's kernels do). Integer types divide
    exactly and truncate toward zero; the quotient always fits the dtype because
    its magnitude never exceeds the total's.
    """
    if total.dtype.kind in "iu":
        return _divide_integers(total, counts, before_writing)
    divisor = count_in(total.dtype, counts)
    compiled = _compiled_narrow_division(total, divisor)
    if before_writing is not None:
        before_writing()
    if compiled is not None:
        compiled(total.reshape(-1).view(np.uint16))
    else:
        ignoring_float_errors(np.divide, total, divisor, out=total)
    return total


def _divide_integers(total: Array, counts: Any, before_writing: Callable[[], None] | None) -> Array:
    dtype = total.dtype
    wide_type = np.int64 if dtype.kind == "i" else np.uint64
    wide = total.astype(wide_type)
    divisor = np.asarray(counts, dtype=wide_type)
    quotient = wide // divisor
    if dtype.kind == "i":
        # floor division rounds negative quotients down; truncation rounds up.
        quotient += (wide - quotient * divisor != 0) & (wide < 0)
    narrow = quotient.astype(dtype)
    if before_writing is not None:
        before_writing()
    total[...] = narrow
    return total
