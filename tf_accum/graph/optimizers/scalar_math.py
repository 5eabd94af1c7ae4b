"""The few element-wise ops the optimizers and schedules build beside the Tensor
operators: ``Sqrt``, ``Maximum``, ``Minimum``, ``Pow``, ``Floor``, one node each,
in the inputs' dtype (eagerly on numpy values)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tf_accum.graph import mode
from tf_accum.graph.graph import Tensor
from tf_accum.graph.math_shapes import broadcast_shape
from tf_accum.graph.ops import convert_to_tensor

Array = np.ndarray[Any, Any]


def _node(op_type: str, function: Callable[..., Array], *values: Any) -> Any:
    graph = mode.building_graph()
    if graph is None:
        return function(*(np.asarray(v) for v in values))
    tensors: list[Tensor] = []
    for value in values:
        hint = next((t.dtype for t in tensors), None)
        tensors.append(convert_to_tensor(value, dtype_hint=hint))
    dtype = tensors[0].dtype
    for tensor in tensors[1:]:
        if tensor.dtype != dtype:
            raise TypeError(
                f"Input 'y' of '{op_type}' Op has type {tensor.dtype.name} that does not match "
                f"type {dtype.name} of argument 'x'."
            )
    shape = tensors[0].shape
    if len(tensors) == 2:
        shape = broadcast_shape(graph.unique_name(op_type, False), op_type, *tensors)
    numpy_dtype = dtype.numpy_dtype
    op = graph.create_op(
        op_type,
        tensors,
        [(dtype, shape)],
        lambda context, inputs: (np.asarray(function(*inputs), numpy_dtype),),
        name=op_type,
        attrs={"T": dtype},
    )
    return op.outputs[0]


def sqrt(x: Any) -> Any:
    return _node("Sqrt", np.sqrt, x)


def maximum(x: Any, y: Any) -> Any:
    return _node("Maximum", np.maximum, x, y)


def minimum(x: Any, y: Any) -> Any:
    return _node("Minimum", np.minimum, x, y)


def power(x: Any, y: Any) -> Any:
    return _node("Pow", np.power, x, y)


def floor(x: Any) -> Any:
    return _node("Floor", np.floor, x)


__all__ = ["floor", "maximum", "minimum", "power", "sqrt"]
