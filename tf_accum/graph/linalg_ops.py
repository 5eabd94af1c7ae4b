"""``matmul``: matrix products, ``MatMul`` for matrices and ``BatchMatMulV2``
for stacks of them (their leading dimensions broadcast).

Both operands have one dtype; ``transpose_*`` swaps the last two dimensions
and ``adjoint_*`` also conjugates. Integer products wrap as TensorFlow's do;
a half-precision product is accumulated in float32 and rounded once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tf_accum import errors
from tf_accum.accumulators.float_errors import ignoring_float_errors
from tf_accum.dtypes import DType
from tf_accum.graph.math_kernels import half_float
from tf_accum.graph.math_ops import op_def_inputs
from tf_accum.graph.math_shapes import node_text, type_enum
from tf_accum.graph.op_building import build_in, make_op
from tf_accum.graph.tensor_shape import TensorShape
from tf_accum.shapes import kernel_text

Array = np.ndarray[Any, Any]


def _oriented(array: Array, transpose: bool, adjoint: bool) -> Array:
    if transpose or adjoint:
        array = np.swapaxes(array, -1, -2)
    return np.conj(array) if adjoint and array.dtype.kind == "c" else array


def _product(a: Array, b: Array) -> Array:
    if half_float(a.dtype):
        wide: Array = np.matmul(a.astype(np.float32), b.astype(np.float32))
        return wide.astype(a.dtype)
    result: Array = np.matmul(a, b)
    return result


def matmul(
    a: Any,
    b: Any,
    transpose_a: bool = False,
    transpose_b: bool = False,
    adjoint_a: bool = False,
    adjoint_b: bool = False,
    a_is_sparse: bool = False,
    b_is_sparse: bool = False,
    output_type: Any = None,
    grad_a: bool = False,
    grad_b: bool = False,
    name: str | None = None,
) -> Any:
    """The matrix product of ``a`` and ``b`` (after transposing or taking the adjoint).

    Raises:
        ValueError: both ``transpose_x`` and ``adjoint_x``; ranks below 2; inner
            dimensions that differ (when known).
        TypeError: operands of different dtypes, or a dtype MatMul does not take.
        InvalidArgumentError: inner dimensions that differ (when run).
    """
    for side, transpose, adjoint in (("a", transpose_a, adjoint_a), ("b", transpose_b, adjoint_b)):
        if transpose and adjoint:
            raise ValueError(
                f"Only one of `transpose_{side}` and `adjoint_{side}` can be True. Received "
                f"`transpose_{side}`={transpose}, `adjoint_{side}`={adjoint}."
            )
    with build_in([a, b]):
        dtype, (left, right) = op_def_inputs("MatMul", [("a", a), ("b", b)], allowed=False)
        shapes = [_static_of(v) for v in (left, right)]
        ranks = [s.rank for s in shapes]
        batched = any(r is None or r > 2 for r in ranks)
        op_type = "BatchMatMulV2" if batched else "MatMul"
        from tf_accum.graph.math_ops import check_allowed

        check_allowed(op_type, "a", dtype)
        flags = (transpose_a or adjoint_a, transpose_b or adjoint_b)
        conj = (adjoint_a and dtype.is_complex, adjoint_b and dtype.is_complex)
        scope = name or "MatMul"

        def kernel(context: Any, inputs: list[Any]) -> Sequence[Any]:
            x, y = (np.asarray(v) for v in inputs)
            if x.ndim < 2 or y.ndim < 2:
                raise errors.InvalidArgumentError(
                    None,
                    None,
                    f"In[0] and In[1] has different ndims: {kernel_text(x.shape)} vs. "
                    f"{kernel_text(y.shape)}"
                    if x.ndim != y.ndim
                    else f"In[0] ndims must be >= 2: {x.ndim}",
                )
            x = _oriented(x, flags[0], conj[0])
            y = _oriented(y, flags[1], conj[1])
            if x.shape[-1] != y.shape[-2]:
                raise errors.InvalidArgumentError(
                    None,
                    None,
                    f"Matrix size-incompatible: In[0]: {kernel_text(x.shape)}, In[1]: "
                    f"{kernel_text(y.shape)}",
                )
            product = ignoring_float_errors(_product, x, y)
            return (np.asarray(product, dtype=dtype.numpy_dtype),)

        def outputs(tensors: list[Any]) -> list[tuple[DType, TensorShape]]:
            return [(dtype, _product_shape(scope, op_type, tensors, flags, dtype))]

        if op_type == "MatMul":
            attrs: dict[str, Any] = {
                "T": dtype,
                "transpose_a": flags[0],
                "transpose_b": flags[1],
            }
        else:
            attrs = {"T": dtype, "adj_x": flags[0], "adj_y": flags[1]}
        if any(conj) and op_type == "MatMul":
            # MatMul has no adjoint: TensorFlow conjugates first, as this kernel does
            attrs["conjugate"] = conj
        return make_op(op_type, name, [("a", left), ("b", right)], kernel, outputs, attrs)


def _static_of(value: Any) -> TensorShape:
    array = getattr(value, "array", None)
    if array is not None:
        return TensorShape(np.shape(array))
    return value.shape  # type: ignore[no-any-return]


def _product_shape(
    name: str, op_type: str, tensors: list[Any], flags: tuple[bool, bool], dtype: DType
) -> TensorShape:
    left, right = tensors[0].shape, tensors[1].shape
    if left.rank is None or right.rank is None:
        return TensorShape(None)
    for shape in (left, right):
        if shape.rank < 2:
            text = node_text(name, op_type, f"T={type_enum(dtype)}", tensors)
            raise ValueError(
                f"Shape must be rank 2 but is rank {shape.rank} for {text}."
                if op_type == "MatMul"
                else f"Shape must be at least rank 2 but is rank {shape.rank} for {text}."
            )
    a_dims, b_dims = left.as_list(), right.as_list()
    rows = a_dims[-1] if flags[0] else a_dims[-2]
    inner_a = a_dims[-2] if flags[0] else a_dims[-1]
    inner_b = b_dims[-1] if flags[1] else b_dims[-2]
    cols = b_dims[-2] if flags[1] else b_dims[-1]
    if inner_a is not None and inner_b is not None and inner_a != inner_b:
        attrs = (
            f"T={type_enum(dtype)}, transpose_a={str(flags[0]).lower()}, "
            f"transpose_b={str(flags[1]).lower()}"
        )
        text = node_text(name, op_type, attrs, tensors)
        raise ValueError(f"Dimensions must be equal, but are {inner_a} and {inner_b} for {text}.")
    batch: list[int | None] = []
    a_batch, b_batch = a_dims[:-2], b_dims[:-2]
    length = max(len(a_batch), len(b_batch))
    a_batch = [1] * (length - len(a_batch)) + a_batch
    b_batch = [1] * (length - len(b_batch)) + b_batch
    for x, y in zip(a_batch, b_batch, strict=False):
        if x == 1:
            batch.append(y)
        elif y == 1 or x == y:
            batch.append(x)
        elif x is None or y is None:
            batch.append(x if y is None else y)
        else:
            raise ValueError(
                f"Dimensions must be equal, but are {x} and {y} for the batch dimensions of "
                f"'{name}' ({op_type})."
            )
    return TensorShape([*batch, rows, cols])


def matrix_transpose(a: Any, name: str = "matrix_transpose", conjugate: bool = False) -> Any:
    """``a`` with its last two dimensions swapped (conjugated too with ``conjugate``).

    Raises:
        ValueError: a rank below 2 (when known).
    """
    from tf_accum.graph.array_ops import concat, range_, rank, transpose
    from tf_accum.graph.op_building import build_in, convert_input

    with build_in([a]):
        source = convert_input(a, param="a")
        static = _static_of(source)
        if static.rank is not None:
            if static.rank < 2:
                raise ValueError(
                    f"Argument `a` should be a (batch) matrix with rank >= 2.  Received `a` = "
                    f"{a} with shape: {static}"
                )
            perm: Any = [*range(static.rank - 2), static.rank - 1, static.rank - 2]
        else:
            count = rank(source)
            perm = concat([range_(count - 2), [count - 1, count - 2]], 0)
        return transpose(source, perm, name=name, conjugate=conjugate)
