"""TensorFlow's conversions of Python and array values, in Python, before a raw op runs.

These follow ``tf.convert_to_tensor(value, dtype)`` and ``tf.cast(value,
tf.int64)`` as TensorFlow's classes use them: the compat.v1 classes convert
their arguments with them, and graph mode its constants and fed values.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tf_accum import errors
from tf_accum.dtypes import DType, as_dtype
from tf_accum.raw_ops.arguments import array_from_object


def _first_element(array: np.ndarray[Any, Any]) -> Any:
    if not array.size:
        return array
    first = array.flat[0]
    return first.item() if isinstance(first, np.generic) else first


def _refuse_none(value: Any) -> None:
    if value is None:
        raise ValueError("None values not supported.")


INT64_MAX = 2**63 - 1


def _tensorflow_dtype(value: Any) -> DType | None:
    """The dtype of a TensorFlow-style tensor object, or None for anything else.

    A tensor object is a non-numpy object whose ``dtype`` names a TensorFlow
    dtype but is not a numpy dtype (JAX arrays carry numpy dtypes) and not
    PyTorch's (told apart by module name; torch is never imported).
    """
    value_dtype = getattr(value, "dtype", None)
    if value_dtype is None or isinstance(value_dtype, (np.dtype, type)):
        return None
    if type(value_dtype).__module__.split(".")[0] == "torch":
        return None
    try:
        return as_dtype(value_dtype)
    except TypeError:
        return None


def convert_to_dtype_owned(value: Any, dtype: DType) -> tuple[np.ndarray[Any, Any], bool]:
    """:func:`convert_to_dtype`, and whether the result is a new array nobody else holds."""
    _refuse_none(value)
    if not isinstance(value, (np.ndarray, np.generic, list, tuple, int, float, complex)):
        found = _tensorflow_dtype(value)
        if found is not None and found != dtype:
            raise ValueError(
                f"Tensor conversion requested dtype {dtype.name} for Tensor with dtype "
                f"{found.name}: {value!r}"
            )
    array = array_from_object(value)
    fresh = False
    if array is None:
        try:
            array = np.asarray(value)
        except ValueError:
            raise ValueError("Can't convert non-rectangular Python sequence to Tensor.") from None
        # new for numbers and sequences; a view of the caller's memory for
        # buffer objects (bytearray, array.array, memoryview), which stay theirs
        fresh = array.base is None
    target = dtype.numpy_dtype
    if array.dtype == target:
        return array, fresh
    if array.dtype.kind == "O" and array.size and all(_is_number(x) for x in array.flat):
        array = np.array(array.tolist())  # numbers in an object array convert, as in TensorFlow
    kind = array.dtype.kind
    lossy = (
        kind in "USOV"
        or (kind == "c" and not dtype.is_complex)
        or (
            kind == "f"
            and dtype.is_integer
            and not np.all(np.isfinite(array) & (np.trunc(array) == array))
        )
    )
    if lossy:
        bad = _first_element(array)
        if kind == "O":
            bad = next((x for x in array.flat if not _is_number(x)), bad)
        raise TypeError(f"Expected {dtype.name}, but got {bad} of type '{type(bad).__name__}'.")
    with np.errstate(over="ignore"):  # float64 beyond float32's range is inf, as in TensorFlow
        return array.astype(target), True


def convert_to_dtype(value: Any, dtype: DType) -> np.ndarray[Any, Any]:
    """Convert a gradient to ``dtype``, as ``tf.convert_to_tensor(value, dtype)``.

    Python numbers and arrays of any real numeric type convert, by numpy's
    rules: numpy arrays (a subclass becomes a plain ndarray first), anything
    with ``__array__`` (PyTorch CPU tensors, JAX arrays) and anything with the
    array API's ``__dlpack__``; an object array converts when it holds numbers
    only. An array already of ``dtype`` is not copied; one of another dtype is
    copied once, converted. A TensorFlow tensor object (a non-numpy object
    whose ``dtype`` is a TensorFlow DType) of another dtype does not convert,
    as in TensorFlow.

    Raises:
        ValueError: None, a tensor of another dtype, or a ragged sequence.
        TypeError: strings, complex values for a real dtype, fractions or
            non-finite values for an integer dtype, an object array holding
            anything but numbers, or a SciPy sparse matrix.
    """
    return convert_to_dtype_owned(value, dtype)[0]


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float, np.number)) and not isinstance(x, bool)


def cast_to_int64(value: Any) -> Any:
    """Cast a step to int64 as ``tf.cast`` does: floats truncate toward zero.

    Returns a Python int for a scalar, else an int64 array (the raw op then
    reports that it is not a scalar).

    Raises:
        ValueError: None.
        UnimplementedError: strings.
        InvalidArgumentError: unsigned values above 2**63 - 1 (tf.cast would wrap
            them to negative numbers).
    """
    if type(value) is int:
        return value
    _refuse_none(value)
    array = array_from_object(value)
    if array is None:
        array = np.asarray(value)
    if array.dtype.kind in "USO":
        raise errors.UnimplementedError(None, None, "Cast string to int64 is not supported")
    if array.dtype.kind == "u" and array.size and int(array.max()) > INT64_MAX:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Value {int(array.max())} does not fit in int64 (at most {INT64_MAX}); it would "
            "wrap to a negative number",
        )
    array = np.trunc(array).astype(np.int64) if array.dtype.kind == "f" else array.astype(np.int64)
    return int(array) if array.ndim == 0 else array


def int32_num_required(value: Any, op_name: str) -> Any:
    """Check ``num_required`` converts to int32, as the graph-mode op builder does.
    A numpy float goes on to the op, which truncates it as TensorFlow casts it.

    Raises:
        TypeError: a Python float, or a tensor of another integer type.
    """
    if isinstance(value, float) and not isinstance(value, np.floating):
        raise TypeError(
            f"Expected int32 passed to parameter 'num_required' of op '{op_name}', got "
            f"{value!r} of type '{type(value).__name__}' instead. Error: Expected int32, but "
            f"got {value!r} of type '{type(value).__name__}'."
        )
    value_dtype = getattr(value, "dtype", None)
    if value_dtype is not None and not isinstance(value, (np.ndarray, np.generic)):
        try:
            found = as_dtype(value_dtype)
        except TypeError:
            found = None
        if found is not None and found.name != "int32":
            raise TypeError(
                f"Input 'num_required' of '{op_name}' Op has type {found.name} that does not "
                "match expected type of int32."
            )
        return np.asarray(value)
    return value
