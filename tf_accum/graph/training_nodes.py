"""The training ops (``ResourceApplyAdam``, ``SparseApplyAdagrad``, ...) in graph mode.

A call while a graph is being built makes a node whose kernel changes the
variables in the running session's variable store, at one point for the
variable and its slots, with :func:`tf_accum.raw_ops.training.updated_values`
(the function the eager ops call). Build-time checks are TensorFlow's: input
dtypes must be the variables' (TypeError), scalar inputs rank 0 and the
gradient of the variable's shape where static shapes say so (ValueError).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tf_accum.dtypes import DType, int32, int64
from tf_accum.graph.graph import Graph, Tensor, is_symbolic
from tf_accum.graph.ops import as_tensor, graph_input, infer_array
from tf_accum.graph.tensor_shape import TensorShape
from tf_accum.graph.variables import Variable, store_of, variable_of
from tf_accum.raw_ops.training import (
    TRAINING_OPS,
    check_kernel_dtype,
    kernel_dtypes,
    updated_values,
)

Array = np.ndarray[Any, Any]


def build_training_op(
    graph: Graph, op_type: str, func: Callable[..., Any], kwargs: dict[str, Any]
) -> Any:
    """Build ``op_type`` into ``graph``: an Operation (``Resource*`` ops) or the
    Tensor of ``var``'s new value (the ref forms).

    Raises:
        TypeError: a missing or unknown argument; a variable argument that is
            not a variable (or, for ``Resource*`` ops, its handle); an input
            of another dtype than the variables'.
        ValueError: static shapes TensorFlow's shape function refuses.
    """
    from tf_accum.graph.raw_op_nodes import check_arguments

    check_arguments(op_type, func, kwargs)
    spec = TRAINING_OPS[op_type]
    variables = [_variable(op_type, name, kwargs[name], spec.resource) for name in spec.variables]
    dtype = variables[0].dtype
    for name, variable in zip(spec.variables[1:], variables[1:], strict=True):
        if variable.dtype != dtype:
            raise TypeError(
                f"Input '{name}' of '{op_type}' Op has type {variable.dtype.name} that does not "
                f"match type {dtype.name} of argument 'var'."
            )
    op_name = graph.unique_name(kwargs.get("name") or op_type)
    inputs: list[Tensor] = []
    for name in spec.arguments:
        if name in spec.variables:
            inputs.append(variables[spec.variables.index(name)].op.outputs[0])
        elif name == "indices":
            inputs.append(_indices(graph, op_type, kwargs[name], f"{op_name}/indices/"))
        else:
            inputs.append(_typed_input(graph, op_type, name, kwargs[name], dtype, op_name))
    _check_static_shapes(op_type, op_name, spec.arguments, inputs, variables)
    attrs: dict[str, Any] = {"T": dtype}
    attrs.update((key, bool(kwargs.get(key, default))) for key, default in spec.attrs)
    if spec.sparse:
        attrs["Tindices"] = inputs[spec.arguments.index("indices")].dtype
    outputs = [] if spec.resource else [(dtype, variables[0].shape)]
    op = graph.create_op(
        op_type,
        inputs,
        outputs,
        _kernel(op_type, spec.arguments, spec.variables, attrs),
        name=op_name + "/",  # exact: the name was made unique above
        attrs=attrs,
    )
    return op if spec.resource else op.outputs[0]


def _variable(op_type: str, name: str, value: Any, resource: bool) -> Variable:
    found = variable_of(value)
    if found is None or found.graph is None:
        wanted = "a variable's handle (Variable.handle)" if resource else "a Variable"
        raise TypeError(
            f"Input '{name}' of '{op_type}' Op must be {wanted} of the graph being built, not "
            f"{value!r}"
        )
    return found


def _typed_input(
    graph: Graph, op_type: str, name: str, value: Any, dtype: DType, op_name: str
) -> Tensor:
    if is_symbolic(value) or isinstance(value, Variable):
        tensor = as_tensor(value)
        if tensor.dtype != dtype:
            raise TypeError(
                f"Input '{name}' of '{op_type}' Op has type {tensor.dtype.name} that does not "
                f"match type {dtype.name} of argument 'var'."
            )
        return tensor
    own = getattr(value, "dtype", None)
    if own is not None and np.dtype(own) != dtype.numpy_dtype:
        raise TypeError(
            f"Input '{name}' of '{op_type}' Op has type {np.dtype(own)} that does not "
            f"match type {dtype.name} of argument 'var'."
        )
    return graph_input(graph, value, dtype, name=f"{op_name}/{name}/")


def _indices(graph: Graph, op_type: str, value: Any, name: str) -> Tensor:
    if is_symbolic(value):
        tensor = as_tensor(value)
    else:
        array = infer_array(value)
        if array.size == 0 and array.dtype.kind == "f":
            array = array.astype(np.int32)
        tensor = graph_input(graph, array, name=name)
    if tensor.dtype not in (int32, int64):
        raise TypeError(
            f"Value passed to parameter 'indices' has DataType {tensor.dtype.name} not in list "
            f"of allowed values: int32, int64 ({op_type})"
        )
    return tensor


def _check_static_shapes(
    op_type: str,
    op_name: str,
    arguments: Sequence[str],
    inputs: Sequence[Tensor],
    variables: Sequence[Variable],
) -> None:
    """As TensorFlow's shape functions: scalars of rank 0, slots and (dense)
    gradients of ``var``'s shape, sparse gradients ``[n] + var.shape[1:]``."""
    spec = TRAINING_OPS[op_type]
    shapes = [
        variables[spec.variables.index(a)].shape if a in spec.variables else t.shape
        for a, t in zip(arguments, inputs, strict=True)
    ]

    def refuse(detail: str) -> ValueError:
        sources = ", ".join(t.op.name for t in inputs)
        listed = ", ".join(_text(s) for s in shapes)
        return ValueError(
            f"{detail} for '{{{{node {op_name}}}}} = {op_type}[T={variables[0].dtype.name}]"
            f"({sources})' with input shapes: {listed}."
        )

    var_shape = variables[0].shape
    for argument, shape in zip(arguments, shapes, strict=True):
        if argument in spec.scalars and shape.rank not in (None, 0):
            raise refuse(f"Shape must be rank 0 but is rank {shape.rank}")
        if argument in spec.variables[1:] or (argument == spec.gradient and not spec.sparse):
            _merge(var_shape, shape, refuse)
    if spec.sparse:
        indices = shapes[arguments.index("indices")]
        grad = shapes[arguments.index("grad")]
        if indices.rank not in (None, 1):
            raise refuse(f"Shape must be rank 1 but is rank {indices.rank}")
        if var_shape.rank is not None and grad.rank is not None:
            if var_shape.rank == 0:
                raise refuse("Shape must be at least rank 1 but is rank 0")
            tail = TensorShape([None, *(var_shape.as_list() or [])[1:]])
            _merge(tail, grad, refuse)


def _merge(first: TensorShape, second: TensorShape, refuse: Callable[[str], ValueError]) -> None:
    if first.rank is None or second.rank is None:
        return
    if first.rank != second.rank:
        raise refuse(f"Shapes must be equal rank, but are {first.rank} and {second.rank}")
    for axis, (a, b) in enumerate(zip(first.as_list() or [], second.as_list() or [], strict=True)):
        if a is not None and b is not None and a != b:
            raise refuse(f"Dimension {axis} in both shapes must be equal, but are {a} and {b}")


def _text(shape: TensorShape) -> str:
    if shape.rank is None:
        return "?"
    return "[" + ",".join("?" if d is None else str(d) for d in shape.as_list() or []) + "]"


def _kernel(
    op_type: str, arguments: Sequence[str], names: Sequence[str], attrs: dict[str, Any]
) -> Callable[[Any, list[Any]], Sequence[Any]]:
    dtype = attrs["T"]
    flags = {key: value for key, value in attrs.items() if key not in ("T", "Tindices")}
    positions = [arguments.index(name) for name in names]
    others = [(i, a) for i, a in enumerate(arguments) if a not in names]
    resource = TRAINING_OPS[op_type].resource
    has_kernel = dtype.name in kernel_dtypes(op_type)

    def kernel(context: Any, inputs: list[Any]) -> Sequence[Any]:
        if not has_kernel:
            check_kernel_dtype(op_type, dtype)  # as TensorFlow: refused when it runs
        variables = [inputs[i] for i in positions]
        given = {a: np.asarray(inputs[i]) for i, a in others}
        fresh = store_of(context).update_together(
            variables, lambda current: updated_values(op_type, current, given, flags)
        )
        return () if resource else (fresh[0],)

    return kernel


__all__ = ["build_training_op"]
