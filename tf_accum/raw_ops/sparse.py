"""Applying sparse gradients and taking their per-row mean (or sum)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tf_accum import errors
from tf_accum.accumulators.attempts import current_cancellation
from tf_accum.accumulators.sparse import SparseTakeResult
from tf_accum.dtypes import kernel_type_name
from tf_accum.raw_ops import _lookup
from tf_accum.raw_ops.arguments import (
    index_array,
    is_scipy_sparse,
    positive_num_required,
    scalar_int,
    scipy_rows,
    tensor_array,
)
from tf_accum.raw_ops.keyword_only import raw_op, raw_take_op
from tf_accum.raw_ops.timeout import check_timeout

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

    ``gradient_values`` may instead be a 2-D SciPy sparse matrix or array
    (COO, CSR, CSC, ...) with ``gradient_indices=None``: each stored row
    becomes an index and its dense row the value, and the matrix's shape is
    the gradient's shape (``gradient_shape`` may then be None, empty or that shape;
    ``has_known_shape`` still says whether it is checked).

    Args:
        handle: a handle from :func:`SparseConditionalAccumulator`.
        local_step: int64 scalar; below the global step the gradient is dropped
            (after validation).
        gradient_indices: int64 vector of row indices, each at least 0 and below
            the declared dimension 0 when that is known.
        gradient_values: array of the accumulator's dtype, rank >= 1, one row per
            index (Python floats infer float32, as in TensorFlow; any array
            object is taken as :func:`tf_accum.raw_ops.ResourceAccumulatorApplyGradient`
            takes its gradient), or a SciPy sparse matrix.
        gradient_shape: int64 vector, the dense shape; read only when
            ``has_known_shape``; must agree with the declared shape where known.
        has_known_shape: whether ``gradient_shape`` is given.

    Returns:
        None.

    Raises:
        InvalidArgumentError: wrong dtype, non-scalar local_step, indices not a
            vector, rows not matching indices, shapes that do not fit, an index
            out of range or negative, a dense accumulator, or a SciPy matrix
            given with indices, or with another shape, or not 2-D.
        NotFoundError: the handle was destroyed.

    Differs from TensorFlow (docs/departures.md T5-T8): indices need not be
    sorted or unique (TensorFlow silently mis-merges them); negative indices
    are refused; malformed stale gradients are refused; a wrong dtype never
    crashes.
    """
    apply_sparse_gradient(
        handle, local_step, gradient_indices, gradient_values, gradient_shape, has_known_shape
    )


def apply_sparse_gradient(
    handle: Any,
    local_step: Any,
    gradient_indices: Any,
    gradient_values: Any,
    gradient_shape: Any,
    has_known_shape: bool,
    owned: bool = False,
) -> None:
    """The sparse apply op; ``owned``: the values are a new array the accumulator may keep."""
    acc = _lookup.accumulator(handle, _APPLY, "sparse")
    dtype = acc.spec.dtype
    if is_scipy_sparse(gradient_values):
        gradient_indices, values, gradient_shape = scipy_gradient(
            gradient_values, gradient_indices, gradient_shape
        )
        owned = True  # rows written just now
    elif type(gradient_values) is np.ndarray:
        values = gradient_values
    else:
        values = tensor_array(gradient_values)
    if values.dtype != dtype.numpy_dtype and _lookup.byte_swapped(values.dtype, dtype.numpy_dtype):
        values = values.astype(dtype.numpy_dtype)
        owned = True
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
    acc.apply_sparse(step, indices, values, shape, owned)


def scipy_gradient(
    matrix: Any,
    indices: Any,
    shape: Any,
    convert: Callable[[np.ndarray[Any, Any]], np.ndarray[Any, Any]] | None = None,
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """(indices, values, shape) of a SciPy sparse gradient given with ``indices`` and ``shape``.

    ``convert`` maps the matrix's stored values (see :func:`scipy_rows`).

    Raises:
        InvalidArgumentError: indices given, a shape other than the matrix's,
            or a matrix that is not 2-D.
    """
    if indices is not None:
        raise errors.InvalidArgumentError(
            None,
            None,
            "gradient_indices must be None when gradient_values is a SciPy sparse matrix "
            f"(its stored rows are the indices), got {indices!r}",
        )
    matrix_shape = np.array(matrix.shape, np.int64)
    if shape is not None and np.size(shape) and not np.array_equal(shape, matrix_shape):
        raise errors.InvalidArgumentError(
            None,
            None,
            f"gradient_shape {shape!r} is not the shape {list(matrix.shape)} of the SciPy "
            "sparse matrix given as gradient_values",
        )
    row_indices, rows = scipy_rows(matrix, convert)
    return row_indices, rows, matrix_shape


@raw_take_op
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

    Differs from TensorFlow (docs/departures.md T2, T8, T19): ``timeout``; a
    wrong dtype never crashes; subnormal numbers are kept, not flushed to zero.
    """
    acc = _lookup.accumulator(handle, _TAKE, "sparse")
    _lookup.check_take_dtype(acc, dtype, _TAKE, "int64, {}, int64")
    required = positive_num_required(num_required)
    result: SparseTakeResult = acc.take(required, check_timeout(timeout), current_cancellation())
    return result
