"""What the compat classes do with graph-mode Tensors among their arguments.

Python values go through the eager conversions (``raw_ops.arguments``); a Tensor is
checked as TensorFlow's op builder checks it (dtype, static shape) and cast
with a graph op where the class casts, so nothing is evaluated at build time.
"""

from __future__ import annotations

from typing import Any

from tf_accum.dtypes import DType, as_dtype, int64
from tf_accum.graph.graph import is_symbolic
from tf_accum.graph.ops import as_tensor, cast
from tf_accum.shapes import DeclaredShape, python_text
from tf_accum.tensor_conversion import cast_to_int64, convert_to_dtype, int32_num_required


def step(value: Any) -> Any:
    """A step cast to int64 (floats truncate): a Cast op for a Tensor."""
    if is_symbolic(value):
        return cast(value, int64)
    return cast_to_int64(value)


def gradient(value: Any, dtype: DType) -> Any:
    """A gradient converted to ``dtype``; a Tensor must already have it.

    Raises:
        ValueError: a Tensor of another dtype.
    """
    if not is_symbolic(value):
        return convert_to_dtype(value, dtype)
    tensor = as_tensor(value)
    if tensor.dtype != dtype:
        raise ValueError(
            f"Tensor conversion requested dtype {dtype.name} for Tensor with dtype "
            f"{tensor.dtype.name}: {tensor!r}"
        )
    return tensor


def static_shape(value: Any) -> tuple[int | None, ...] | None:
    """A gradient's shape as far as it is known now (None: unknown rank)."""
    if is_symbolic(value):
        return as_tensor(value).shape.as_tuple()
    shape: tuple[int, ...] = value.shape
    return shape


def check_fits(value: Any, declared: DeclaredShape) -> None:
    """Raises ValueError when ``value``'s (static) shape contradicts ``declared``."""
    shape = static_shape(value)
    if shape is None or declared is None:
        return
    if len(shape) != len(declared) or not all(
        a is None or b is None or a == b for a, b in zip(shape, declared, strict=True)
    ):
        raise ValueError(
            f"Shapes {python_text(shape)} and {python_text(declared)} are incompatible"
        )


def num_required(value: Any, op_name: str) -> Any:
    """``num_required`` as the op builder takes it: an int32.

    Raises:
        TypeError: a float, or a Tensor of another dtype.
    """
    if is_symbolic(value):
        found = as_tensor(value).dtype
        if found != as_dtype("int32"):
            raise TypeError(
                f"Input 'num_required' of '{op_name}' Op has type {found.name} that does not "
                "match expected type of int32."
            )
        return value
    return int32_num_required(value, op_name)
