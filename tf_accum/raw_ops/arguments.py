"""Turning raw-op arguments into the values the accumulators work on.

The rules are those of TensorFlow's eager conversion: Python ints (and bools)
and numpy integers become integer tensors, Python floats never do; a gradient
given as Python numbers takes TensorFlow's default dtypes (float32, int32),
while an array keeps its own dtype.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any, cast

import numpy as np

from tf_accum import errors
from tf_accum.shapes import kernel_text

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
_INT_RANGES = {"int64": (INT64_MIN, INT64_MAX), "int32": (-(2**31), 2**31 - 1)}


def scalar_int(value: Any, arg_name: str, type_name: str) -> int:
    """Convert a step or count argument to a Python int.

    numpy floats truncate toward zero, as in TensorFlow; Python floats are refused.

    Raises:
        ValueError: None, or an object that is not a value (``object()``).
        TypeError: ``value`` is a Python float or otherwise not an integer.
        ValueError: ``value`` is out of range for ``type_name`` (NaN and
            infinities included).
        InvalidArgumentError: ``value`` is not a scalar.
    """
    if type(value) is int:  # the common case, kept cheap
        number = value
    elif type(value) is np.ndarray and value.ndim == 0 and value.dtype.kind in "iub":
        # an integer scalar array (a graph's constant, as a ps task's host gets it):
        # what the general path below makes of it, without its conversions
        number = int(value)
    else:
        array = _integer_array(value, type_name, arg_name)
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


def _unsupported(value: Any) -> ValueError:
    return ValueError(
        f"Attempt to convert a value ({value!r}) with an unsupported type ({type(value)}) to a "
        "Tensor."
    )


def _integer_array(value: Any, type_name: str, arg_name: str) -> np.ndarray[Any, Any]:
    # a Python float never converts to an integer tensor; numpy floats do,
    # truncated toward zero (np.float64 is a float subclass, hence the exact test)
    if value is None:
        raise ValueError(_NONE_MESSAGE)
    if type(value) is float:
        raise TypeError(f"Cannot convert {value!r} to EagerTensor of dtype {type_name}")
    try:
        array = array_from_object(value)
        if array is None:
            array = np.asarray(value)
    except (ValueError, TypeError) as exc:
        raise TypeError(
            f"Cannot convert {value!r} to EagerTensor of dtype {type_name}: {exc}"
        ) from None
    if array.dtype.kind in "iub":
        return array
    if array.dtype.kind == "f":
        return truncated_integers(array, value, arg_name)
    if array.dtype.kind == "O" and not isinstance(value, (list, tuple, np.ndarray)):
        raise _unsupported(value)
    raise TypeError(f"Cannot convert {value!r} to EagerTensor of dtype {type_name}")


def truncated_integers(
    array: np.ndarray[Any, Any], value: Any, arg_name: str
) -> np.ndarray[Any, Any]:
    """numpy floats as integers, truncated toward zero as TensorFlow casts them.

    Raises:
        ValueError: NaN, an infinity or a value beyond int64, where TensorFlow's
            cast has no defined result (docs/departures.md, T21).
    """
    whole = np.trunc(array.astype(np.float64))
    if not np.all((whole >= -(2.0**63)) & (whole < 2.0**63)):
        raise ValueError(
            f"Argument {arg_name}={value!r} is not a number in int64's range, so it has no "
            "integer value"
        )
    result: np.ndarray[Any, Any] = whole.astype(np.int64)
    return result


def is_scipy_sparse(value: Any) -> bool:
    """Whether ``value`` is a SciPy sparse matrix or array (scipy is not imported)."""
    return type(value).__module__.startswith("scipy.sparse") and hasattr(value, "tocoo")


def array_from_object(value: Any) -> np.ndarray[Any, Any] | None:
    """A plain ndarray for an array object; None for Python numbers and sequences.

    An ndarray subclass becomes a plain view of its data: the accumulators do
    arithmetic with ``out=`` their own buffers, and a subclass's
    ``__array_ufunc__`` (or any other override) must never be handed those.
    Objects with ``__array__`` (TensorFlow eager tensors, PyTorch CPU tensors,
    JAX arrays) and the array API's ``__dlpack__`` are read without a copy
    where their library allows. Dtypes are kept.

    Raises:
        TypeError: a SciPy sparse matrix (it is a sparse gradient).
    """
    kind = type(value)
    if kind is np.ndarray:
        return cast("np.ndarray[Any, Any]", value)
    if isinstance(value, np.ndarray):
        # ndarray.view itself, not the subclass's own view method
        return np.ndarray.view(value, np.ndarray)
    if isinstance(value, np.generic):
        return np.asarray(value)
    if is_scipy_sparse(value):
        raise TypeError(
            f"A {kind.__name__} is a sparse gradient: apply it to a sparse accumulator, "
            "or pass its .toarray() as a dense gradient"
        )
    if hasattr(kind, "__array__"):
        array = np.asarray(value)
        return array if type(array) is np.ndarray else np.ndarray.view(array, np.ndarray)
    if hasattr(kind, "__dlpack__"):
        return np.from_dlpack(value)
    return None


FLOAT32_RANGE_MESSAGE = (
    "Can't convert Python sequence with a value out of range for a double-precision float."
)


def tensor_array(value: Any, graph: bool = False) -> np.ndarray[Any, Any]:
    """Convert a gradient the way TensorFlow infers a tensor's dtype.

    Arrays keep their dtype: numpy arrays (a subclass becomes a plain ndarray
    view), anything with ``__array__`` (TensorFlow eager tensors, PyTorch CPU
    tensors, JAX arrays) and anything with the array API's ``__dlpack__``;
    none of them is copied when its library can share the memory. Python
    floats become float32 and Python ints int32 (int64 when they do not fit).
    A list whose first number is a numpy float takes that float's dtype
    (``[np.float64(1.5), 2.0]`` is float64), as TensorFlow's eager conversion
    infers it from the first element. A finite Python float beyond float32's
    range is refused, as TensorFlow's eager conversion does.

    With ``graph``, as TF1 graph constants are made instead: a list of floats
    is float32 whatever its first element, and a float beyond float32 becomes
    an infinity.

    Raises:
        ValueError: a ragged nested sequence; a Python float beyond float32.
        ValueError: an object that is not a value (``object()``), as TensorFlow.
        TypeError: a sequence of what is not numbers, or a SciPy sparse matrix.
    """
    array = array_from_object(value)
    if array is not None:
        return array
    try:
        array = np.asarray(value)
    except ValueError:
        raise ValueError("Can't convert non-rectangular Python sequence to Tensor.") from None
    if not graph and array.dtype.kind in "fiuc":
        eager = _eager_sequence(array, value)
        if eager is not None:
            return eager
    if array.dtype == np.float64:
        with np.errstate(over="ignore"):
            narrow = array.astype(np.float32)
        if not graph and np.any(np.isinf(narrow) & np.isfinite(array)):
            raise ValueError(FLOAT32_RANGE_MESSAGE)
        return narrow
    if array.dtype == np.int64:
        info = np.iinfo(np.int32)
        if array.size == 0 or (array.min() >= info.min and array.max() <= info.max):
            return array.astype(np.int32)
    if array.dtype.kind == "O":
        if not isinstance(value, (list, tuple)):
            raise _unsupported(value)
        raise TypeError(f"Cannot convert {value!r} to a tensor: it is not a nested list of numbers")
    return array


def _eager_sequence(array: np.ndarray[Any, Any], value: Any) -> np.ndarray[Any, Any] | None:
    """The dtype TensorFlow's eager conversion gives a list holding numpy
    values, where it differs from numpy's: a numpy float first sets the float
    dtype; integers of any width are int32 (int64 when they do not fit);
    complex numbers complex128. None: the general rules apply.

    Raises:
        ValueError: integers beyond int64.
    """
    if array.dtype.kind == "f":
        first = _first_number(value)
        if isinstance(first, (np.floating, np.ndarray)) and first.dtype.kind == "f":
            with np.errstate(over="ignore"):
                return array.astype(first.dtype)
        return None
    if array.dtype.kind == "c":
        return array.astype(np.complex128)
    if array.dtype == np.int64 or array.size == 0:
        return None  # below: int32 when it fits
    if int(array.min()) >= -(2**31) and int(array.max()) < 2**31:
        return array.astype(np.int32)
    if int(array.max()) > INT64_MAX:
        raise ValueError("Can't convert Python sequence with out-of-range integer to Tensor.")
    return array.astype(np.int64)


def _first_number(value: Any) -> Any:
    """The first element of a nested list or tuple (a numpy array counts as one)."""
    while isinstance(value, (list, tuple)) and value:
        value = value[0]
    return value


def index_array(value: Any, arg_name: str) -> np.ndarray[Any, Any]:
    """Convert sparse indices or a shape vector to int64 (the op's input type).

    Raises:
        TypeError: the values are not integers.
        InvalidArgumentError: unsigned values above 2**63 - 1.
    """
    if value is None:
        raise ValueError(_NONE_MESSAGE)
    array = array_from_object(value)
    if array is None:
        array = np.asarray(value)
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


def scipy_rows(
    matrix: Any, convert: Callable[[np.ndarray[Any, Any]], np.ndarray[Any, Any]] | None = None
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """The stored rows of a 2-D SciPy sparse matrix: (int64 row indices, their dense rows).

    A row with at least one stored entry (an explicit zero included) is a
    stored row; duplicate entries are summed. The rows keep the matrix's dtype,
    or take the dtype of ``convert(stored values)`` when ``convert`` is given;
    they are written once, straight from the matrix's coordinates.

    Raises:
        InvalidArgumentError: the matrix is not 2-D.
    """
    if len(matrix.shape) != 2:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"A SciPy sparse gradient must be 2-D (rows of the dense tensor), got shape "
            f"{kernel_text(tuple(matrix.shape))}",
        )
    coo = matrix.tocoo(copy=False)
    row, col, data = (np.asarray(a) for a in (coo.row, coo.col, coo.data))
    if convert is not None:
        data = convert(data)
    indices, position = np.unique(row, return_inverse=True)
    values = np.zeros((indices.size, matrix.shape[1]), data.dtype)
    if coo.has_canonical_format:
        values[position, col] = data
    else:
        np.add.at(values, (position, col), data)  # duplicate entries add up
    return indices.astype(np.int64, copy=False), values


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
