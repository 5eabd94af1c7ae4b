"""Static shapes of math ops, inferred when the graph is built, as TensorFlow
infers them, with its build-time errors.

Broadcasting lines shapes up from the right; a known dimension of 1 takes
the other's, a known dimension above 1 is taken over an unknown one, two
unknowns stay unknown, and two different known dimensions, neither 1, are
an error (``ValueError: Dimensions must be equal, but are 2 and 3 for
'{{node add}} = AddV2[T=DT_FLOAT](x, add/y)' with input shapes: [2], [3].``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from tf_accum.dtypes import DType
from tf_accum.graph.tensor_shape import TensorShape
from tf_accum.shapes import kernel_text

if TYPE_CHECKING:
    from tf_accum.graph.graph import Tensor


def type_enum(dtype: DType) -> str:
    """TensorFlow's enum name of a dtype, as node texts print it: ``DT_FLOAT``."""
    return "DT_" + dtype.kernel_name.upper()


def input_name(tensor: Tensor) -> str:
    """A tensor as a node's input list prints it: the op's name, ``:N`` after the first output."""
    op_name: str = tensor.op.name
    return op_name if tensor.value_index == 0 else f"{op_name}:{tensor.value_index}"


def shape_text(shape: TensorShape) -> str:
    """A static shape as shape-inference messages print it: ``[2,?]``, or ``?`` if unknown."""
    return "?" if shape.rank is None else kernel_text(shape.as_tuple())


def node_text(name: str, op_type: str, attrs: str, inputs: Sequence[Tensor]) -> str:
    """``'{{node add}} = AddV2[T=DT_FLOAT](x, add/y)' with input shapes: [2], [3]``."""
    listed = ", ".join(input_name(t) for t in inputs)
    shapes = ", ".join(shape_text(t.shape) for t in inputs)
    return f"'{{{{node {name}}}}} = {op_type}[{attrs}]({listed})' with input shapes: {shapes}"


def broadcast_shape(name: str, op_type: str, x: Tensor, y: Tensor) -> TensorShape:
    """The static shape of ``x`` and ``y`` broadcast together.

    Raises:
        ValueError: two known dimensions differ and neither is 1.
    """
    if x.shape.rank is None or y.shape.rank is None:
        return TensorShape(None)
    left, right = x.shape.as_list(), y.shape.as_list()
    rank = max(len(left), len(right))
    ones: list[int | None] = [1] * rank
    left = ones[: rank - len(left)] + left
    right = ones[: rank - len(right)] + right
    dims: list[int | None] = []
    for dim_x, dim_y in zip(left, right, strict=True):
        if dim_x is None or dim_y is None:
            if dim_x is not None and dim_x > 1:
                dims.append(dim_x)
            elif (dim_y is not None and dim_y > 1) or dim_x == 1:
                dims.append(dim_y)
            elif dim_y == 1:
                dims.append(dim_x)
            else:
                dims.append(None)
        elif dim_x == 1:
            dims.append(dim_y)
        elif dim_y == 1 or dim_x == dim_y:
            dims.append(dim_x)
        else:
            text = node_text(name, op_type, f"T={type_enum(x.dtype)}", [x, y])
            raise ValueError(f"Dimensions must be equal, but are {dim_x} and {dim_y} for {text}.")
    return TensorShape(dims)


def reduced_shape(
    name: str,
    op_type: str,
    source: Tensor,
    axis_tensor: Tensor,
    axes: list[int] | None,
    keepdims: bool,
) -> TensorShape:
    """The static shape of a reduction of ``source`` over ``axes`` (None: not known
    until run time).

    Raises:
        ValueError: an axis outside ``[-rank, rank)`` of a known rank.
    """
    rank = source.shape.rank
    if rank is None:
        return TensorShape(None)
    if axes is None:
        return TensorShape([None] * rank) if keepdims else TensorShape(None)
    for axis in axes:
        if not -rank <= axis < rank:
            attrs = (
                f"T={type_enum(source.dtype)}, Tidx={type_enum(axis_tensor.dtype)}, "
                f"keep_dims={'true' if keepdims else 'false'}"
            )
            text = node_text(name, op_type, attrs, [source, axis_tensor])
            values = " ".join(str(a) for a in axes)
            raise ValueError(
                f"Invalid reduction dimension {axis} for input with {rank} dimensions. for "
                f"{text} and with computed input tensors: input[1] = <{values}>."
            )
    chosen = {axis % rank for axis in axes}
    dims = source.shape.as_list()
    if keepdims:
        return TensorShape([1 if i in chosen else d for i, d in enumerate(dims)])
    return TensorShape([d for i, d in enumerate(dims) if i not in chosen])
