"""``reduce_sum`` and ``reduce_mean``, with TensorFlow's dtypes, shapes and errors.

Sums stay in the input's dtype (integers wrap, as TensorFlow's do); an
integer mean is truncated toward zero, and the mean of no elements is NaN for
floats and 0 for integers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tf_accum import errors
from tf_accum.dtypes import DType, int32, int64
from tf_accum.graph import mode
from tf_accum.graph.graph import is_symbolic
from tf_accum.graph.math_convert import default_array
from tf_accum.graph.math_ops import (
    Converted,
    building_in,
    check_allowed,
    eager_value,
    graph_of,
    materialize,
    op_def_inputs,
)
from tf_accum.graph.math_shapes import reduced_shape
from tf_accum.graph.ops import as_tensor, dtype_of_array
from tf_accum.graph.tensor_shape import TensorShape

Array = np.ndarray[Any, Any]


def reduce_sum(
    input_tensor: Any,
    axis: Any = None,
    keepdims: Any = None,
    name: str | None = None,
    reduction_indices: Any = None,
    keep_dims: Any = None,
) -> Any:
    """The sum of ``input_tensor``'s elements over ``axis`` (an int, a list of
    ints or an int32/int64 Tensor; None: every axis), in its dtype.

    ``keepdims`` keeps the reduced axes with length 1. ``reduction_indices`` and
    ``keep_dims`` are TensorFlow 1's names for ``axis`` and ``keepdims``.

    Raises:
        TypeError: a bool or string input, or a float axis.
        ValueError: an axis outside the input's known rank (when built).
        InvalidArgumentError: an axis outside the input's rank, or repeated (when run).
    """
    return _reduce("Sum", input_tensor, axis, keepdims, name, reduction_indices, keep_dims)


def reduce_mean(
    input_tensor: Any,
    axis: Any = None,
    keepdims: Any = None,
    name: str | None = None,
    reduction_indices: Any = None,
    keep_dims: Any = None,
) -> Any:
    """The mean of ``input_tensor``'s elements over ``axis``, in its dtype (an
    integer mean is truncated toward zero). Arguments and errors as :func:`reduce_sum`."""
    return _reduce("Mean", input_tensor, axis, keepdims, name, reduction_indices, keep_dims)


def _reduce(
    op_type: str,
    source: Any,
    axis: Any,
    keepdims: Any,
    name: str | None,
    reduction_indices: Any,
    keep_dims: Any,
) -> Any:
    if axis is not None and reduction_indices is not None:
        raise ValueError("Cannot specify both 'axis' and 'reduction_indices'.")
    if keepdims is not None and keep_dims is not None:
        raise ValueError("Cannot specify both 'keepdims' and 'keep_dims'.")
    axis = axis if axis is not None else reduction_indices
    keep = bool(keepdims if keepdims is not None else keep_dims)
    with building_in(graph_of([source, axis])):
        dtype, (value,) = op_def_inputs(op_type, [("input", source)], allowed=False)
        check_allowed(op_type, "input", dtype)
        axis_value = _axis_input(axis)
        kernel = _kernel(op_type, dtype, keep, axis is None)
        graph = mode.building_graph()
        if graph is None:
            return kernel(None, [eager_value(value), eager_value(axis_value)])[0]
        with graph.name_scope(name or op_type) as full:
            tensor = materialize(graph, value, "input")
            axes_tensor = materialize(graph, axis_value, "reduction_indices")
            rank = tensor.shape.rank
            axes: list[int] | None = None
            if axis is None:
                axes = list(range(rank)) if rank is not None else None
            elif isinstance(axis_value, Converted):
                axes = [int(a) for a in np.asarray(axis_value.array).reshape(-1)]
            if axis is None and rank is None:
                shape = TensorShape(None)
            else:
                shape = reduced_shape(full[:-1], op_type, tensor, axes_tensor, axes, keep)
            op = graph.create_op(
                op_type,
                [tensor, axes_tensor],
                [(dtype, shape)],
                kernel,
                name=full,
                attrs={"T": dtype, "Tidx": _dtype_of_axis(axis_value), "keep_dims": keep},
            )
        return op.outputs[0]


def _axis_input(axis: Any) -> Any:
    """The reduction axes as an int32/int64 input (for ``None``, every axis, an empty one)."""
    if axis is None:
        return Converted(np.zeros((0,), np.int32), int32)  # the kernel reduces every axis
    if is_symbolic(axis):
        dtype = as_tensor(axis).dtype
    else:
        array = default_array(axis)
        if array.size == 0:
            array = array.astype(np.int32)  # no axes: the attribute's default type
        dtype = dtype_of_array(array)
        axis = Converted(array, dtype)
    if dtype not in (int32, int64):
        raise TypeError(
            f"Value passed to parameter 'reduction_indices' has DataType {dtype.name} not in "
            "list of allowed values: int32, int64"
        )
    return axis


def _dtype_of_axis(value: Any) -> DType:
    return value.dtype if isinstance(value, Converted) else as_tensor(value).dtype


def _kernel(op_type: str, dtype: DType, keep: bool, every_axis: bool) -> Any:
    def kernel(context: Any, inputs: list[Any]) -> Sequence[Any]:
        array = np.asarray(inputs[0])
        if every_axis:
            axes = tuple(range(array.ndim))
        else:
            axes = _checked_axes(np.asarray(inputs[1]), array.ndim)
        with np.errstate(all="ignore"):
            if op_type == "Sum":
                result = np.sum(array, axis=axes, dtype=array.dtype, keepdims=keep)
            else:
                result = _mean(array, axes, keep)
        return (np.asarray(result, dtype=dtype.numpy_dtype),)

    return kernel


def _checked_axes(axes: Array, rank: int) -> tuple[int, ...]:
    chosen: list[int] = []
    for axis in (int(a) for a in axes.reshape(-1)):
        if not -rank <= axis < rank:
            raise errors.InvalidArgumentError(
                None,
                None,
                f"Invalid reduction dimension ({axis} for input with {rank} dimension(s)",
            )
        if axis % rank in chosen:
            raise errors.InvalidArgumentError(
                None,
                None,
                f"Invalid reduction arguments: Axes contains duplicate dimension: {axis % rank}",
            )
        chosen.append(axis % rank)
    return tuple(chosen)


def _mean(array: Array, axes: tuple[int, ...], keep: bool) -> Any:
    count = int(np.prod([array.shape[a] for a in axes])) if axes else 1
    if array.dtype.kind in "iu":
        wide = np.sum(
            array,
            axis=axes,
            dtype=np.int64 if array.dtype.kind == "i" else np.uint64,
            keepdims=keep,
        )
        if count == 0:
            return np.zeros_like(wide)
        quotient = np.abs(wide) // count  # truncated toward zero, as C++ divides
        return np.where(wide < 0, -quotient, quotient)
    total = np.sum(array, axis=axes, dtype=array.dtype, keepdims=keep)
    return np.true_divide(total, np.asarray(count, dtype=array.dtype))
