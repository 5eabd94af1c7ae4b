"""Turning raw-op arguments into the values the accumulators work on.

The rules are those of TensorFlow's eager conversion: Python ints (and bools)
and numpy integers become integer tensors, Python floats never do; a gradient
given as Python numbers takes TensorFlow's default dtypes (float32, int32),
while an array keeps its own dtype.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from tf_accum import errors
from tf_accum.shapes import kernel_text

_INT_RANGES = {"int64": (-(2**63), 2**63 - 1), "int32": (-(2**31), 2**31 - 1)}


def scalar_int(value: Any, arg_name: str, type_name: str) -> int:
    """Convert a step or count argument to a Python int.

    Raises:
        ValueError: None.
        TypeError: ``value`` is a float or otherwise not an integer.
        ValueError: ``value`` is out of range for ``type_name``.
        InvalidArgumentError: ``value`` is not a scalar.
    """
    if type(value) is int:  # the common case, kept cheap
        number = value
    else:
        array = _integer_array(value, type_name)
        if array.ndim != 0:
            raise errors.InvalidArgumentError(
                None,
                None,
                f"Argument {arg_name} must be scalar, but had bad shape {kernel_text(array.shape)}",
            )
        number = int(array)
    low, high = _INT_RANGES[type_name]
    if not low <= number <= high:
        raise ValueError(
            f"Argument {arg_name}={number} is out of range for {type_name} ([{low}, {high}])"
        )
    return number


def positive_num_required(num_required: Any) -> int:
    """Convert ``num_required``: an int32 scalar above zero.

    Raises:
        TypeError, ValueError: not an int32.
        InvalidArgumentError: not a scalar, or not positive.
    """
    required = scalar_int(num_required, "num_required", "int32")
    if required <= 0:
        raise errors.InvalidArgumentError(
            None, None, f"Argument num_required must be positive, but was {required}"
        )
    return required


_NONE_MESSAGE = (
    "Attempt to convert a value (None) with an unsupported type (<class 'NoneType'>) to a Tensor."
)


def _integer_array(value: Any, type_name: str) -> np.ndarray[Any, Any]:
    # a Python float never converts to an integer tensor; numpy floats holding
    # whole numbers do (np.float64 is a float subclass, hence the exact test)
    if value is None:
        raise ValueError(_NONE_MESSAGE)
    if type(value) is float:
        raise TypeError(f"Cannot convert {value!r} to EagerTensor of dtype {type_name}")
    try:
        array = np.asarray(value)
    except (ValueError, TypeError) as exc:
        raise TypeError(
            f"Cannot convert {value!r} to EagerTensor of dtype {type_name}: {exc}"
        ) from None
    if array.dtype.kind in "iub":
        return array
    if array.dtype.kind == "f" and np.all(np.mod(array, 1) == 0):
        # numpy floats holding whole numbers convert, as TensorFlow lets them.
        return array.astype(np.int64)
    raise TypeError(f"Cannot convert {value!r} to EagerTensor of dtype {type_name}")


def tensor_array(value: Any) -> np.ndarray[Any, Any]:
    """Convert a gradient the way TensorFlow infers a tensor's dtype.

    Arrays (and anything with ``__array__``, such as TensorFlow or PyTorch
    tensors) keep their dtype; Python floats become float32 and Python ints int32
    (int64 when they do not fit).

    Raises:
        ValueError: a ragged nested sequence.
        TypeError: something that is not numbers.
    """
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, np.generic) or hasattr(value, "__array__"):
        return np.asarray(value)
    try:
        array = np.asarray(value)
    except ValueError:
        raise ValueError("Can't convert non-rectangular Python sequence to Tensor.") from None
    if array.dtype == np.float64:
        return array.astype(np.float32)
    if array.dtype == np.int64:
        info = np.iinfo(np.int32)
        if array.size == 0 or (array.min() >= info.min and array.max() <= info.max):
            return array.astype(np.int32)
    if array.dtype.kind == "O":
        raise TypeError(f"Cannot convert {value!r} to a tensor: it is not a nested list of numbers")
    return array


def index_array(value: Any, arg_name: str) -> np.ndarray[Any, Any]:
    """Convert sparse indices or a shape vector to int64 (the op's input type).

    Raises:
        TypeError: the values are not integers.
        InvalidArgumentError: unsigned values above 2**63 - 1.
    """
    if value is None:
        raise ValueError(_NONE_MESSAGE)
    array = np.asarray(value) if not isinstance(value, np.ndarray) else value
    if array.dtype == np.int64:
        return array
    if array.dtype.kind == "u" and array.size and int(array.max()) > 2**63 - 1:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Argument {arg_name} holds {int(array.max())}, which does not fit in int64 "
            f"(at most {2**63 - 1})",
        )
    if array.size == 0 and array.dtype.kind == "f":
        return array.astype(np.int64)  # [] arrives as float64 from numpy
    if array.dtype.kind not in "iu":
        raise TypeError(
            f"Argument {arg_name} must hold int64 values, got dtype {array.dtype} (value {value!r})"
        )
    return array.astype(np.int64)


def handle_of(value: Any) -> int:
    """The integer handle of a ``handle`` or ``resource`` argument.

    Raises:
        TypeError: not an integer handle.
    """
    if type(value) is int:
        return value
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"Cannot convert {value!r} to EagerTensor of dtype resource")
    try:
        return operator.index(value)
    except TypeError:
        if isinstance(value, np.ndarray) and value.shape == () and value.dtype.kind in "iu":
            return int(value)
        raise TypeError(
            f"handle must be an integer accumulator handle made by a constructor op, "
            f"got {value!r} of type {type(value).__name__}"
        ) from None
