"""``tf.compat.v1.ConditionalAccumulatorBase``: what every accumulator class shares."""

from __future__ import annotations

from typing import Any

import numpy as np

from tf_accum import raw_ops
from tf_accum.compat.v1._convert import cast_to_int64
from tf_accum.compat.v1.lifetime import destroy_with
from tf_accum.dtypes import DType, as_dtype
from tf_accum.resources import current_table
from tf_accum.shapes import DeclaredShape, parse_tensor_shape


class ConditionalAccumulatorBase:
    """An accumulator given by its handle: count, global step and attributes.

    Args:
        dtype: the accumulator's dtype (anything :func:`tf_accum.as_dtype` takes).
        shape: the declared shape, or None for an unknown shape.
        accumulator_ref: the integer handle of an existing accumulator.

    Raises:
        TypeError: ``dtype`` is not a dtype, or a dimension is not an integer.
        ValueError: a dimension is negative.

    Differs from TensorFlow: ``dtype`` is a tf_accum DType (equal to whatever it
    was made from), and ``name`` is the name given, or the resource's name.
    """

    def __init__(self, dtype: Any, shape: Any, accumulator_ref: int) -> None:
        self._dtype = as_dtype(dtype)
        self._shape: DeclaredShape = parse_tensor_shape(shape)
        self._accumulator_ref = accumulator_ref
        self._name = _resource_name(accumulator_ref)
        self._finalizer: Any = None

    def _destroy_when_collected(self) -> None:
        """Tie a private accumulator's life to this object."""
        self._finalizer = destroy_with(self, self._accumulator_ref)

    @property
    def accumulator_ref(self) -> int:
        """The integer handle the raw ops take."""
        return self._accumulator_ref

    @property
    def name(self) -> str:
        """The accumulator's name."""
        return self._name

    @property
    def dtype(self) -> DType:
        """The accumulator's dtype."""
        return self._dtype

    def num_accumulated(self, name: str | None = None) -> np.int32:
        """The number of gradients accepted since the last take, as numpy.int32.

        Raises:
            NotFoundError: the accumulator was destroyed.
        """
        return raw_ops.ResourceAccumulatorNumAccumulated(handle=self._accumulator_ref)

    def set_global_step(self, new_global_step: Any, name: str | None = None) -> None:
        """Set the global step; floats are truncated toward zero first.

        Returns:
            None.

        Raises:
            UnimplementedError: a string.
            InvalidArgumentError: not a scalar.
            NotFoundError: the accumulator was destroyed.
        """
        raw_ops.ResourceAccumulatorSetGlobalStep(
            handle=self._accumulator_ref, new_global_step=cast_to_int64(new_global_step)
        )

    def close(self) -> None:
        """Destroy the accumulator: waiting takes fail with CancelledError.

        Later calls raise NotFoundError. Closing twice is harmless.

        Differs from TensorFlow: TensorFlow's classes have no close().
        """
        if self._finalizer is not None:
            self._finalizer()
        else:
            raw_ops.DestroyResourceOp(resource=self._accumulator_ref, ignore_lookup_error=True)


def _resource_name(handle: int) -> str:
    try:
        label = current_table().lookup(handle).label
    except Exception:
        return ""
    return label.split("/", 1)[-1]
