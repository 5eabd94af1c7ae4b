"""The gradients of the array ops (and of identity-like ops), registered by op
type at import, each by TensorFlow's formula for its op.

``GatherV2`` along axis 0 gives an ``IndexedSlices``: the incoming gradient's
rows at the gathered indices, over the params' shape, as TensorFlow's does;
along another axis, a dense sum of the rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tf_accum.dtypes import int32
from tf_accum.graph.array_ops import (
    concat,
    expand_dims,
    gather,
    invert_permutation,
    reshape,
    shape,
    size,
    slice,
    stack,
    transpose,
    unsorted_segment_sum,
    unstack,
    where,
    where_v2,
)
from tf_accum.graph.fill_ops import zeros, zeros_like
from tf_accum.graph.gradient_registry import RegisterGradient, no_gradient
from tf_accum.graph.graph import Operation, Tensor
from tf_accum.graph.indexing import (
    MASKS,
    strided_slice,
    strided_slice_grad,
    strided_slice_with_masks,
)
from tf_accum.graph.math_grad import reduce_to
from tf_accum.graph.op_building import build_in, constant_value, convert_input, make_op
from tf_accum.graph.ops import cast
from tf_accum.graph.reduce_ops import reduce_sum
from tf_accum.indexed_slices import IndexedSlices

Array = np.ndarray[Any, Any]


def _shape_of(x: Tensor) -> Any:
    """``x``'s shape: a list when known while building, else a Shape op."""
    if x.shape.is_fully_defined():
        return [int(d) for d in x.shape.as_list()]  # type: ignore[arg-type]
    return shape(x)


@RegisterGradient("Identity")
def _identity_grad(op: Operation, grad: Any) -> Any:
    return grad


RegisterGradient("ReadVariableOp")(_identity_grad)


@RegisterGradient("AssignVariableOp")
def _assign_grad(op: Operation, grad: Any) -> list[Any]:
    """An assignment's output is a read of the variable after it: the gradient
    goes to the variable, none to the assigned value (as TensorFlow's read does)."""
    return [grad, None]


RegisterGradient("AssignAddVariableOp")(_assign_grad)
RegisterGradient("AssignSubVariableOp")(_assign_grad)
RegisterGradient("PlaceholderWithDefault")(_identity_grad)


@RegisterGradient("Reshape")
def _reshape_grad(op: Operation, grad: Any) -> list[Any]:
    return [reshape(grad, _shape_of(op.inputs[0])), None]


@RegisterGradient("ExpandDims")
def _expand_dims_grad(op: Operation, grad: Any) -> list[Any]:
    return [reshape(grad, _shape_of(op.inputs[0])), None]


@RegisterGradient("Squeeze")
def _squeeze_grad(op: Operation, grad: Any) -> Any:
    return reshape(grad, _shape_of(op.inputs[0]))


@RegisterGradient("Transpose")
def _transpose_grad(op: Operation, grad: Any) -> list[Any]:
    perm = op.inputs[1]
    known = constant_value(perm)
    if known is not None:
        inverse = [int(i) for i in np.argsort(np.asarray(known).reshape(-1))]
        return [transpose(grad, inverse), None]
    return [transpose(grad, invert_permutation(perm)), None]


RegisterGradient("ConjugateTranspose")(_transpose_grad)


@RegisterGradient("Pack")
def _pack_grad(op: Operation, grad: Any) -> Any:
    return unstack(grad, num=op.get_attr("N"), axis=op.get_attr("axis"))


@RegisterGradient("Unpack")
def _unpack_grad(op: Operation, *grads: Any) -> Any:
    return stack(list(grads), axis=op.get_attr("axis"))


def concat_offset(axis: Any, shapes: Sequence[Any], name: str | None = None) -> list[Any]:
    """``ConcatOffset``: where each input of a concatenation starts in its result."""

    def kernel(context: Any, inputs: list[Any]) -> Sequence[Any]:
        where = int(np.asarray(inputs[0]))
        dims = [np.asarray(s).reshape(-1) for s in inputs[1:]]
        where %= max(len(dims[0]), 1)
        offsets = []
        running = 0
        for one in dims:
            offset = np.zeros_like(one)
            offset[where] = running
            running += int(one[where])
            offsets.append(offset)
        return tuple(offsets)

    with build_in([axis, *shapes]):
        axis_input = convert_input(axis)
        if axis_input.dtype != int32:
            axis_input = cast(axis_input, int32)
        converted = [axis_input] + [convert_input(s) for s in shapes]
        found: list[Any] = make_op(
            "ConcatOffset",
            name,
            [("concat_dim", converted[0])]
            + [(f"shape_{i}", s) for i, s in enumerate(converted[1:])],
            kernel,
            lambda t: [(t[1].dtype, t[1].shape)] * (len(t) - 1),
            {"N": len(shapes)},
            many=True,
        )
        return found


@RegisterGradient("ConcatV2")
def _concat_grad(op: Operation, grad: Any) -> list[Any]:
    values, axis = list(op.inputs[:-1]), op.inputs[-1]
    known_axis = constant_value(axis)
    if known_axis is not None and all(v.shape.is_fully_defined() for v in values):
        rank = values[0].shape.rank or 1
        where = int(np.asarray(known_axis).reshape(-1)[0]) % rank
        pieces = []
        start = 0
        for value in values:
            dims = [int(d) for d in value.shape.as_list()]  # type: ignore[arg-type]
            begin = [0] * rank
            begin[where] = start
            pieces.append(slice(grad, begin, dims))
            start += dims[where]
        return [*pieces, None]
    shapes = [shape(v) for v in values]
    offsets = concat_offset(axis, shapes)
    return [*(slice(grad, o, s) for o, s in zip(offsets, shapes, strict=False)), None]


@RegisterGradient("Split")
def _split_grad(op: Operation, *grads: Any) -> list[Any]:
    return [None, concat(list(grads), op.inputs[0])]


@RegisterGradient("SplitV")
def _split_v_grad(op: Operation, *grads: Any) -> list[Any]:
    return [concat(list(grads), op.inputs[2]), None, None]


@RegisterGradient("Slice")
def _slice_grad(op: Operation, grad: Any) -> list[Any]:
    source, begin, _ = op.inputs
    out_shape = _shape_of(op.outputs[0])
    end = (
        begin + out_shape
        if not isinstance(out_shape, list)
        else begin + np.asarray(out_shape, begin.dtype.numpy_dtype)
    )
    strides = np.ones(
        len(source.shape.as_list()) if source.shape.rank is not None else 0, begin.dtype.numpy_dtype
    )
    if source.shape.rank is None:
        strides_value: Any = zeros_like(begin) + 1
    else:
        strides_value = strides
    masks = dict.fromkeys(MASKS, 0)
    found = strided_slice_grad(_shape_of(source), begin, end, strides_value, grad, masks)
    length = begin.shape.as_list()[0] if begin.shape.rank == 1 else None
    if length is not None and found.shape.rank is None:
        found.set_shape([None] * length)
    return [
        found,
        None,
        None,
    ]


@RegisterGradient("StridedSlice")
def _strided_slice_grad(op: Operation, grad: Any) -> list[Any]:
    source, begin, end, strides = op.inputs
    masks = {key: int(op.get_attr(key)) for key in MASKS}
    shape_value: Any = _shape_of(source)
    if isinstance(shape_value, list):
        shape_value = np.asarray(shape_value, begin.dtype.numpy_dtype)
    return [strided_slice_grad(shape_value, begin, end, strides, grad, masks), None, None, None]


@RegisterGradient("Tile")
def _tile_grad(op: Operation, grad: Any) -> list[Any]:
    source, multiples = op.inputs
    known = constant_value(multiples)
    if source.shape.is_fully_defined() and known is not None:
        dims = [int(d) for d in source.shape.as_list()]  # type: ignore[arg-type]
        reps = [int(m) for m in np.asarray(known).reshape(-1)]
        split = [v for pair in zip(reps, dims, strict=False) for v in pair]
        axes = list(range(0, 2 * len(dims), 2))
        if not dims:
            return [grad, None]
        return [reduce_sum(reshape(grad, split), axes), None]
    input_shape = shape(source)
    split_shape = reshape(transpose(stack([multiples, input_shape])), [-1])
    from tf_accum.graph.array_ops import range_

    axes_t = range_(0, size(split_shape), 2)
    summed = reduce_sum(reshape(grad, split_shape), axes_t)
    length = multiples.shape.as_list()[0] if multiples.shape.rank == 1 else None
    if length is not None:
        summed.set_shape([None] * length)
    return [summed, None]


@RegisterGradient("BroadcastTo")
def _broadcast_to_grad(op: Operation, grad: Any) -> list[Any]:
    return [reduce_to(grad, op.inputs[0], op.outputs[0], 0), None]


@RegisterGradient("Fill")
def _fill_grad(op: Operation, grad: Any) -> list[Any]:
    if len(op.inputs) == 1:  # zeros and ones of a shape known only when run: no value input
        return [None]
    return [None, reduce_sum(grad)]


@RegisterGradient("ResourceGather")
def _resource_gather_grad(op: Operation, grad: Any) -> list[Any]:
    handle, indices = op.inputs
    variable_shape = None
    for consumer in handle.graph.get_operations():
        if consumer.type == "ReadVariableOp" and consumer.inputs[0] is handle:
            variable_shape = consumer.outputs[0].shape
            break
    if variable_shape is None or not variable_shape.is_fully_defined():
        raise NotImplementedError("the gradient of a gather from a variable of unknown shape")
    dims = [int(d) for d in variable_shape.as_list()]  # type: ignore[arg-type]
    count = indices.shape.num_elements() if indices.shape.is_fully_defined() else None
    values_shape: Any = (
        [count, *dims[1:]]
        if count is not None
        else concat([expand_dims(size(indices), 0), dims[1:]], 0)
    )
    values = reshape(grad, values_shape)
    return [IndexedSlices(values, reshape(indices, [-1]), _constant_int32(dims)), None]


@RegisterGradient("GatherV2")
def _gather_grad(op: Operation, grad: Any) -> list[Any]:
    params, indices, axis = op.inputs
    known_axis = constant_value(axis)
    params_shape = _shape_of(params)
    if known_axis is not None and int(np.asarray(known_axis).reshape(-1)[0]) == 0:
        if isinstance(params_shape, list):
            dense_shape: Any = _constant_int32(params_shape)
            inner = params_shape[1:]
            count: Any = indices.shape.num_elements() if indices.shape.is_fully_defined() else None
            if count is None:
                values_shape: Any = concat([expand_dims(size(indices), 0), inner], 0)
            else:
                values_shape = [count, *inner]
        else:
            dense_shape = params_shape
            from tf_accum.graph.indexing import strided_slice as _ss

            values_shape = concat(
                [expand_dims(size(indices), 0), _ss(params_shape, [1], [0], [1], end_mask=1)], 0
            )
        values = reshape(grad, values_shape)
        flat_indices = reshape(indices, [-1])
        return [IndexedSlices(values, flat_indices, dense_shape), None, None]
    if known_axis is None or params.shape.rank is None or indices.shape.rank is None:
        raise NotImplementedError(
            "the gradient of gather along an axis other than 0 needs the axis and the ranks "
            "known when the graph is built"
        )
    rank = params.shape.rank
    where = int(np.asarray(known_axis).reshape(-1)[0]) % rank
    index_rank = indices.shape.rank
    # grad: params[:where] + indices + params[where + 1:]; bring the indices' dims first
    order = (
        list(range(where, where + index_rank))
        + list(range(where))
        + list(range(where + index_rank, rank - 1 + index_rank))
    )
    moved = transpose(grad, order)
    params_dims = params.shape.as_list()
    rows: Any = (
        params_dims[where]
        if params_dims[where] is not None
        else strided_slice(shape(params), [where], [where + 1], [1], shrink_axis_mask=1)
    )
    # the rows of each index add up where the index repeats
    summed = unsorted_segment_sum(moved, indices, rows)
    back = list(range(1, where + 1)) + [0] + list(range(where + 1, rank))
    return [transpose(summed, back), None, None]


def _constant_int32(dims: list[int]) -> Any:
    from tf_accum.graph.ops import constant

    return constant(np.asarray(dims, np.int32))


@RegisterGradient("UnsortedSegmentSum")
def _unsorted_segment_sum_grad(op: Operation, grad: Any) -> list[Any]:
    from tf_accum.graph.elementwise_ops import greater_equal, maximum

    ids = op.inputs[1]
    safe = maximum(ids, 0)
    rows = gather(grad, safe)
    keep = greater_equal(ids, 0)
    data_rank = op.inputs[0].shape.rank
    if data_rank is not None and ids.shape.rank is not None and data_rank > ids.shape.rank:
        keep = reshape(keep, _keep_shape(ids, data_rank))
    return [where_v2(keep, rows, zeros_like(rows)), None, None]


def _keep_shape(ids: Tensor, rank: int) -> Any:
    ids_shape = _shape_of(ids)
    ones = [1] * (rank - (ids.shape.rank or 0))
    if isinstance(ids_shape, list):
        return ids_shape + ones
    return concat([ids_shape, ones], 0)


@RegisterGradient("Select")
def _select_grad(op: Operation, grad: Any) -> list[Any]:
    condition = op.inputs[0]
    none = zeros_like(grad)
    return [None, where(condition, grad, none), where(condition, none, grad)]


@RegisterGradient("SelectV2")
def _select_v2_grad(op: Operation, grad: Any) -> list[Any]:
    condition, x, y = op.inputs
    out = op.outputs[0]
    none = zeros([], dtype=grad.dtype)
    gx = where_v2(condition, grad, none)
    gy = where_v2(condition, none, grad)
    return [None, reduce_to(gx, x, out, 0), reduce_to(gy, y, out, 0)]


@RegisterGradient("StridedSliceGrad")
def _strided_slice_grad_grad(op: Operation, grad: Any) -> list[Any]:
    _, begin, end, strides, _ = op.inputs
    masks = {key: int(op.get_attr(key)) for key in MASKS}
    return [None, None, None, None, strided_slice_with_masks(grad, begin, end, strides, masks)]


for _type in (
    "StopGradient",
    "Shape",
    "ShapeN",
    "Size",
    "Rank",
    "ZerosLike",
    "OnesLike",
    "OneHot",
    "Range",
    "Where",
    "InvertPermutation",
    "ConcatOffset",
    "ListDiff",
    "PreventGradient",
):
    no_gradient(_type)

__all__ = ["concat_offset"]
