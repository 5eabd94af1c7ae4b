"""The gradients of the math ops, registered by op type at import.

Each follows TensorFlow's formula for its op. A binary op's gradient is
summed over the dimensions its input was broadcast along and reshaped to
the input's shape (TensorFlow's ``BroadcastGradientArgs`` rule: a dimension
of 1 stretched, or missing on the left); the reduction axes are computed
while building when both shapes are known, else by a
``BroadcastGradientArgs`` op when run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tf_accum.dtypes import int32
from tf_accum.graph.array_ops import (
    broadcast_to,
    reshape,
    shape,
    size,
    transpose,
    where_v2,
)
from tf_accum.graph.elementwise_ops import (
    equal,
    floordiv,
    greater,
    greater_equal,
    less_equal,
    log,
    reciprocal,
    sign,
    unary_grad,
)
from tf_accum.graph.fill_ops import ones_like, zeros_like
from tf_accum.graph.gradient_registry import RegisterGradient, no_gradient
from tf_accum.graph.graph import Operation, Tensor
from tf_accum.graph.linalg_ops import matmul
from tf_accum.graph.math_ops import multiply
from tf_accum.graph.op_building import build_in, constant_value, convert_input, dtype_of, make_op
from tf_accum.graph.ops import cast, constant
from tf_accum.graph.reduce_ops import reduce_sum
from tf_accum.graph.tensor_shape import TensorShape

Array = np.ndarray[Any, Any]


# --- broadcasting --------------------------------------------------------------


def static_reduction_axes(
    x_dims: Sequence[int], y_dims: Sequence[int]
) -> tuple[list[int], list[int]]:
    """The axes of the broadcast result to sum over for ``x`` and for ``y``."""
    rank = max(len(x_dims), len(y_dims))
    x_full = [1] * (rank - len(x_dims)) + list(x_dims)
    y_full = [1] * (rank - len(y_dims)) + list(y_dims)
    rx: list[int] = []
    ry: list[int] = []
    for i, (a, b) in enumerate(zip(x_full, y_full, strict=False)):
        if a == 1 and b == 1:
            # both 1: kept; a padded one is dropped by the reshape afterwards
            if i < rank - len(x_dims):
                rx.append(i)
            if i < rank - len(y_dims):
                ry.append(i)
            continue
        if a == 1:
            rx.append(i)
        if b == 1:
            ry.append(i)
    return rx, ry


def broadcast_gradient_args(s0: Any, s1: Any, name: str | None = None) -> list[Any]:
    """``BroadcastGradientArgs``: the reduction axes of two broadcast shapes (when run)."""

    def kernel(context: Any, inputs: list[Any]) -> Sequence[Any]:
        a = [int(d) for d in np.asarray(inputs[0]).reshape(-1)]
        b = [int(d) for d in np.asarray(inputs[1]).reshape(-1)]
        rx, ry = static_reduction_axes(a, b)
        dtype = np.asarray(inputs[0]).dtype
        return (np.asarray(rx, dtype), np.asarray(ry, dtype))

    with build_in([s0, s1]):
        first, second = convert_input(s0), convert_input(s1)
        result: list[Any] = make_op(
            "BroadcastGradientArgs",
            name,
            [("s0", first), ("s1", second)],
            kernel,
            lambda t: [(t[0].dtype, TensorShape([None]))] * 2,
            {"T": dtype_of(first)},
            many=True,
        )
        return result


def reduce_to(grad: Any, x: Tensor, other: Tensor, position: int) -> Any:
    """``grad`` (of the broadcast of ``x`` with ``other``) summed to ``x``'s shape."""
    if grad is None:
        return None
    x_shape, o_shape = x.shape, other.shape
    if x_shape.is_fully_defined() and o_shape.is_fully_defined():
        x_dims = [int(d) for d in x_shape.as_list()]  # type: ignore[arg-type]
        o_dims = [int(d) for d in o_shape.as_list()]  # type: ignore[arg-type]
        pair = (x_dims, o_dims) if position == 0 else (o_dims, x_dims)
        axes = static_reduction_axes(*pair)[position]
        grad_shape = grad.shape if isinstance(grad, Tensor) else None
        if not axes and grad_shape is not None and grad_shape.as_list() == x_dims:
            return grad
        summed = reduce_sum(grad, axes) if axes else grad
        return reshape(summed, x_dims)
    known = known_reduction(x_shape, o_shape)
    if known is not None:
        # which axes to sum does not depend on the unknown dimensions: no shape ops
        leading, ones = known
        summed = reduce_sum(grad, leading) if leading else grad
        if ones:
            summed = reduce_sum(summed, [a - len(leading) for a in ones], keepdims=True)
        return summed
    return sum_to_shape_of(grad, x)


def sum_to_shape_of(grad: Any, x: Tensor, name: str | None = None) -> Any:
    """``SumToShapeOf``: ``grad`` summed over the axes ``x`` was broadcast along, read
    when run (what Shape, BroadcastGradientArgs, Sum and Reshape ops would do, in one op)."""

    def kernel(context: Any, inputs: list[Any]) -> Sequence[Any]:
        value = np.asarray(inputs[0])
        target = np.shape(inputs[1])
        axes = static_reduction_axes(list(target), list(value.shape))[0]
        summed = np.sum(value, axis=tuple(axes), dtype=value.dtype) if axes else value
        return (np.asarray(summed, dtype=value.dtype).reshape(target),)

    with build_in([grad, x]):
        source = convert_input(grad)
        return make_op(
            "SumToShapeOf",
            name,
            [("grad", source), ("x", x)],
            kernel,
            lambda t: [(t[0].dtype, x.shape)],
            {"T": dtype_of(source)},
        )


def known_reduction(x: TensorShape, other: TensorShape) -> tuple[list[int], list[int]] | None:
    """The axes of a broadcast result to sum for ``x``, when the static shapes
    decide them: the leading axes ``x`` lacks, and those where ``x`` has 1 and
    the result does not; None when an unknown dimension could go either way."""
    if x.rank is None or other.rank is None:
        return None
    rank = max(x.rank, other.rank)
    x_dims = x.as_list()
    o_dims = other.as_list()
    padding = rank - len(x_dims)
    leading = list(range(padding))
    ones: list[int] = []
    for i in range(padding, rank):
        a = x_dims[i - padding]
        j = i - (rank - len(o_dims))
        b = o_dims[j] if j >= 0 else 1
        if a == 1:
            if b is None:
                return None
            if b != 1:
                ones.append(i)
        elif a is None and b != 1:
            return None
    return leading, ones


def _binary_result(op: Operation, gx: Any, gy: Any) -> list[Any]:
    x, y = op.inputs
    return [reduce_to(gx, x, y, 0), reduce_to(gy, y, x, 1)]


def _same_shapes(op: Operation, grad: Any) -> bool:
    x, y = op.inputs
    known = x.shape.is_fully_defined() and y.shape.is_fully_defined()
    return bool(
        known
        and isinstance(grad, Tensor)
        and grad.shape.is_fully_defined()
        and x.shape.as_list() == y.shape.as_list() == grad.shape.as_list()
    )


@RegisterGradient("AddV2")
def _add_grad(op: Operation, grad: Any) -> list[Any]:
    if _same_shapes(op, grad):
        return [grad, grad]
    return _binary_result(op, grad, grad)


RegisterGradient("Add")(_add_grad)


@RegisterGradient("Sub")
def _sub_grad(op: Operation, grad: Any) -> list[Any]:
    if _same_shapes(op, grad):
        return [grad, -grad]
    return _binary_result(op, grad, -grad)


@RegisterGradient("Mul")
def _mul_grad(op: Operation, grad: Any) -> list[Any]:
    x, y = op.inputs
    if not op.outputs[0].dtype.is_floating and not op.outputs[0].dtype.is_complex:
        return [None, None]
    if _same_shapes(op, grad):
        return [multiply(grad, y), multiply(x, grad)]
    return _binary_result(op, multiply(grad, y), multiply(x, grad))


@RegisterGradient("RealDiv")
def _realdiv_grad(op: Operation, grad: Any) -> list[Any]:
    from tf_accum.graph.elementwise_ops import realdiv

    x, y = op.inputs
    gx = realdiv(grad, y)
    gy = grad * realdiv(realdiv(-x, y), y)
    return _binary_result(op, gx, gy)


RegisterGradient("Div")(_realdiv_grad)


@RegisterGradient("FloorDiv")
def _floordiv_grad(op: Operation, grad: Any) -> list[Any]:
    return [None, None]


@RegisterGradient("FloorMod")
def _floormod_grad(op: Operation, grad: Any) -> list[Any]:
    x, y = op.inputs
    return _binary_result(op, grad, grad * -floordiv(x, y))


@RegisterGradient("Pow")
def _pow_grad(op: Operation, grad: Any) -> list[Any]:
    x, y = op.inputs
    z = op.outputs[0]
    gx = grad * y * (x ** (y - constant(1, dtype=y.dtype)))
    mask = greater(x, constant(0, dtype=x.dtype))
    safe = where_v2(mask, x, ones_like(x))
    log_x = where_v2(mask, log(safe), zeros_like(x))
    gy = grad * z * log_x
    return _binary_result(op, gx, gy)


def _max_min_grad(op: Operation, grad: Any, selector: Any) -> list[Any]:
    x, y = op.inputs
    none = zeros_like(grad)
    mask = selector(x, y)
    return _binary_result(op, where_v2(mask, grad, none), where_v2(mask, none, grad))


@RegisterGradient("Maximum")
def _maximum_grad(op: Operation, grad: Any) -> list[Any]:
    return _max_min_grad(op, grad, greater_equal)


@RegisterGradient("Minimum")
def _minimum_grad(op: Operation, grad: Any) -> list[Any]:
    return _max_min_grad(op, grad, less_equal)


# --- unary ---------------------------------------------------------------------


@RegisterGradient("Neg")
def _neg_grad(op: Operation, grad: Any) -> Any:
    return -grad


@RegisterGradient("Abs")
def _abs_grad(op: Operation, grad: Any) -> Any:
    return grad * sign(op.inputs[0])


@RegisterGradient("Square")
def _square_grad(op: Operation, grad: Any) -> Any:
    x = op.inputs[0]
    return multiply(grad, multiply(x, constant(2.0, dtype=x.dtype)))


@RegisterGradient("Sqrt")
def _sqrt_grad(op: Operation, grad: Any) -> Any:
    return unary_grad("SqrtGrad", op.outputs[0], grad)


@RegisterGradient("Rsqrt")
def _rsqrt_grad(op: Operation, grad: Any) -> Any:
    return unary_grad("RsqrtGrad", op.outputs[0], grad)


@RegisterGradient("Reciprocal")
def _reciprocal_grad(op: Operation, grad: Any) -> Any:
    return unary_grad("ReciprocalGrad", op.outputs[0], grad)


@RegisterGradient("Exp")
def _exp_grad(op: Operation, grad: Any) -> Any:
    return grad * op.outputs[0]


@RegisterGradient("Log")
def _log_grad(op: Operation, grad: Any) -> Any:
    return grad * reciprocal(op.inputs[0])


@RegisterGradient("Log1p")
def _log1p_grad(op: Operation, grad: Any) -> Any:
    x = op.inputs[0]
    return grad * reciprocal(constant(1, dtype=x.dtype) + x)


@RegisterGradient("Sign")
def _sign_grad(op: Operation, grad: Any) -> Any:
    return zeros_like(op.inputs[0])


@RegisterGradient("Cast")
def _cast_grad(op: Operation, grad: Any) -> Any:
    source, target = op.inputs[0].dtype, op.outputs[0].dtype
    differentiable = ("float16", "float32", "float64", "bfloat16", "complex64", "complex128")
    if source.name in differentiable and target.name in differentiable:
        return cast(grad, source)
    return None


@RegisterGradient("AddN")
def _add_n_grad(op: Operation, grad: Any) -> list[Any]:
    return [grad] * len(op.inputs)


# --- matrix products -----------------------------------------------------------


@RegisterGradient("MatMul")
def _matmul_grad(op: Operation, grad: Any) -> list[Any]:
    a, b = op.inputs
    ta, tb = op.get_attr("transpose_a"), op.get_attr("transpose_b")
    if not ta and not tb:
        return [matmul(grad, b, transpose_b=True), matmul(a, grad, transpose_a=True)]
    if not ta and tb:
        return [matmul(grad, b), matmul(grad, a, transpose_a=True)]
    if ta and not tb:
        return [matmul(b, grad, transpose_b=True), matmul(a, grad)]
    return [
        matmul(b, grad, transpose_a=True, transpose_b=True),
        matmul(grad, a, transpose_a=True, transpose_b=True),
    ]


@RegisterGradient("BatchMatMulV2")
def _batch_matmul_grad(op: Operation, grad: Any) -> list[Any]:
    x, y = op.inputs
    adj_x, adj_y = op.get_attr("adj_x"), op.get_attr("adj_y")
    if not adj_x and not adj_y:
        gx, gy = matmul(grad, y, adjoint_b=True), matmul(x, grad, adjoint_a=True)
    elif not adj_x and adj_y:
        gx, gy = matmul(grad, y), matmul(grad, x, adjoint_a=True)
    elif adj_x and not adj_y:
        gx, gy = matmul(y, grad, adjoint_b=True), matmul(x, grad)
    else:
        gx = matmul(y, grad, adjoint_a=True, adjoint_b=True)
        gy = matmul(grad, x, adjoint_a=True, adjoint_b=True)
    return [_batch_reduced(gx, x, y, 0), _batch_reduced(gy, y, x, 1)]


def _batch_reduced(grad: Any, x: Tensor, other: Tensor, position: int) -> Any:
    """``grad`` summed over the batch dimensions ``x`` was broadcast along."""
    if x.shape.is_fully_defined() and other.shape.is_fully_defined():
        x_dims = [int(d) for d in x.shape.as_list()]  # type: ignore[arg-type]
        o_dims = [int(d) for d in other.shape.as_list()]  # type: ignore[arg-type]
        if x_dims[:-2] == o_dims[:-2]:
            return grad
        pair = (x_dims[:-2], o_dims[:-2]) if position == 0 else (o_dims[:-2], x_dims[:-2])
        axes = static_reduction_axes(*pair)[position]
        return reshape(reduce_sum(grad, axes) if axes else grad, x_dims)
    from tf_accum.graph.indexing import strided_slice

    sx, so = shape(x), shape(other)
    bx = strided_slice(sx, [0], [-2], [1])
    bo = strided_slice(so, [0], [-2], [1])
    pair = (bx, bo) if position == 0 else (bo, bx)
    axes = broadcast_gradient_args(*pair)[position]
    return reshape(reduce_sum(grad, axes), sx)


# --- reductions ----------------------------------------------------------------


def _kept_shape(op: Operation) -> Any:
    """The reduction's output shape with the reduced axes kept as 1 (a list when known,
    with -1 for one unknown dimension)."""
    source, axes = op.inputs
    known = constant_value(axes)
    if source.shape.rank is not None and known is not None:
        rank = source.shape.rank
        chosen = {int(a) % rank for a in np.asarray(known).reshape(-1)} if rank else set()
        dims = source.shape.as_list()
        kept = [1 if i in chosen else d for i, d in enumerate(dims)]
        if kept.count(None) <= 1:
            return [-1 if d is None else d for d in kept]
    return reduced_shape_op(shape(source), axes)


def _to_kept(grad: Any, op: Operation) -> Any:
    """``grad`` of a reduction reshaped to its kept-dimensions shape (as it is when
    the reduction kept them)."""
    if op.get_attr("keep_dims") and isinstance(grad, Tensor):
        return grad
    return reshape(grad, _kept_shape(op))


def reduced_shape_op(input_shape: Any, axes: Any) -> Any:
    """The shape ``input_shape`` has after reducing ``axes`` with kept dimensions (when run)."""

    def kernel(context: Any, inputs: list[Any]) -> Sequence[Any]:
        dims = np.asarray(inputs[0]).reshape(-1).copy()
        chosen = np.asarray(inputs[1]).reshape(-1)
        if dims.size:
            dims[chosen % dims.size] = 1
        return (dims,)

    with build_in([input_shape, axes]):
        first, second = convert_input(input_shape), convert_input(axes)
        return make_op(
            "ReducedShape",
            "reduced_shape",
            [("indices", first), ("data", second)],
            kernel,
            lambda t: [(t[0].dtype, t[0].shape)],
            {"T": int32},
        )


def _input_shape(x: Tensor) -> Any:
    if x.shape.is_fully_defined():
        return [int(d) for d in x.shape.as_list()]  # type: ignore[arg-type]
    return shape(x)


def _sum_to_input(op: Operation, grad: Any) -> Any:
    source = op.inputs[0]
    kept = _to_kept(grad, op)
    if source.shape.is_fully_defined() and kept.shape.as_list() == source.shape.as_list():
        return kept
    return broadcast_to(kept, _input_shape(source))


@RegisterGradient("Sum")
def _sum_grad(op: Operation, grad: Any) -> list[Any]:
    return [_sum_to_input(op, grad), None]


@RegisterGradient("Mean")
def _mean_grad(op: Operation, grad: Any) -> list[Any]:
    source, out = op.inputs[0], op.outputs[0]
    spread = _sum_to_input(op, grad)
    if source.shape.is_fully_defined() and out.shape.is_fully_defined():
        count_in = source.shape.num_elements() or 0
        count_out = out.shape.num_elements() or 0
        factor = count_in // max(count_out, 1)
        return [spread / constant(factor, dtype=spread.dtype), None]
    factor_t = _safe_div(size(source), size(out))
    return [spread / cast(factor_t, spread.dtype), None]


def _safe_div(x: Any, y: Any) -> Any:
    from tf_accum.graph.elementwise_ops import maximum

    return floordiv(x, maximum(y, 1))


def _min_or_max_grad(op: Operation, grad: Any) -> list[Any]:
    source, axes = op.inputs
    if op.get_attr("keep_dims"):
        y, g = op.outputs[0], grad
        indicators = cast(equal(y, source), g.dtype)
        selected = reduce_sum(indicators, axes, keepdims=True)
        return [indicators / selected * g, None]
    kept = _kept_shape(op)
    y = reshape(op.outputs[0], kept)
    g = reshape(grad, kept)
    indicators = cast(equal(y, source), g.dtype)
    selected = reduce_sum(indicators, axes, keepdims=True)
    return [indicators / selected * g, None]


RegisterGradient("Max")(_min_or_max_grad)
RegisterGradient("Min")(_min_or_max_grad)


@RegisterGradient("Prod")
def _prod_grad(op: Operation, grad: Any) -> list[Any]:
    """The product of every other element, by exclusive cumulative products from
    both sides (correct when elements are zero), as TensorFlow computes it."""
    source, axes = op.inputs
    known = constant_value(axes)
    if not source.shape.is_fully_defined() or known is None:
        return [_prod_grad_when_run(op, grad), None]
    dims = [int(d) for d in source.shape.as_list()]  # type: ignore[arg-type]
    rank = len(dims)
    chosen = sorted({int(a) % rank for a in np.asarray(known).reshape(-1)}) if rank else []
    others = [i for i in range(rank) if i not in chosen]
    perm = chosen + others
    reduced = int(np.prod([dims[i] for i in chosen])) if chosen else 1
    other = int(np.prod([dims[i] for i in others])) if others else 1
    spread = broadcast_to(reshape(grad, _kept_shape(op)), dims)
    permuted = reshape(transpose(source, perm), [reduced, other])
    left = cumprod(permuted, exclusive=True)
    right = cumprod(permuted, exclusive=True, reverse=True)
    products = reshape(left * right, [dims[i] for i in perm])
    inverse = list(np.argsort(perm))
    return [spread * transpose(products, inverse), None]


def _prod_grad_when_run(op: Operation, grad: Any) -> Any:
    """The gradient of ``Prod`` with the shape and the axes read when run."""
    from tf_accum.graph.array_ops import (
        concat,
        gather,
        invert_permutation,
        range_,
        rank,
        setdiff1d,
    )
    from tf_accum.graph.reduce_ops import reduce_prod

    source, axes = op.inputs
    input_shape = shape(source)
    spread = broadcast_to(reshape(grad, _kept_shape(op)), input_shape)
    count = rank(source)
    reduced = floormod_int(reshape(cast(axes, int32), [-1]), count)
    other, _ = setdiff1d(range_(0, count), reduced)
    perm = concat([reduced, other], 0)
    reduced_num = reduce_prod(gather(input_shape, reduced))
    other_num = reduce_prod(gather(input_shape, other))
    permuted = transpose(source, perm)
    permuted_shape = shape(permuted)
    flat = reshape(permuted, stack_pair(reduced_num, other_num))
    left = cumprod(flat, exclusive=True)
    right = cumprod(flat, exclusive=True, reverse=True)
    products = reshape(left * right, permuted_shape)
    return spread * transpose(products, invert_permutation(perm))


def floormod_int(x: Any, y: Any) -> Any:
    from tf_accum.graph.elementwise_ops import floormod

    return floormod(x, y)


def stack_pair(a: Any, b: Any) -> Any:
    from tf_accum.graph.array_ops import stack

    return stack([a, b])


def cumprod(x: Any, exclusive: bool = False, reverse: bool = False, name: str | None = None) -> Any:
    """``Cumprod`` along the first axis (the products so far, ``exclusive``: before each)."""

    def kernel(context: Any, inputs: list[Any]) -> Sequence[Any]:
        array = np.asarray(inputs[0])
        work = array[::-1] if reverse else array
        out = np.cumprod(work, axis=0, dtype=array.dtype)
        if exclusive:
            out = np.concatenate([np.ones_like(work[:1]), out[:-1]], axis=0)
        return (out[::-1].copy() if reverse else out,)

    with build_in([x]):
        source = convert_input(x)
        return make_op(
            "Cumprod",
            name,
            [("x", source), ("axis", convert_input(0))],
            kernel,
            lambda t: [(t[0].dtype, t[0].shape)],
            {"exclusive": exclusive, "reverse": reverse, "T": source.dtype},
        )


for _type in (
    "ArgMax",
    "ArgMin",
    "Floor",
    "Ceil",
    "Any",
    "All",
    "Round",
    "Equal",
    "NotEqual",
    "Less",
    "LessEqual",
    "Greater",
    "GreaterEqual",
    "LogicalAnd",
    "LogicalOr",
    "LogicalNot",
    "BroadcastGradientArgs",
    "ReducedShape",
    "SumToShapeOf",
    "Cumprod",
    "SqrtGrad",
    "RsqrtGrad",
    "ReciprocalGrad",
):
    no_gradient(_type)

__all__ = ["broadcast_gradient_args", "cumprod", "reduce_to", "static_reduction_axes"]
