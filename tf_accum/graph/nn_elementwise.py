"""The elementwise and array ops that ``tf.nn``'s composite functions, the
clip ops and ``tf.losses`` are built from (``Exp``, ``Log1p``, ``Select``,
``SelectV2``, ``Maximum``, ``Minimum``, ``Sqrt``, ``Pack``, ``Reshape``,
``Transpose``, comparisons, ``DivNoNan``, ``SquaredDifference``), with
TensorFlow's op types, so that their gradients are the ones registered for
those types.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tf_accum.dtypes import DType
from tf_accum.dtypes import bool as bool_
from tf_accum.graph.build_op import build, same_as_first, same_dtype_inputs
from tf_accum.graph.graph import Tensor
from tf_accum.graph.math_ops import building_in, graph_of
from tf_accum.graph.tensor_shape import TensorShape

_FLOATS_AND_COMPLEX = ("bfloat16", "float16", "float32", "float64", "complex64", "complex128")
_REAL = ("float32", "float64", "int32", "uint8", "int16", "int8", "int64", "bfloat16", "uint16",
         "float16", "uint32", "uint64")  # fmt: skip


def _unary(op_type: str, fn: Any, x: Any, name: str | None) -> Any:
    with building_in(graph_of([x])):
        dtype, inputs = same_dtype_inputs(op_type, [("x", x)], _FLOATS_AND_COMPLEX)

        def kernel(context: Any, arrays: list[Any]) -> Sequence[Any]:
            with np.errstate(all="ignore"):
                return (np.asarray(fn(np.asarray(arrays[0]))).astype(dtype.numpy_dtype),)

        return build(op_type, name, [("x", inputs[0])], same_as_first, kernel, {"T": dtype})


def exp(x: Any, name: str | None = None) -> Any:
    """``e ** x`` elementwise."""
    return _unary("Exp", np.exp, x, name)


def log1p(x: Any, name: str | None = None) -> Any:
    """``log(1 + x)`` elementwise, accurate for small ``x``."""
    return _unary("Log1p", np.log1p, x, name)


def greater_equal(x: Any, y: Any, name: str | None = None) -> Any:
    """``x >= y`` elementwise, for two tensors of one shape."""
    with building_in(graph_of([x, y])):
        dtype, inputs = same_dtype_inputs("GreaterEqual", [("x", x), ("y", y)], _REAL)

        def outputs(tensors: list[Tensor]) -> list[tuple[DType, TensorShape]]:
            return [(bool_, tensors[0].shape)]

        return build(
            "GreaterEqual",
            name,
            [("x", inputs[0]), ("y", inputs[1])],
            outputs,
            lambda context, arrays: (np.greater_equal(arrays[0], arrays[1]),),
            {"T": dtype},
        )


def select(condition: Any, x: Any, y: Any, name: str | None = None) -> Any:
    """``x`` where ``condition``, else ``y`` (``Select``: all three of one shape)."""
    with building_in(graph_of([condition, x, y])):
        dtype, inputs = same_dtype_inputs("Select", [("t", x), ("e", y)], _REAL + ("complex64",))
        return build(
            "Select",
            name,
            [("condition", condition), ("t", inputs[0]), ("e", inputs[1])],
            lambda tensors: [(dtype, tensors[1].shape)],
            lambda context, arrays: (np.where(arrays[0], arrays[1], arrays[2]),),
            {"T": dtype},
        )


def transpose(x: Any, perm: Sequence[int], name: str | None = None) -> Any:
    """``Transpose`` of ``x`` by a known permutation ``perm``."""
    from tf_accum.dtypes import int32
    from tf_accum.graph.build_op import as_input
    from tf_accum.graph.math_ops import Converted

    order = [int(p) for p in perm]
    with building_in(graph_of([x])):
        value = as_input(x)
        dtype = value.dtype

        def outputs(tensors: list[Tensor]) -> list[tuple[DType, TensorShape]]:
            shape = tensors[0].shape
            dims = None if shape.rank is None else [shape.as_list()[p] for p in order]
            return [(tensors[0].dtype, TensorShape(dims))]

        return build(
            "Transpose",
            name,
            [("x", value), ("perm", Converted(np.asarray(order, np.int32), int32))],
            outputs,
            lambda context, arrays: (np.transpose(np.asarray(arrays[0]), order),),
            {"T": dtype, "Tperm": int32},
        )


def _broadcasting(op_type: str, fn: Any, x: Any, y: Any, name: str | None, out: Any = None) -> Any:
    from tf_accum.graph.build_op import as_input
    from tf_accum.graph.graph import is_symbolic
    from tf_accum.graph.math_shapes import broadcast_shape
    from tf_accum.graph.ops import as_tensor

    with building_in(graph_of([x, y])):
        if not is_symbolic(x) and is_symbolic(y):
            x = as_input(x, as_tensor(y).dtype)  # a value takes the tensor's dtype
        dtype, inputs = same_dtype_inputs(op_type, [("x", x), ("y", y)], _REAL)
        result_dtype = out or dtype

        def kernel(context: Any, arrays: list[Any]) -> Sequence[Any]:
            with np.errstate(all="ignore"):
                return (np.asarray(fn(arrays[0], arrays[1])).astype(result_dtype.numpy_dtype),)

        def outputs(tensors: list[Tensor]) -> list[tuple[DType, TensorShape]]:
            return [(result_dtype, broadcast_shape(op_type, op_type, tensors[0], tensors[1]))]

        return build(
            op_type, name, [("x", inputs[0]), ("y", inputs[1])], outputs, kernel, {"T": dtype}
        )


def maximum(x: Any, y: Any, name: str | None = None) -> Any:
    """The larger of ``x`` and ``y`` elementwise, with broadcasting (NaN wins)."""
    return _broadcasting("Maximum", np.maximum, x, y, name)


def minimum(x: Any, y: Any, name: str | None = None) -> Any:
    """The smaller of ``x`` and ``y`` elementwise, with broadcasting (NaN wins)."""
    return _broadcasting("Minimum", np.minimum, x, y, name)


def greater(x: Any, y: Any, name: str | None = None) -> Any:
    """``x > y`` elementwise, with broadcasting."""
    return _broadcasting("Greater", np.greater, x, y, name, out=bool_)


def sqrt(x: Any, name: str | None = None) -> Any:
    """The square root, elementwise."""
    return _unary("Sqrt", np.sqrt, x, name)


def select_v2(condition: Any, x: Any, y: Any, name: str | None = None) -> Any:
    """``x`` where ``condition``, else ``y``; the three broadcast (``SelectV2``)."""
    with building_in(graph_of([condition, x, y])):
        dtype, inputs = same_dtype_inputs("SelectV2", [("t", x), ("e", y)], _REAL)

        def outputs(tensors: list[Tensor]) -> list[tuple[DType, TensorShape]]:
            from tf_accum.graph.math_shapes import broadcast_shape

            shape = broadcast_shape("SelectV2", "SelectV2", tensors[1], tensors[2])
            return [(dtype, shape)]

        return build(
            "SelectV2",
            name,
            [("condition", condition), ("t", inputs[0]), ("e", inputs[1])],
            outputs,
            lambda context, arrays: (np.where(arrays[0], arrays[1], arrays[2]),),
            {"T": dtype},
        )


def stack(values: Sequence[Any], name: str | None = None) -> Any:
    """``Pack`` of tensors of one dtype and shape along a new first axis."""
    with building_in(graph_of(list(values))):
        pairs = [(f"values_{i}", v) for i, v in enumerate(values)]
        dtype, inputs = same_dtype_inputs("Pack", pairs, _REAL)

        def outputs(tensors: list[Tensor]) -> list[tuple[DType, TensorShape]]:
            shape = tensors[0].shape
            dims = None if shape.rank is None else [len(tensors), *shape.as_list()]
            return [(dtype, TensorShape(dims))]

        return build(
            "Pack",
            name or "stack",
            [(p, v) for (p, _), v in zip(pairs, inputs, strict=True)],
            outputs,
            lambda context, arrays: (np.stack([np.asarray(a) for a in arrays]),),
            {"T": dtype, "N": len(values), "axis": 0},
        )


def not_equal(x: Any, y: Any, name: str | None = None) -> Any:
    """``x != y`` elementwise, with broadcasting."""
    return _broadcasting("NotEqual", np.not_equal, x, y, name, out=bool_)


def _div_no_nan(x: Any, y: Any) -> Any:
    safe = np.where(y == 0, np.ones_like(y), y)
    return np.where(y == 0, np.zeros_like(x * safe), x / safe)


def div_no_nan(x: Any, y: Any, name: str | None = None) -> Any:
    """``x / y``, but 0 where ``y`` is 0 (``DivNoNan``), with broadcasting."""
    return _broadcasting("DivNoNan", _div_no_nan, x, y, name)


def squared_difference(x: Any, y: Any, name: str | None = None) -> Any:
    """``(x - y) ** 2`` elementwise, with broadcasting (``SquaredDifference``)."""
    return _broadcasting("SquaredDifference", lambda a, b: np.square(a - b), x, y, name)


def reshape(tensor: Any, shape: Sequence[int], name: str | None = None) -> Any:
    """``Reshape`` to a known ``shape`` (one dimension may be -1)."""
    from tf_accum.dtypes import int32
    from tf_accum.graph.build_op import as_input
    from tf_accum.graph.math_ops import Converted

    dims = [int(d) for d in shape]
    with building_in(graph_of([tensor])):
        value = as_input(tensor)

        def outputs(tensors: list[Tensor]) -> list[tuple[DType, TensorShape]]:
            known = tensors[0].shape
            out: list[int | None] = [None if d == -1 else d for d in dims]
            if -1 in dims and known.is_fully_defined():
                rest = int(np.prod([d for d in dims if d != -1]))
                total = int(np.prod(known.as_list()))  # type: ignore[arg-type]
                out[dims.index(-1)] = total // rest if rest else 0
            return [(tensors[0].dtype, TensorShape(out))]

        return build(
            "Reshape",
            name,
            [("tensor", value), ("shape", Converted(np.asarray(dims, np.int32), int32))],
            outputs,
            lambda context, arrays: (np.reshape(np.asarray(arrays[0]), dims),),
            {"T": value.dtype, "Tshape": int32},
        )


def shape(input: Any, name: str | None = None) -> Any:  # noqa: A002
    """``Shape``: ``input``'s shape as an int32 vector, read when the op runs."""
    from tf_accum.dtypes import int32
    from tf_accum.graph.build_op import as_input

    with building_in(graph_of([input])):
        value = as_input(input)

        def outputs(tensors: list[Tensor]) -> list[tuple[DType, TensorShape]]:
            rank = tensors[0].shape.rank
            return [(int32, TensorShape([rank]))]

        return build(
            "Shape",
            name,
            [("input", value)],
            outputs,
            lambda context, arrays: (np.asarray(np.shape(arrays[0]), np.int32),),
            {"T": value.dtype, "out_type": int32},
        )
