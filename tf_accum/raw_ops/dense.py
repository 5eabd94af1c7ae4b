"""Applying dense gradients and taking their mean or sum."""

from __future__ import annotations

from typing import Any

import numpy as np

from tf_accum.accumulators.attempts import current_cancellation
from tf_accum.dtypes import kernel_type_name
from tf_accum.raw_ops import _lookup
from tf_accum.raw_ops.arguments import (
    INT64_MAX,
    INT64_MIN,
    positive_num_required,
    scalar_int,
    tensor_array,
)
from tf_accum.raw_ops.keyword_only import raw_op, raw_take_op
from tf_accum.raw_ops.timeout import check_timeout


def apply_gradient(
    op_name: str, handle: Any, local_step: Any, gradient: Any, owned: bool = False
) -> None:
    """The dense apply ops; ``owned``: ``gradient`` is a new array the accumulator may keep."""
    acc = _lookup.accumulator(handle, op_name, "dense")
    dtype = acc.spec.dtype  # (a remote accumulator has a spec too)
    wanted = dtype.numpy_dtype
    array = gradient if type(gradient) is np.ndarray else tensor_array(gradient)
    if array.dtype != wanted:
        if not _lookup.byte_swapped(array.dtype, wanted):
            kind = _lookup.handle_type(op_name)
            raise _lookup.signature_mismatch(
                f"{kind}, int64, {kernel_type_name(array.dtype)}->",
                f"{kind}, int64, {dtype.kernel_name}->",
                f"gradient has dtype {array.dtype} but the accumulator's dtype is {dtype.name}",
            )
        array = array.astype(wanted)
        owned = True
    # a plain int in range is the common step: spared scalar_int's call (1-element applies)
    if type(local_step) is not int or not INT64_MIN <= local_step <= INT64_MAX:
        local_step = scalar_int(local_step, "local_step", "int64")
    acc.apply_dense(local_step, array, owned)


def take_gradient(
    op_name: str, handle: Any, num_required: Any, dtype: Any, timeout: float | None
) -> np.ndarray[Any, Any]:
    acc = _lookup.accumulator(handle, op_name, "dense")
    _lookup.check_take_dtype(acc, dtype, op_name, "{}")
    required = positive_num_required(num_required)
    result: np.ndarray[Any, Any] = acc.take(
        required, check_timeout(timeout), current_cancellation()
    )
    return result


@raw_op
def AccumulatorApplyGradient(
    *, handle: Any, local_step: Any, gradient: Any, name: str | None = None
) -> None:
    """The ref-handle spelling of :func:`ResourceAccumulatorApplyGradient`.

    Same arguments, result and errors; any dense accumulator's handle works
    (docs/departures.md T14).
    """
    apply_gradient("AccumulatorApplyGradient", handle, local_step, gradient)


@raw_op
def ResourceAccumulatorApplyGradient(
    *, handle: Any, local_step: Any, gradient: Any, name: str | None = None
) -> None:
    """Add ``gradient`` to a dense accumulator, unless it is stale.

    A gradient is stale when ``local_step`` is below the accumulator's global
    step; it is then dropped silently. The first gradient after creation or a
    take fixes the round's shape; later ones must match it exactly. A gradient
    that completes a waiting take's count completes that take within this call.

    Args:
        handle: an accumulator handle from a dense constructor op.
        local_step: int64 scalar, the step the gradient was computed at.
        gradient: an array of the accumulator's dtype: a numpy array (a
            subclass is read as a plain ndarray), anything with ``__array__``
            (TensorFlow eager tensors, PyTorch CPU tensors, JAX arrays) or the
            array API's ``__dlpack__``, read without a copy where its library
            allows; Python floats infer float32 and Python ints int32, as in
            TensorFlow. Its shape must fit the declared shape.

    Returns:
        None.

    Raises:
        NotFoundError: the handle was destroyed.
        InvalidArgumentError: a dtype other than the accumulator's, a sparse
            accumulator, a non-scalar local_step, or a shape that does not fit.
        TypeError: local_step is a float, or the gradient is not numbers (a
            SciPy sparse matrix, say).

    Differs from TensorFlow (docs/departures.md T7, T8): a gradient of the
    wrong dtype, or a non-scalar local_step, is always refused without
    applying anything (TensorFlow crashes or applies anyway); a stale gradient
    whose shape contradicts the declared shape is refused (TensorFlow drops it
    unchecked).
    """
    apply_gradient("ResourceAccumulatorApplyGradient", handle, local_step, gradient)


@raw_take_op
def AccumulatorTakeGradient(
    *,
    handle: Any,
    num_required: Any,
    dtype: Any,
    name: str | None = None,
    timeout: float | None = None,
) -> np.ndarray[Any, Any]:
    """The ref-handle spelling of :func:`ResourceAccumulatorTakeGradient`.

    Same arguments, result and errors; any dense accumulator's handle works
    (docs/departures.md T14).
    """
    return take_gradient("AccumulatorTakeGradient", handle, num_required, dtype, timeout)


@raw_take_op
def ResourceAccumulatorTakeGradient(
    *,
    handle: Any,
    num_required: Any,
    dtype: Any,
    name: str | None = None,
    timeout: float | None = None,
) -> np.ndarray[Any, Any]:
    """Wait for ``num_required`` gradients, then return their mean (or sum).

    The take joins a first-in first-out queue; it completes when it is at the
    front and at least ``num_required`` gradients have been accepted. It then
    takes all of them (there may be more than ``num_required``), the counter
    goes back to 0 and the global step goes up by one.

    Args:
        handle: an accumulator handle from a dense constructor op.
        num_required: int32 scalar above zero.
        dtype: the accumulator's dtype.
        timeout: keyword-only, seconds to wait at most; None waits forever.

    Returns:
        A new ndarray of the accumulator's dtype, shaped like the gradients.

    Raises:
        InvalidArgumentError: num_required not a positive scalar, a dtype other
            than the accumulator's, or a sparse accumulator.
        DeadlineExceededError: ``timeout`` expired; the take was withdrawn.
        CancelledError: the accumulator was destroyed while the take waited.
        NotFoundError: the handle was destroyed.
        ValueError: a negative timeout.

    Differs from TensorFlow (docs/departures.md T2, T8, T19): ``timeout`` is
    ours; a bad dtype or a non-scalar num_required is refused without queueing
    the take (TensorFlow crashes); subnormal numbers are kept, not flushed to zero.
    """
    return take_gradient("ResourceAccumulatorTakeGradient", handle, num_required, dtype, timeout)
