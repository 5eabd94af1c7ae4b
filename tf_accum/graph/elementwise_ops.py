"""The few elementwise ops ``tf.nn`` builds its composite losses from:
``Exp``, ``Log1p``, ``GreaterEqual`` and ``Select``, with TensorFlow's op
types, so that their gradients are the ones registered for those types.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tf_accum.dtypes import DType
from tf_accum.dtypes import bool as bool_
from tf_accum.graph.graph import Tensor
from tf_accum.graph.math_ops import building_in, graph_of
from tf_accum.graph.op_building import build, same_as_first, same_dtype_inputs
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
    from tf_accum.graph.math_ops import Converted
    from tf_accum.graph.op_building import as_input

    order = [int(p) for p in perm]
    with building_in(graph_of([x])):
        value = as_input(x)
        dtype = value.dtype if hasattr(value, "dtype") else None

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
