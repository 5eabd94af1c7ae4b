"""``TensorShape`` and ``Dimension``: static shapes, possibly partly unknown.

They follow TensorFlow 2's behaviour (which ``tf.compat.v1`` keeps once eager
execution is disabled): indexing a shape gives ints or None.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator
from typing import Any


class Dimension:
    """One dimension of a shape: a size, or None when unknown.

    Raises:
        TypeError: a value that is not an integer or None.
        ValueError: a negative size.
    """

    __slots__ = ("_value",)

    def __init__(self, value: Any) -> None:
        if isinstance(value, Dimension):
            value = value.value
        if value is None:
            self._value: int | None = None
            return
        if isinstance(value, (bool, float, str, bytes)):
            raise TypeError(
                "Dimension value must be integer or None or have an __index__ method, got "
                f"value '{value!r}' with type '{type(value)}'"
            )
        try:
            number = operator.index(value)
        except TypeError:
            raise TypeError(
                "Dimension value must be integer or None or have an __index__ method, got "
                f"value '{value!r}' with type '{type(value)}'"
            ) from None
        if number < 0:
            raise ValueError(f"Dimension {number} must be >= 0")
        self._value = number

    @property
    def value(self) -> int | None:
        return self._value

    def is_compatible_with(self, other: Any) -> bool:
        theirs = as_dimension(other).value
        return self._value is None or theirs is None or self._value == theirs

    def __eq__(self, other: object) -> Any:
        try:
            theirs = as_dimension(other).value
        except (TypeError, ValueError):
            return NotImplemented
        if self._value is None or theirs is None:
            return None
        return self._value == theirs

    def __hash__(self) -> int:
        return hash(self._value)

    def __int__(self) -> int:
        if self._value is None:
            raise TypeError("Cannot convert an unknown Dimension to an int")
        return self._value

    __index__ = __int__

    def __repr__(self) -> str:
        return f"Dimension({self._value})"

    def __str__(self) -> str:
        return "?" if self._value is None else str(self._value)


def as_dimension(value: Any) -> Dimension:
    return value if isinstance(value, Dimension) else Dimension(value)


class TensorShape:
    """A static shape: None (unknown rank) or a list of sizes, each maybe None.

    Args:
        dims: None, an int (a vector's length... as TensorFlow: a rank-1 shape),
            or an iterable of ints, None or Dimensions.

    Raises:
        TypeError, ValueError: a dimension that is not a size (see :class:`Dimension`).
    """

    __slots__ = ("_dims",)

    def __init__(self, dims: Any) -> None:
        if isinstance(dims, TensorShape):
            self._dims: tuple[int | None, ...] | None = dims._dims
            return
        if dims is None:
            self._dims = None
            return
        if isinstance(dims, (int, Dimension)) and not isinstance(dims, bool):
            dims = [dims]
        if hasattr(dims, "as_list") and hasattr(dims, "rank"):  # another TensorShape
            dims = None if dims.rank is None else dims.as_list()
            if dims is None:
                self._dims = None
                return
        try:
            items = list(dims)
        except TypeError:
            raise TypeError(
                f"A TensorShape needs a list of dimensions or None, got {dims!r}"
            ) from None
        self._dims = tuple(Dimension(d).value for d in items)

    @property
    def rank(self) -> int | None:
        return None if self._dims is None else len(self._dims)

    ndims = rank

    @property
    def dims(self) -> list[int | None] | None:
        return None if self._dims is None else list(self._dims)

    def as_list(self) -> list[int | None]:
        """The sizes (None where unknown).

        Raises:
            ValueError: the rank is unknown.
        """
        if self._dims is None:
            raise ValueError("as_list() is not defined on an unknown TensorShape.")
        return list(self._dims)

    def as_tuple(self) -> tuple[int | None, ...] | None:
        """The sizes as a tuple, or None for an unknown rank (tf_accum's declared shape)."""
        return self._dims

    def is_fully_defined(self) -> bool:
        return self._dims is not None and None not in self._dims

    def num_elements(self) -> int | None:
        if not self.is_fully_defined():
            return None
        count = 1
        for d in self._dims or ():
            count *= d or 0
        return count

    def is_compatible_with(self, other: Any) -> bool:
        theirs = as_shape(other)._dims
        mine = self._dims
        if mine is None or theirs is None:
            return True
        if len(mine) != len(theirs):
            return False
        return all(a is None or b is None or a == b for a, b in zip(mine, theirs, strict=True))

    def merge_with(self, other: Any) -> TensorShape:
        """The most specific shape compatible with both.

        Raises:
            ValueError: the shapes are incompatible.
        """
        theirs = as_shape(other)
        if not self.is_compatible_with(theirs):
            raise ValueError(f"Shapes {self} and {theirs} are not compatible")
        if self._dims is None:
            return theirs
        if theirs._dims is None:
            return self
        return TensorShape(
            [a if a is not None else b for a, b in zip(self._dims, theirs._dims, strict=True)]
        )

    def __len__(self) -> int:
        if self._dims is None:
            raise ValueError("Cannot take the length of shape with unknown rank.")
        return len(self._dims)

    def __iter__(self) -> Iterator[int | None]:
        if self._dims is None:
            raise ValueError("Cannot iterate over a shape with unknown rank.")
        return iter(self._dims)

    def __getitem__(self, key: Any) -> Any:
        if self._dims is None:
            if isinstance(key, slice):
                return TensorShape(None)
            return None
        if isinstance(key, slice):
            return TensorShape(self._dims[key])
        return self._dims[key]

    def __bool__(self) -> bool:
        return self._dims is not None

    def __eq__(self, other: object) -> bool:
        try:
            theirs = as_shape(other)
        except (TypeError, ValueError):
            return NotImplemented
        return self._dims == theirs._dims

    def __hash__(self) -> int:
        return hash(self._dims)

    def __repr__(self) -> str:
        if self._dims is None:
            return "TensorShape(None)"
        return f"TensorShape({list(self._dims)})"

    def __str__(self) -> str:
        if self._dims is None:
            return "<unknown>"
        if len(self._dims) == 1:
            return f"({self._dims[0]},)"
        return "(" + ", ".join(str(d) for d in self._dims) + ")"


def as_shape(shape: Any) -> TensorShape:
    return shape if isinstance(shape, TensorShape) else TensorShape(shape)


def unknown_shape() -> TensorShape:
    return TensorShape(None)
