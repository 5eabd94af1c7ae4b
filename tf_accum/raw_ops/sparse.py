"""Applying sparse gradients and taking their per-row mean (or sum)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tf_accum.accumulators.cancellation import current_cancellation
from tf_accum.accumulators.sparse import SparseTakeResult
from tf_accum.dtypes import kernel_type_name
from tf_accum.raw_ops import _lookup
from tf_accum.raw_ops._convert import (
    index_array,
    positive_num_required,
    scalar_int,
    tensor_array,
)
from tf_accum.raw_ops._keyword_only import raw_op
from tf_accum.raw_ops._timeout import check_timeout

_APPLY = "SparseAccumulatorApplyGradient"
_TAKE = "SparseAccumulatorTakeGradient"


@raw_op
def SparseAccumulatorApplyGradient(
    *,
    handle: Any,
    local_step: Any,
    gradient_indices: Any,
    gradient_values: Any,
    gradient_shape: Any,
    has_known_shape: bool,
    name: str | None = None,
) -> None:
    """Add a sparse gradient to a sparse accumulator, unless it is stale.

    Row ``i`` of ``gradient_values`` is the slice for dense row
    ``gradient_indices[i]``. Rows already present are added to; duplicate
    indices within one gradient are summed and count once for that row.

    Args:
        handle: a handle from :func:`SparseConditionalAccumulator`.
        local_step: int64 scalar; below the global step the gradient is dropped
            (after validation).
        gradient_indices: int64 vector of row indices, each at least 0 and below
            the declared dimension 0 when that is known.
        gradient_values: array of the accumulator's dtype, rank >= 1, one row per
            index (Python floats infer float32, as in TensorFlow).
        gradient_shape: int64 vector, the dense shape; read only when
            ``has_known_shape``; must agree with the declared shape where known.
        has_known_shape: whether ``gradient_shape`` is given.

    Returns:
        None.

    Raises:
        InvalidArgumentError: wrong dtype, non-scalar local_step, indices not a
            vector, rows not matching indices, shapes that do not fit, an index
            out of range or negative, or a dense accumulator.
        NotFoundError: the handle was destroyed.

    Differs from TensorFlow: indices need not be sorted or unique (TensorFlow
    silently mis-merges them); negative indices are refused; malformed stale
    gradients are refused; a wrong dtype never crashes.
    """
    acc = _lookup.accumulator(handle, _APPLY, "sparse")
    dtype = acc.spec.dtype
    values = (
        gradient_values if type(gradient_values) is np.ndarray else tensor_array(gradient_values)
    )
    if values.dtype != dtype.numpy_dtype and _lookup.byte_swapped(values.dtype, dtype.numpy_dtype):
        values = values.astype(dtype.numpy_dtype)
    if values.dtype != dtype.numpy_dtype:
        kind = _lookup.handle_type(_APPLY)
        raise _lookup.signature_mismatch(
            f"{kind}, int64, int64, {kernel_type_name(values.dtype)}, int64->",
            f"{kind}, int64, int64, {dtype.kernel_name}, int64->",
            f"gradient_values has dtype {values.dtype} but the accumulator's dtype is {dtype.name}",
        )
    step = scalar_int(local_step, "local_step", "int64")
    indices = index_array(gradient_indices, "gradient_indices")
    shape = index_array(gradient_shape, "gradient_shape") if has_known_shape else None
    acc.apply_sparse(step, indices, values, shape)


@raw_op
def SparseAccumulatorTakeGradient(
    *,
    handle: Any,
    num_required: Any,
    dtype: Any,
    name: str | None = None,
    timeout: float | None = None,
) -> SparseTakeResult:
    """Wait for ``num_required`` gradients, then return the per-row mean (or sum).

    Queueing, the global step and the reset are as for the dense take.

    Args:
        handle: a handle from :func:`SparseConditionalAccumulator`.
        num_required: int32 scalar above zero.
        dtype: the accumulator's dtype.
        timeout: keyword-only, seconds to wait at most; None waits forever.

    Returns:
        A named tuple ``(indices, values, shape)``: the touched rows' indices
        (int64, sorted), their mean (each row divided by the number of gradients
        that touched it) or sum, and the dense shape (int64; dimension 0 is the
        declared one, or -1 when unknown; the rest come from the values).

    Raises:
        As the dense take.

    Differs from TensorFlow: ``timeout``; a wrong dtype never crashes.
    """
    acc = _lookup.accumulator(handle, _TAKE, "sparse")
    _lookup.check_take_dtype(acc, dtype, _TAKE, "int64, {}, int64")
    required = positive_num_required(num_required)
    result: SparseTakeResult = acc.take(required, check_timeout(timeout), current_cancellation())
    return result
