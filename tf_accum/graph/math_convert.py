"""How a math op's non-tensor operand becomes a tensor, by TensorFlow's rules.

A Python number or nested list takes the dtype it is asked for only when its
values are of a kind that dtype holds (an int for any number type, a float
for float and complex types, a bool for bool); otherwise TypeError
``Expected int32, but got 0.5 of type 'float'.``. Values of the right kind
are then stored as numpy stores them, so a too-large int wraps (2**40 as an
int32 is 0), as in TensorFlow. A numpy array or scalar converts to any
number dtype by numpy's cast (float64 2.5 as int32 is 2).

Without a requested dtype, Python floats become float32, ints int32 (int64
when they do not fit), complex numbers complex128, and numpy values keep
their dtype.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from tf_accum.dtypes import DType, string
from tf_accum.graph.ops import infer_array

Array = np.ndarray[Any, Any]


def refuse_none(value: Any) -> None:
    if value is None:
        raise ValueError("None values not supported.")


def default_array(value: Any) -> Array:
    """``value`` in the dtype TensorFlow gives it when none is asked for.

    Raises:
        ValueError: None, or a ragged sequence.
        TypeError: something that is not numbers, bools or strings.
    """
    refuse_none(value)
    if isinstance(value, complex) and not isinstance(value, (np.generic, np.ndarray)):
        return np.asarray(value, dtype=np.complex128)
    return infer_array(value)


def array_as(value: Any, dtype: DType) -> Array:
    """``value`` as an array of ``dtype``, or TensorFlow's error.

    Raises:
        ValueError: None, or a ragged sequence.
        TypeError: a Python value of a kind ``dtype`` cannot hold.
    """
    refuse_none(value)
    if isinstance(value, (np.ndarray, np.generic)):
        array = np.asarray(value)
        if dtype == string:
            if array.dtype.kind not in "USO":
                raise TypeError(
                    f"Expected string, but got {_first(array)} of type "
                    f"'{type(_first(array)).__name__}'."
                )
            return array.astype(object)
        if array.dtype.kind in "USO":
            leaf = _first(array)
            raise TypeError(
                f"Expected {dtype.name}, but got {leaf} of type '{type(leaf).__name__}'."
            )
        with np.errstate(all="ignore"):
            return array.astype(dtype.numpy_dtype)
    for leaf in _leaves(value):
        if not _holds(dtype, leaf):
            raise TypeError(
                f"Expected {dtype.name}, but got {leaf} of type '{type(leaf).__name__}'."
            )
    if dtype == string:
        return np.asarray(value, dtype=object)
    try:
        raw = np.asarray(value)
    except ValueError:
        raise ValueError("Can't convert non-rectangular Python sequence to Tensor.") from None
    with np.errstate(all="ignore"):
        return raw.astype(dtype.numpy_dtype)


def _holds(dtype: DType, leaf: Any) -> bool:
    """Whether a Python value of ``leaf``'s kind may become a ``dtype``."""
    if dtype == string:
        return isinstance(leaf, (str, bytes))
    if dtype.name == "bool":
        return isinstance(leaf, (bool, np.bool_))
    if isinstance(leaf, (np.generic, np.ndarray)):
        return np.asarray(leaf).dtype.kind not in "USO"
    if isinstance(leaf, (str, bytes)) or not isinstance(leaf, numbers.Number):
        return False
    if dtype.is_integer:
        return isinstance(leaf, numbers.Integral)
    if dtype.is_floating:
        return isinstance(leaf, numbers.Real)
    return True


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, (list, tuple)):
        found: list[Any] = []
        for item in value:
            found.extend(_leaves(item))
        return found
    return [value]


def _first(array: Array) -> Any:
    return array.flat[0] if array.size else array
