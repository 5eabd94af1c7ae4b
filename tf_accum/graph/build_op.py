"""Building one op of TensorFlow's type from its inputs, in a graph or eagerly:
the pattern the model-math modules (``nn_ops``, ``random_ops``, ``clip_ops``)
share.

Inputs are converted as an op definition converts them (``op_def_inputs``);
a dtype the op definition does not allow is a TypeError when the op is built
and an InvalidArgumentError eagerly, with TensorFlow's messages. Eagerly the
kernel runs at once and its numpy results are returned.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tf_accum import errors
from tf_accum.dtypes import DType, as_dtype
from tf_accum.graph import mode
from tf_accum.graph.graph import Graph, Tensor, is_symbolic
from tf_accum.graph.math_convert import array_as, default_array
from tf_accum.graph.math_ops import Converted, eager_value, materialize, op_def_inputs
from tf_accum.graph.ops import dtype_of_array
from tf_accum.graph.tensor_shape import TensorShape

Kernel = Callable[[Any, list[Any]], Sequence[Any]]
ShapeRule = Callable[[list[Tensor]], Sequence[tuple[DType, TensorShape]]]


def operand(value: Any) -> Any:
    """A graph tensor as it is; eagerly, an object holding a value (an eager
    Variable) as that value, of its own dtype."""
    if is_symbolic(value) or not hasattr(value, "numpy"):
        return value
    array = np.asarray(value.numpy())
    return Converted(array, dtype_of_array(array))


def same_dtype_inputs(
    op_type: str, pairs: Sequence[tuple[str, Any]], allowed: Sequence[str]
) -> tuple[DType, list[Any]]:
    """Inputs sharing one dtype (the first fixes it), refused unless ``allowed``."""
    dtype, converted = op_def_inputs(op_type, [(p, operand(v)) for p, v in pairs], allowed=False)
    refuse_dtype(op_type, pairs[0][0], dtype, allowed)
    return dtype, converted


def refuse_dtype(op_type: str, param: str, dtype: DType, allowed: Sequence[str]) -> None:
    """TypeError (when building) or InvalidArgumentError (eagerly) for a dtype
    not in ``allowed``, the attribute's list in TensorFlow's order."""
    if dtype.name in allowed:
        return
    if mode.building_graph() is None:
        kernel_names = ", ".join(as_dtype(name).kernel_name for name in allowed)
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Value for attr 'T' of {dtype.kernel_name} is not in the list of allowed values: "
            f"{kernel_names}\n\t; NodeDef: {{{{node {op_type}}}}}",
        )
    raise TypeError(
        f"Value passed to parameter '{param}' has DataType {dtype.name} not in list of "
        f"allowed values: {', '.join(allowed)}"
    )


def build(
    op_type: str,
    name: str | None,
    inputs: Sequence[tuple[str, Any]],
    outputs: ShapeRule,
    kernel: Kernel,
    attrs: dict[str, Any] | None = None,
) -> Any:
    """The op ``op_type`` of converted ``inputs`` (``(param, value)`` pairs).

    Returns its output (or a tuple of them): Tensors when a graph is being
    built, numpy arrays eagerly (``outputs`` is not consulted then).
    """
    graph = mode.building_graph()
    if graph is None:
        results = kernel(None, [np.asarray(eager_value(v)) for _, v in inputs])
        return results[0] if len(results) == 1 else tuple(results)
    return build_in(graph, op_type, name, inputs, outputs, kernel, attrs)


def build_in(
    graph: Graph,
    op_type: str,
    name: str | None,
    inputs: Sequence[tuple[str, Any]],
    outputs: ShapeRule,
    kernel: Kernel,
    attrs: dict[str, Any] | None = None,
) -> Any:
    """:func:`build` in ``graph``: the op's output Tensor, or a tuple of them."""
    with graph.as_default(), graph.name_scope(name or op_type) as full:
        tensors = [materialize(graph, v, p) for p, v in inputs]
        op = graph.create_op(op_type, tensors, outputs(tensors), kernel, name=full, attrs=attrs)
    return op.outputs[0] if len(op.outputs) == 1 else tuple(op.outputs)


def same_as_first(tensors: list[Tensor]) -> list[tuple[DType, TensorShape]]:
    """One output of the first input's dtype and static shape."""
    return [(tensors[0].dtype, tensors[0].shape)]


def as_input(value: Any, dtype: DType | None = None) -> Any:
    """A value to pass to :func:`build`: a Tensor as it is, anything else as a
    numpy array (of ``dtype`` if given)."""
    value = operand(value)
    if isinstance(value, Converted) or is_symbolic(value):
        return value
    array = array_as(value, dtype) if dtype is not None else default_array(value)
    return Converted(array, dtype_of_array(array))
