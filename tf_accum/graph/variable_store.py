"""One session's variable values, and the shape rules of updating them.

Values are replaced, never changed in place, so a value handed to a reader
stays what it read; each update is one atomic read-change-replace.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from tf_accum import errors
from tf_accum.dtypes import string
from tf_accum.graph.tensor_shape import TensorShape
from tf_accum.shapes import kernel_text

if TYPE_CHECKING:
    from tf_accum.graph.variables import Variable

Array = np.ndarray[Any, Any]


class VariableStore:
    """One session's variable values. Values are replaced, never changed in place,
    so a value handed to a reader stays what it read."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: dict[Variable, Array] = {}

    def read(self, variable: Variable) -> Array:
        found = self._values.get(variable)
        if found is None:
            raise errors.FailedPreconditionError(
                None,
                None,
                f"Could not find variable {variable.op.name}. This could mean that the variable "
                "has been deleted. In TF1, it can also mean the variable is uninitialized. Debug "
                f"info: container=localhost, status error message=Resource localhost/"
                f"{variable.op.name}/N10tensorflow3VarE does not exist.",
            )
        return found

    def read_or(self, variable: Variable, default: Any) -> Any:
        """The value, or ``default`` if the variable has none in this session."""
        found = self._values.get(variable)
        return default if found is None else found

    def assign(self, variable: Variable, value: Any) -> Array:
        array = frozen(np.array(value, dtype=_numpy_dtype(variable)))
        with self._lock:
            self._values[variable] = array
        return array

    def assign_add(self, variable: Variable, delta: Any) -> Array:
        return self.update(variable, lambda old: np.add(old, _same_shape(old, delta)))

    def assign_sub(self, variable: Variable, delta: Any) -> Array:
        return self.update(variable, lambda old: np.subtract(old, _same_shape(old, delta)))

    def update(self, variable: Variable, change: Callable[[Array], Array]) -> Array:
        """Replace the value by ``change(value)``, atomically; returns the new value.

        Raises:
            FailedPreconditionError: the variable is not initialized.
            whatever ``change`` raises (the value is then left as it was).
        """
        with self._lock:
            found = change(self.read(variable))
            array = frozen(np.asarray(found, dtype=_numpy_dtype(variable)))
            self._values[variable] = array
        return array

    def update_together(
        self, variables: list[Variable], change: Callable[[list[Array]], list[Array]]
    ) -> list[Array]:
        """Replace several values by ``change(values)`` at one point, atomically (an
        optimizer step on a variable and its slots); returns the new values.

        Raises:
            FailedPreconditionError: a variable is not initialized.
            whatever ``change`` raises (the values are then left as they were).
        """
        with self._lock:
            found = change([self.read(variable) for variable in variables])
            arrays = [
                frozen(np.asarray(value, dtype=variable.dtype.numpy_dtype))
                for variable, value in zip(variables, found, strict=True)
            ]
            self._values.update(zip(variables, arrays, strict=True))
        return arrays

    def clear(self) -> None:
        with self._lock:
            self._values.clear()

    def count(self) -> int:
        """How many variables hold a value."""
        return len(self._values)


def _numpy_dtype(variable: Variable) -> Any:
    # a string variable holds bytes objects, as string tensors do
    return object if variable.dtype == string else variable.dtype.numpy_dtype


def _same_shape(value: Array, delta: Any) -> Any:
    if np.shape(delta) != value.shape:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Cannot update variable with shape {kernel_text(value.shape)} using a Tensor with "
            f"shape {kernel_text(np.shape(delta))}, shapes must be equal.",
        )
    return delta


def check_merge(first: TensorShape, second: TensorShape) -> None:
    """Refuse two static shapes that cannot be one, as TensorFlow's shape inference does.

    Raises:
        ValueError: different ranks, or a dimension known in both that differs.
    """
    if first.rank is None or second.rank is None:
        return
    if first.rank != second.rank:
        raise ValueError(f"Shapes must be equal rank, but are {first.rank} and {second.rank}")
    ours, theirs = first.as_tuple() or (), second.as_tuple() or ()
    for axis, (a, b) in enumerate(zip(ours, theirs, strict=True)):
        if a is not None and b is not None and a != b:
            raise ValueError(
                f"Dimension {axis} in both shapes must be equal, but are {a} and {b}. Shapes are "
                f"{kernel_text(ours)} and {kernel_text(theirs)}."
            )


def frozen(array: Array) -> Array:
    array.setflags(write=False)
    return array


__all__ = ["VariableStore", "check_merge"]
