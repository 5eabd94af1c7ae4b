"""A round's running sum, in the accumulator's own dtype, shared by dense and sparse.

A sum is an ndarray of the dtype, or for large float16 and bfloat16 sums a
:class:`~tf_accum.accumulators.narrow_sum.NarrowSum` (a float32 sum rounded per
add); :func:`start_sum`, :func:`sum_adder`, :func:`divided_sum` and
:func:`sum_result` hide which. IEEE overflow and NaN are results, not errors,
as in TensorFlow's kernels: floating-point warnings are silenced around every
add (tf_accum/accumulators/float_errors.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tf_accum.accumulators import float_errors
from tf_accum.accumulators.narrow_sum import BFloat16Sum, HalfSum, NarrowSum
from tf_accum.dtypes import is_bfloat16

Array = np.ndarray[Any, Any]

# Below this many elements numpy's own narrow loops cost less than the passes.
NARROW_MIN_ELEMENTS = 4096

RoundSum = Array | NarrowSum


def start_sum(first: Array, dtype: np.dtype[Any], owned: bool = False) -> RoundSum:
    """A running sum of ``dtype`` whose first term is ``first`` (copied): an
    ndarray, or for float16/bfloat16 a NarrowSum (a float32 sum rounded per add).
    An ``owned`` ``first`` (a new array no one else holds) that is already a
    C-ordered, writable array of ``dtype`` becomes the sum itself."""
    if first.size >= NARROW_MIN_ELEMENTS:
        if dtype == np.float16:
            return HalfSum(first, dtype)
        if is_bfloat16(dtype):
            return BFloat16Sum(first, dtype)
    if owned and first.dtype == dtype and first.flags.c_contiguous and first.flags.writeable:
        return first
    return np.array(first, dtype, copy=True)


def sum_adder(dtype: np.dtype[Any]) -> Callable[[Any, Array], None]:
    """``adder(total, gradient)`` adds ``gradient`` into a running sum of ``dtype``
    made by :func:`start_sum`, whatever its size."""

    if dtype.kind in "iu":

        def add_integers(total: Any, gradient: Array) -> None:
            if type(total) is np.ndarray:
                np.add(total, gradient, total)
            else:
                total.add(gradient)

        return add_integers
    if not float_errors.CONTEXT_LOCAL_ERRORS:  # numpy < 2

        def add_floats(total: Any, gradient: Array) -> None:
            if type(total) is np.ndarray:
                with np.errstate(all="ignore"):
                    np.add(total, gradient, total)
            else:
                total.add(gradient)

        return add_floats
    runner, add = float_errors.runner_ignoring_float_errors, np.add

    def add_floats_quietly(total: Any, gradient: Array) -> None:
        if type(total) is np.ndarray:
            runner()(add, total, gradient, total)
        else:
            total.add(gradient)

    return add_floats_quietly


def divided_sum(total: RoundSum, count: int) -> Array | None:
    """The running sum ``total`` divided by ``count`` in its dtype, in a new
    array, when one compiled pass can make it (a float16 or bfloat16 sum, see
    NarrowSum.divided); else None, and the caller divides the result."""
    return total.divided(count) if isinstance(total, NarrowSum) else None


def sum_result(total: RoundSum) -> Array:
    """The running sum ``total`` as an array of its dtype (the buffer itself when it is one)."""
    return total.result() if isinstance(total, NarrowSum) else total
