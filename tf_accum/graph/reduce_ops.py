"""``reduce_sum``, ``reduce_mean``, ``reduce_max``, ``reduce_min``, ``reduce_prod``,
``argmax`` and ``argmin``, with TensorFlow's dtypes, shapes and errors.

Sums and products stay in the input's dtype (integers wrap, as TensorFlow's
do); an integer mean is truncated toward zero, and the mean of no elements is
NaN for floats and 0 for integers. The maximum of no elements is the dtype's
lowest value (-inf for floats), the minimum its highest, the product 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tf_accum import errors
from tf_accum.accumulators.float_errors import ignoring_float_errors
from tf_accum.dtypes import DType, int32, int64
from tf_accum.dtypes import bool as bool_
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


def reduce_max(
    input_tensor: Any,
    axis: Any = None,
    keepdims: Any = None,
    name: str | None = None,
    reduction_indices: Any = None,
    keep_dims: Any = None,
) -> Any:
    """The largest of ``input_tensor``'s elements over ``axis`` (NaN if any is NaN).
    Arguments and errors as :func:`reduce_sum`."""
    return _reduce("Max", input_tensor, axis, keepdims, name, reduction_indices, keep_dims)


def reduce_min(
    input_tensor: Any,
    axis: Any = None,
    keepdims: Any = None,
    name: str | None = None,
    reduction_indices: Any = None,
    keep_dims: Any = None,
) -> Any:
    """The smallest of ``input_tensor``'s elements over ``axis``; as :func:`reduce_max`."""
    return _reduce("Min", input_tensor, axis, keepdims, name, reduction_indices, keep_dims)


def reduce_prod(
    input_tensor: Any,
    axis: Any = None,
    keepdims: Any = None,
    name: str | None = None,
    reduction_indices: Any = None,
    keep_dims: Any = None,
) -> Any:
    """The product of ``input_tensor``'s elements over ``axis``; as :func:`reduce_sum`."""
    return _reduce("Prod", input_tensor, axis, keepdims, name, reduction_indices, keep_dims)


def reduce_any(
    input_tensor: Any,
    axis: Any = None,
    keepdims: Any = None,
    name: str | None = None,
    reduction_indices: Any = None,
    keep_dims: Any = None,
) -> Any:
    """Whether any of ``input_tensor``'s bools over ``axis`` holds (False for none).
    Arguments as :func:`reduce_sum`.

    Raises:
        TypeError: an input that is not bool.
    """
    return _reduce("Any", input_tensor, axis, keepdims, name, reduction_indices, keep_dims)


def reduce_all(
    input_tensor: Any,
    axis: Any = None,
    keepdims: Any = None,
    name: str | None = None,
    reduction_indices: Any = None,
    keep_dims: Any = None,
) -> Any:
    """Whether all of ``input_tensor``'s bools over ``axis`` hold (True for none);
    as :func:`reduce_any`."""
    return _reduce("All", input_tensor, axis, keepdims, name, reduction_indices, keep_dims)


def _bool_input(op_type: str, value: Any) -> Any:
    from tf_accum.graph.op_building import convert_input, dtype_of

    converted = convert_input(value, None if is_symbolic(value) else bool_, param="input")
    if dtype_of(converted) != bool_:
        raise TypeError(
            f"Input 'input' of '{op_type}' Op has type {dtype_of(converted).name} that does not "
            "match expected type of bool."
        )
    return converted


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
        source = _packed(source)
        if op_type in ("Any", "All"):
            value = _bool_input(op_type, source)
            dtype = bool_
        else:
            dtype, (value,) = op_def_inputs(op_type, [("input", source)], allowed=False)
            check_allowed(op_type, "input", dtype)
        axis_value = _axis_input(axis)
        kernel = _kernel(op_type, dtype, keep, False)
        graph = mode.building_graph()
        if graph is None:
            array = eager_value(value)
            if axis is None:
                every = np.arange(np.ndim(array), dtype=np.int32)
                return kernel(None, [array, every])[0]
            return kernel(None, [array, eager_value(axis_value)])[0]
        with graph.name_scope(name or op_type) as full:
            tensor = materialize(graph, value, "input")
            if axis is None:
                # every axis, as TensorFlow spells it: a constant range, or one made when run
                axis_value = _every_axis(tensor)
            axes_tensor = materialize(graph, axis_value, "reduction_indices")
            rank = tensor.shape.rank
            axes: list[int] | None = None
            if axis is None:
                axes = list(range(rank)) if rank is not None else None
            elif isinstance(axis_value, Converted):
                axes = [int(a) for a in np.asarray(axis_value.array).reshape(-1)]
            if axis is None and rank is None:
                # every axis of an unknown rank: a scalar, unless the axes are kept
                shape = TensorShape(None) if keep else TensorShape([])
            else:
                shape = reduced_shape(full[:-1], op_type, tensor, axes_tensor, axes, keep)
            op = graph.create_op(
                op_type,
                [tensor, axes_tensor],
                [(dtype, shape)],
                kernel,
                name=full,
                attrs={"T": dtype, "Tidx": _dtype_of_axis(axis_value), "keep_dims": keep},
                effects=False,
            )
        return op.outputs[0]


def _every_axis(tensor: Any) -> Any:
    if tensor.shape.rank is not None:
        return Converted(np.arange(tensor.shape.rank, dtype=np.int32), int32)
    from tf_accum.graph.array_ops import range_, rank

    return range_(0, rank(tensor), 1)


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
        result = ignoring_float_errors(_reduced, op_type, array, axes, keep)
        return (np.asarray(result, dtype=dtype.numpy_dtype),)

    return kernel


def _reduced(op_type: str, array: Array, axes: tuple[int, ...], keep: bool) -> Any:
    if op_type == "Sum":
        return np.sum(array, axis=axes, dtype=array.dtype, keepdims=keep)
    if op_type == "Mean":
        return _mean(array, axes, keep)
    if op_type == "Prod":
        return np.prod(array, axis=axes, dtype=array.dtype, keepdims=keep)
    if op_type == "Any":
        return np.any(array, axis=axes, keepdims=keep)
    if op_type == "All":
        return np.all(array, axis=axes, keepdims=keep)
    return _extreme(array, axes, keep, op_type == "Max")


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


def _packed(value: Any) -> Any:
    """A list holding tensors, packed into one as TensorFlow's conversion does."""
    if isinstance(value, (list, tuple)):
        from tf_accum.graph.op_building import holds_symbolic

        if holds_symbolic(value):
            from tf_accum.graph.array_ops import stack

            return stack(list(value), name="packed")
    return value


def _extreme(array: Array, axes: tuple[int, ...], keep: bool, largest: bool) -> Any:
    if array.dtype.kind == "f" or str(array.dtype) == "bfloat16":
        start = -np.inf if largest else np.inf
    elif array.dtype.kind == "b":
        start = not largest
    else:
        info = np.iinfo(array.dtype)
        start = info.min if largest else info.max
    reduce: Any = np.maximum if largest else np.minimum
    return reduce.reduce(array, axis=axes, keepdims=keep, initial=start)


def argmax(
    input: Any,  # noqa: A002
    axis: Any = None,
    name: str | None = None,
    dimension: Any = None,
    output_type: Any = int64,
) -> Any:
    """The index of the largest element along ``axis`` (default 0), as ``output_type``
    (int64); the first one on ties.

    Raises:
        ValueError: both ``axis`` and ``dimension``.
        InvalidArgumentError: an empty dimension (when run).
    """
    return _arg("ArgMax", input, axis, name, dimension, output_type)


def argmin(
    input: Any,  # noqa: A002
    axis: Any = None,
    name: str | None = None,
    dimension: Any = None,
    output_type: Any = int64,
) -> Any:
    """The index of the smallest element along ``axis`` (default 0); as :func:`argmax`."""
    return _arg("ArgMin", input, axis, name, dimension, output_type)


def _arg(
    op_type: str, source: Any, axis: Any, name: str | None, dimension: Any, output_type: Any
) -> Any:
    from tf_accum.dtypes import as_dtype
    from tf_accum.graph.op_building import constant_value, make_op

    if axis is not None and dimension is not None:
        raise ValueError("Cannot specify both 'axis' and 'dimension'.")
    axis = 0 if axis is None and dimension is None else axis if axis is not None else dimension
    out = as_dtype(output_type)
    with building_in(graph_of([source, axis])):
        source = _packed(source)
        dtype, (value,) = op_def_inputs("ArgMax", [("input", source)], allowed=False)
        check_allowed("ArgMax", "input", dtype)
        axis_value = _axis_input(axis)
        known = constant_value(axis_value)

        def kernel(context: Any, inputs: list[Any]) -> Sequence[Any]:
            array = np.asarray(inputs[0])
            where = int(np.asarray(inputs[1]).reshape(-1)[0])
            if not -array.ndim <= where < max(array.ndim, 1):
                raise errors.InvalidArgumentError(
                    None,
                    None,
                    f"Expected dimension in the range [{-array.ndim}, {array.ndim}), but got "
                    f"{where}",
                )
            if array.shape[where] == 0:
                raise errors.InvalidArgumentError(
                    None, None, "Reduction axis 0 is empty in shape " + str(list(array.shape))
                )
            pick = np.argmax if op_type == "ArgMax" else np.argmin
            return (np.asarray(pick(array, axis=where), dtype=out.numpy_dtype),)

        def outputs(tensors: list[Any]) -> list[tuple[DType, TensorShape]]:
            shape = tensors[0].shape
            if shape.rank is None or known is None:
                return [(out, TensorShape(None))]
            where = int(np.asarray(known).reshape(-1)[0])
            if not -shape.rank <= where < shape.rank:
                raise ValueError(
                    f"Dimension ({where}) must be in the range [{-shape.rank}, {shape.rank}), "
                    f"where {shape.rank} is the number of dimensions in the input."
                )
            dims = shape.as_list()
            del dims[where % shape.rank]
            return [(out, TensorShape(dims))]

        return make_op(
            op_type,
            name,
            [("input", value), ("dimension", axis_value)],
            kernel,
            outputs,
            {"T": dtype, "Tidx": _dtype_of_axis(axis_value), "output_type": out},
        )
