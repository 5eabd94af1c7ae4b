"""``tf.compat.v1.ConditionalAccumulator``: the dense accumulator class."""

from __future__ import annotations

from typing import Any

from tf_accum import raw_ops
from tf_accum.accumulators.interrupts import delivered
from tf_accum.compat.v1 import _symbolic
from tf_accum.compat.v1.accumulator_base import ConditionalAccumulatorBase
from tf_accum.graph.graph import is_symbolic
from tf_accum.graph.mode import executing_eagerly
from tf_accum.raw_ops.dense import apply_gradient
from tf_accum.tensor_conversion import convert_to_dtype_owned

_TAKE_OP = "ResourceAccumulatorTakeGradient"


class ConditionalAccumulator(ConditionalAccumulatorBase):
    """A dense gradient accumulator with a global step and a blocking take.

    Every method acts at once (TensorFlow's eager mode): ``apply_grad`` returns
    None and ``take_grad`` returns an ndarray.

    Args:
        dtype: one of the 19 accumulator dtypes.
        shape: the declared gradient shape (None: any shape; a None entry: any size).
        shared_name: share the accumulator with every other one made with this
            name while it exists; None or "" for a private accumulator, which is
            destroyed when this object is garbage-collected.
        name: the accumulator's name.
        reduction_type: "MEAN" or "SUM".

    Raises:
        TypeError: a dtype outside the accumulator list, or a non-integer dimension.
        ValueError: a negative dimension, or a bad reduction_type.
        InvalidArgumentError: ``shared_name`` names a live accumulator with other
            attributes.

    Differs from TensorFlow (docs/departures.md T1-T4, T13): accumulators
    without a shared_name never alias one another (TensorFlow's eager mode
    makes equal-attribute ones share, and kills them all when one is
    collected); every dtype of the op definition works; ``dtype`` is a tf_accum
    DType; ``name`` is the name given; ``take_grad`` accepts ``timeout=``;
    ``close()`` destroys the accumulator.
    """

    def __init__(
        self,
        dtype: Any,
        shape: Any = None,
        shared_name: str | bytes | None = None,
        name: str = "conditional_accumulator",
        reduction_type: str | bytes | None = "MEAN",
    ) -> None:
        self._create_and_own(
            raw_ops.ResourceConditionalAccumulator, dtype, shape, shared_name, name, reduction_type
        )

    def apply_grad(self, grad: Any, local_step: Any = 0, name: str | None = None) -> Any:
        """Add a gradient computed at ``local_step``; dropped if that step is stale.

        Args:
            grad: anything convertible to the accumulator's dtype (lists, numbers,
                arrays of any real numeric dtype: numpy, anything with
                ``__array__`` such as PyTorch CPU tensors or JAX arrays, or
                with ``__dlpack__``); its shape must fit the declared shape.
                It is copied at most once (converted, or into the sum).
            local_step: the step it was computed at; floats truncate toward zero.

        Returns:
            None (graph mode: the Operation; ``grad`` and ``local_step`` may
            then be Tensors).

        Raises:
            ValueError: a shape that does not fit the declared shape, or a
                tensor object of another dtype.
            TypeError: values that do not convert (strings, a SciPy matrix, say).
            UnimplementedError: a string local_step.
            InvalidArgumentError: the shape differs from this round's first
                gradient, or local_step is not a scalar.
            NotFoundError: the accumulator was destroyed.
        """
        if executing_eagerly() and not is_symbolic(grad) and not is_symbolic(local_step):
            # the op's kernel itself, told when the gradient is a fresh copy
            array, fresh = convert_to_dtype_owned(grad, self._dtype)
            _symbolic.check_fits(array, self._shape)
            return apply_gradient(
                "ResourceAccumulatorApplyGradient",
                self._accumulator_ref,
                _symbolic.step(local_step),
                array,
                owned=fresh,
            )
        gradient = _symbolic.gradient(grad, self._dtype)
        _symbolic.check_fits(gradient, self._shape)
        return raw_ops.ResourceAccumulatorApplyGradient(
            handle=self._accumulator_ref,
            local_step=_symbolic.step(local_step),
            gradient=gradient,
            name=name,
        )

    def take_grad(
        self, num_required: Any, name: str | None = None, *, timeout: float | None = None
    ) -> Any:
        """Wait for ``num_required`` gradients and return their mean (or sum).

        See :func:`tf_accum.raw_ops.ResourceAccumulatorTakeGradient` for the
        queueing rules.

        Args:
            num_required: an int32 above zero.
            timeout: keyword-only; seconds to wait at most (None: forever).

        Returns:
            A new ndarray of the accumulator's dtype (graph mode: a Tensor
            with the declared static shape, which blocks when run).

        Raises:
            TypeError: num_required is a float or a non-int32 tensor.
            InvalidArgumentError: num_required is not positive.
            DeadlineExceededError: the timeout expired (nothing was consumed).
            CancelledError: the accumulator was destroyed while waiting.
        """
        # the round goes back unless this call returns it
        return delivered(self._take_grad, num_required, name, timeout)

    def _take_grad(self, num_required: Any, name: str | None, timeout: float | None) -> Any:
        result: Any = raw_ops.ResourceAccumulatorTakeGradient(
            handle=self._accumulator_ref,
            num_required=_symbolic.num_required(num_required, _TAKE_OP),
            dtype=self._dtype,
            timeout=timeout,
            name=name,
        )
        if is_symbolic(result) and self._shape is not None:
            result.set_shape(list(self._shape))
        return result
