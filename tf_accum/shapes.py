"""Declared accumulator shapes: parsing, compatibility and message formatting.

A declared shape is ``None`` (unknown rank) or a tuple whose entries are a
dimension size or ``None`` (unknown size). Concrete array shapes are tuples of
ints.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Sequence
from typing import Any, Optional

from tf_accum import errors

Dims = tuple[int | None, ...]
DeclaredShape = Optional[Dims]  # noqa: UP045 - runtime alias on 3.10


def _dims_of(shape: Any) -> Iterable[Any] | None:
    """The raw dimension list of anything TensorFlow would accept as a shape."""
    if shape is None:
        return None
    if hasattr(shape, "as_list") and hasattr(shape, "rank"):
        # TensorFlow's TensorShape; its as_list() refuses an unknown rank.
        return None if shape.rank is None else shape.as_list()
    if not isinstance(shape, (str, bytes, Iterable)):
        try:
            return [operator.index(shape)]  # one dimension, as tf.TensorShape(3) is [3]
        except TypeError:
            pass
    if isinstance(shape, (str, bytes)) or not isinstance(shape, Iterable):
        raise TypeError(
            f"shape must be a sequence of dimensions or None, got {shape!r} of type "
            f"{type(shape).__name__}"
        )
    return shape


def parse_attr_shape(shape: Any) -> DeclaredShape:
    """Parse the ``shape`` attribute of a raw constructor op.

    ``None`` is an unknown rank; a ``None`` or ``-1`` entry is an unknown size.

    Raises:
        InvalidArgumentError: a dimension is below -1.
        TypeError: ``shape`` is not a sequence, or a dimension is not an integer.
    """
    raw = _dims_of(shape)
    if raw is None:
        return None
    dims: list[int | None] = []
    for value in raw:
        if value is None:
            dims.append(None)
            continue
        try:
            size = operator.index(value)
        except TypeError:
            raise TypeError(
                f"shape dimensions must be integers or None, got {value!r} of type "
                f"{type(value).__name__} in shape {list(raw)!r}"
            ) from None
        dims.append(size)
    if any(d is not None and d < -1 for d in dims):
        text = "[" + ",".join(str(d) for d in dims) + "]"
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Shape {text} has dimensions with values below -1 (where -1 means unknown)",
        )
    return tuple(None if d is None or d == -1 else d for d in dims)


def parse_tensor_shape(shape: Any) -> DeclaredShape:
    """Parse a shape the way ``tf.TensorShape(shape)`` does (the compat classes).

    Raises:
        ValueError: a dimension is negative.
        TypeError: a dimension is not an integer or None.
    """
    raw = _dims_of(shape)
    if raw is None:
        return None
    dims: list[int | None] = []
    for value in raw:
        if value is None:
            dims.append(None)
            continue
        try:
            size = operator.index(value)
        except TypeError:
            raise TypeError(
                "Error converting shape to a TensorShape: Dimension value must be integer "
                f"or None or have an __index__ method, got value '{value!r}' with type "
                f"'{type(value)}'."
            ) from None
        if size < 0:
            raise ValueError(
                f"Error converting shape to a TensorShape: Dimension {size} must be >= 0."
            )
        dims.append(size)
    return tuple(dims)


def is_compatible(declared: DeclaredShape, actual: Sequence[int]) -> bool:
    """True when a concrete shape fits a declared one (same rank, known sizes equal)."""
    if declared is None:
        return True
    if len(declared) != len(actual):
        return False
    return all(d is None or d == a for d, a in zip(declared, actual, strict=True))


def kernel_text(shape: DeclaredShape) -> str:
    """A shape as TensorFlow's kernels print it: ``[2,3]``, ``[?,3]``, ``[]``."""
    if shape is None:
        return "<unknown>"
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"


def python_text(shape: DeclaredShape) -> str:
    """A shape as TensorFlow's Python layer prints it: ``(3,)``, ``(None, 3)``."""
    if shape is None:
        return "<unknown>"
    return repr(tuple(shape))


def as_list(shape: DeclaredShape) -> list[int | None] | None:
    """The shape as a list (None for unknown rank), like ``TensorShape.as_list``."""
    return None if shape is None else list(shape)
