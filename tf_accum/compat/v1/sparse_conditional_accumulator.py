"""``tf.compat.v1.SparseConditionalAccumulator``: the sparse accumulator class."""

from __future__ import annotations

from typing import Any

import numpy as np

from tf_accum import raw_ops
from tf_accum.accumulators.interrupts import delivered
from tf_accum.accumulators.sparse import SparseTakeResult
from tf_accum.compat.v1 import _symbolic
from tf_accum.compat.v1.accumulator_base import ConditionalAccumulatorBase
from tf_accum.graph.graph import is_symbolic
from tf_accum.graph.mode import executing_eagerly
from tf_accum.indexed_slices import IndexedSlices
from tf_accum.raw_ops.arguments import is_scipy_sparse
from tf_accum.raw_ops.sparse import apply_sparse_gradient, scipy_gradient
from tf_accum.tensor_conversion import convert_to_dtype, convert_to_dtype_owned

_TAKE_OP = "SparseAccumulatorTakeGradient"


class SparseConditionalAccumulator(ConditionalAccumulatorBase):
    """A sparse gradient accumulator: gradients are rows of a dense tensor.

    Each row's result is the mean over the gradients that touched that row
    (or their sum, with reduction_type "SUM").

    Args:
        dtype: one of the 19 accumulator dtypes.
        shape: the declared dense shape (None: unknown); dimension 0, when
            known, bounds the indices.
        shared_name: share by name while the accumulator exists; None or "" for
            a private accumulator destroyed when this object is collected.
        name: the accumulator's name.
        reduction_type: "MEAN" or "SUM".

    Raises:
        As :class:`ConditionalAccumulator`.

    Differs from TensorFlow (docs/departures.md T2, T3, T5, T11, T12): it works
    eagerly (TensorFlow's refuses to); values are converted to the
    accumulator's dtype (TensorFlow passes them unconverted and crashes on
    Python ints); indices need not be sorted or unique; takes accept
    ``timeout=``; ``close()`` destroys.
    """

    def __init__(
        self,
        dtype: Any,
        shape: Any = None,
        shared_name: str | bytes | None = None,
        name: str = "sparse_conditional_accumulator",
        reduction_type: str | bytes | None = "MEAN",
    ) -> None:
        self._create_and_own(
            raw_ops.SparseConditionalAccumulator, dtype, shape, shared_name, name, reduction_type
        )

    def apply_grad(
        self,
        grad_indices: Any,
        grad_values: Any,
        grad_shape: Any = None,
        local_step: Any = 0,
        name: str | None = None,
    ) -> Any:
        """Add a sparse gradient computed at ``local_step``; dropped if stale.

        The gradient is ``grad_values[i]`` at row ``grad_indices[i]``, or a 2-D
        SciPy sparse matrix or array given as ``grad_values`` with
        ``grad_indices=None``: each stored row becomes an index and its dense
        row the value, and the matrix's shape is the gradient's shape.

        Args:
            grad_indices: row indices; cast to int64 (floats truncate). None
                for a SciPy matrix.
            grad_values: one row per index, converted to the accumulator's
                dtype as :meth:`ConditionalAccumulator.apply_grad` converts a
                gradient (copied at most once); or a SciPy sparse matrix.
            grad_shape: the dense shape, or None when unknown (then it is not
                checked). An explicit ``[]`` is a known, rank-0 shape. For a
                SciPy matrix: None or the matrix's shape.
            local_step: the step it was computed at; floats truncate.

        Returns:
            None (graph mode: the Operation; every argument may then be a Tensor).

        Raises:
            InvalidArgumentError: see :func:`tf_accum.raw_ops.SparseAccumulatorApplyGradient`.
            TypeError, ValueError: values that do not convert.
            UnimplementedError: string indices, shape or step.
        """
        fresh = False
        if is_scipy_sparse(grad_values):
            grad_indices, grad_values, grad_shape = scipy_gradient(
                grad_values,
                grad_indices,
                grad_shape,
                convert=lambda data: convert_to_dtype(data, self._dtype),
            )
            fresh = True
        known = grad_shape is not None
        arguments = (grad_indices, grad_values, grad_shape, local_step)
        if executing_eagerly() and not any(is_symbolic(a) for a in arguments):
            # the op's kernel itself, told when the values are a fresh copy
            if not fresh:
                grad_values, fresh = convert_to_dtype_owned(grad_values, self._dtype)
            return apply_sparse_gradient(
                self._accumulator_ref,
                _symbolic.step(local_step),
                _int64_vector(grad_indices),
                grad_values,
                _int64_vector(grad_shape if known else []),
                known,
                owned=fresh,
            )
        return raw_ops.SparseAccumulatorApplyGradient(
            handle=self._accumulator_ref,
            local_step=_symbolic.step(local_step),
            gradient_indices=_int64_vector(grad_indices),
            gradient_values=_symbolic.gradient(grad_values, self._dtype),
            gradient_shape=_int64_vector(grad_shape if known else []),
            has_known_shape=known,
            name=name,
        )

    def apply_indexed_slices_grad(
        self, grad: Any, local_step: Any = 0, name: str | None = None
    ) -> Any:
        """Apply an IndexedSlices (or anything with values, indices, dense_shape).

        A SciPy sparse matrix is applied as by :meth:`apply_grad`.
        """
        if is_scipy_sparse(grad):
            return self.apply_grad(None, grad, local_step=local_step, name=name)
        return self.apply_grad(
            grad.indices, grad.values, grad.dense_shape, local_step=local_step, name=name
        )

    def take_grad(
        self, num_required: Any, name: str | None = None, *, timeout: float | None = None
    ) -> SparseTakeResult:
        """Wait for ``num_required`` gradients; return ``(indices, values, shape)``.

        See :func:`tf_accum.raw_ops.SparseAccumulatorTakeGradient`.
        """
        # the raw op is a delivery of its own, and nothing runs after it
        return raw_ops.SparseAccumulatorTakeGradient(
            handle=self._accumulator_ref,
            num_required=_symbolic.num_required(num_required, _TAKE_OP),
            dtype=self._dtype,
            timeout=timeout,
            name=name,
        )

    def take_indexed_slices_grad(
        self, num_required: Any, name: str | None = None, *, timeout: float | None = None
    ) -> IndexedSlices:
        """As :meth:`take_grad`, as ``IndexedSlices(values, indices, dense_shape)``."""
        # the round goes back unless this call returns it
        return delivered(self._indexed_slices, num_required, name, timeout)

    def _indexed_slices(
        self, num_required: Any, name: str | None, timeout: float | None
    ) -> IndexedSlices:
        indices, values, shape = self.take_grad(num_required, name=name, timeout=timeout)
        return IndexedSlices(values=values, indices=indices, dense_shape=shape)

    def num_accumulated(self, name: str | None = None) -> Any:
        """The number of gradients accepted since the last take, as numpy.int32
        (graph mode: an int32 Tensor)."""
        return raw_ops.AccumulatorNumAccumulated(
            handle=self._accumulator_ref, name=name or f"{self._name}_NumAccumulated"
        )

    def set_global_step(self, new_global_step: Any, name: str | None = None) -> Any:
        """Set the global step; floats are truncated toward zero first.
        Returns None (graph mode: the Operation)."""
        return raw_ops.AccumulatorSetGlobalStep(
            handle=self._accumulator_ref,
            new_global_step=_symbolic.step(new_global_step),
            name=name,
        )


def _int64_vector(value: Any) -> Any:
    """Indices or a shape cast to int64 (floats truncate); a Cast op for a Tensor."""
    if is_symbolic(value):
        return _symbolic.step(value)
    return np.asarray(_symbolic.step(value), np.int64)
