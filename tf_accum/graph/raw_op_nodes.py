"""Raw ops in graph mode: each call builds a node whose kernel is the eager op.

Inputs (handles, steps, counts, gradients) may be Tensors or Python values,
which become constants; attributes (dtype, shape, names, reduction_type,
has_known_shape, ...) are fixed at build time. When a session runs the node,
the kernel calls the very function the eager op calls, against the session's
own resource table, so graph mode and eager mode cannot drift apart.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tf_accum.accumulators.sparse import SparseTakeResult
from tf_accum.dtypes import DType, as_dtype, resource, string_ref
from tf_accum.graph import mode
from tf_accum.graph.executor import RunContext
from tf_accum.graph.graph import Graph, Tensor, is_symbolic
from tf_accum.graph.ops import as_tensor, graph_input
from tf_accum.graph.tensor_shape import TensorShape
from tf_accum.raw_ops.arguments import truncated_integers
from tf_accum.raw_ops.constructors import accumulator_dtype, string_attr
from tf_accum.raw_ops.keyword_only import NOT_BUILT, set_graph_builder, snake_case
from tf_accum.raw_ops.op_table import (
    COMPONENT_TYPES,
    COMPONENTS,
    HANDLE,
    OPS,
    VALUES,
    OpSignature,
)
from tf_accum.raw_ops.take_attempts import TAKE_OPS, StartedTake, start_take
from tf_accum.raw_ops.timeout import check_timeout
from tf_accum.raw_ops.training import TRAINING_OPS

# Inputs whose kernel check is "must be a scalar": a known static rank other
# than 0 is refused when the node is built, as TensorFlow's shape functions do.
_SCALAR_INPUTS = ("local_step", "new_global_step", "num_required", "n")
_HANDLE_DTYPES = (resource, string_ref)


def _build_if_building(op_type: str, func: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    """A raw op's call while graph mode is in use: a node in the graph this
    thread builds, or NOT_BUILT when it builds none (the op then acts)."""
    graph = mode.building_graph()
    if graph is None:
        return NOT_BUILT
    return build(graph, op_type, func, kwargs)


def graph_mode_changed(used: bool) -> None:
    """Called by tf_accum/graph/mode.py when ops start or stop possibly
    building into a graph: the op layer consults graph mode only while it is
    in use, so eager calls pay nothing for it otherwise."""
    set_graph_builder(_build_if_building if used else None)


def build(graph: Graph, op_type: str, func: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    """Build ``op_type`` into ``graph``; returns its Operation, Tensor or tuple of Tensors.

    Raises:
        TypeError: a missing or unknown argument, an input of the wrong dtype,
            or a dtype attribute outside the accumulator dtypes.
        ValueError: a scalar input whose static shape is not a scalar.
    """
    if op_type in TRAINING_OPS:
        from tf_accum.graph.training_nodes import build_training_op

        return build_training_op(graph, op_type, func, kwargs)
    spec = OPS[op_type]
    check_arguments(op_type, func, kwargs)
    attrs = {k: v for k, v in kwargs.items() if k not in dict(spec.inputs) and k != "name"}
    if "dtype" in attrs:
        attrs["dtype"] = (
            accumulator_dtype(attrs["dtype"]) if spec.constructor else as_dtype(attrs["dtype"])
        )
    if spec.constructor:
        # string attributes of the wrong type are refused when built, as TensorFlow's builder does
        for key in ("container", "shared_name"):
            attrs[key] = string_attr(attrs.get(key), key)
    if COMPONENT_TYPES in attrs:
        attrs[COMPONENT_TYPES] = _dtype_list(attrs[COMPONENT_TYPES])
    if spec.blocking:
        # a bad timeout is a Python argument error: refused when built, as eagerly
        attrs["timeout"] = check_timeout(attrs.get("timeout"))
    op_name = graph.unique_name(kwargs.get("name") or op_type)
    inputs = [
        _input(graph, op_type, op_name, arg, kind, kwargs[arg])
        for arg, kind in spec.inputs
        if kind != COMPONENTS
    ]
    _check_scalars(op_type, op_name, spec, inputs)
    for arg, kind in spec.inputs:
        if kind == COMPONENTS:  # always the last input
            inputs += _component_inputs(graph, op_name, kwargs[arg])
    if spec.outputs == (COMPONENT_TYPES,):
        outputs = [(dtype, TensorShape(None)) for dtype in attrs[COMPONENT_TYPES]]
    else:
        outputs = [(_output_dtype(spec, kind, attrs), TensorShape(None)) for kind in spec.outputs]
    if spec.constructor or spec.scalar_output:
        outputs = [(outputs[0][0], TensorShape([]))]
    kernel = _constructor_kernel(func, attrs) if spec.constructor else _kernel(func, spec, attrs)
    op = graph.create_op(
        op_type,
        inputs,
        outputs,
        kernel,
        name=op_name + "/",  # exact: the name was made unique above
        attrs=attrs,
        blocking=spec.blocking,
    )
    if spec.outputs == (COMPONENT_TYPES,):
        return list(op.outputs)
    if not op.outputs:
        return op
    if len(op.outputs) == 3:
        return SparseTakeResult(*op.outputs)  # type: ignore[arg-type]
    return op.outputs[0]


def check_arguments(op_type: str, func: Callable[..., Any], kwargs: dict[str, Any]) -> None:
    """TypeError, worded as Python words it, for a missing or unknown argument."""
    parameters = inspect.signature(func).parameters
    function = snake_case(op_type)
    for key in kwargs:
        if key not in parameters:
            raise TypeError(f"{function}() got an unexpected keyword argument '{key}'")
    missing = [
        f"'{name}'"
        for name, parameter in parameters.items()
        if parameter.default is inspect.Parameter.empty and name not in kwargs
    ]
    if missing:
        listed = (
            missing[0]
            if len(missing) == 1
            else ", ".join(missing[:-1]) + ("," if len(missing) > 2 else "") + f" and {missing[-1]}"
        )
        noun = "argument" if len(missing) == 1 else "arguments"
        raise TypeError(f"{function}() missing {len(missing)} required positional {noun}: {listed}")


def _dtype_list(value: Any) -> tuple[DType, ...]:
    """A list(type) attribute (a single dtype is a list of one)."""
    if isinstance(value, (list, tuple)):
        return tuple(as_dtype(t) for t in value)
    return (as_dtype(value),)


def _component_inputs(graph: Graph, op_name: str, value: Any) -> list[Tensor]:
    """A list input: each value a tensor of its own dtype."""
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    return [graph_input(graph, v, name=f"{op_name}/component_{i}/") for i, v in enumerate(values)]


def _output_dtype(spec: OpSignature, kind: str, attrs: dict[str, Any]) -> DType:
    if kind == "dtype":
        found: DType = attrs["dtype"]
        return found
    return as_dtype(kind)


def _input(graph: Graph, op_type: str, op_name: str, arg: str, kind: str, value: Any) -> Tensor:
    const_name = f"{op_name}/{arg}/"
    if kind == HANDLE:
        if is_symbolic(value):
            tensor = as_tensor(value)
            if tensor.dtype not in _HANDLE_DTYPES:
                raise TypeError(
                    f"Input '{arg}' of '{op_type}' Op has type {tensor.dtype.name} that does not "
                    "match expected type of resource (an accumulator handle)."
                )
            return tensor
        return _handle_constant(graph, value, const_name)
    if kind == VALUES:
        return graph_input(graph, value, name=const_name)
    wanted = as_dtype(kind)
    if is_symbolic(value):
        tensor = as_tensor(value)
        if tensor.dtype != wanted:
            raise TypeError(
                f"Input '{arg}' of '{op_type}' Op has type {tensor.dtype.name} that does not "
                f"match expected type of {wanted.name}."
            )
        return tensor
    return graph_input(graph, _integer_array(value, arg, op_type, wanted), name=const_name)


def _integer_array(value: Any, arg: str, op_type: str, wanted: DType) -> np.ndarray[Any, Any]:
    """A step or count as an integer constant: integers as they are; numpy floats
    and bools cast, as TensorFlow's graph builder casts them (a float truncates
    toward zero, as eagerly); Python floats and bools refused.

    Raises:
        TypeError: a Python float or bool, or what is not a number.
        ValueError: a numpy float without an integer value in ``wanted``'s range
            (NaN, an infinity: docs/departures.md T21).
    """
    array = np.asarray(value)
    if array.dtype.kind in "iu" or (array.size == 0 and array.dtype.kind == "f"):
        return array.astype(wanted.numpy_dtype)
    if isinstance(value, (np.ndarray, np.generic)) and array.dtype.kind in "fb":
        whole = truncated_integers(array, value, arg) if array.dtype.kind == "f" else array
        info = np.iinfo(wanted.numpy_dtype)
        if whole.size and not (info.min <= whole.min() and whole.max() <= info.max):
            raise ValueError(
                f"Argument {arg}={value!r} is out of range for {wanted.name} "
                f"([{info.min}, {info.max}])"
            )
        return whole.astype(wanted.numpy_dtype)
    shown = value if not isinstance(value, np.ndarray) else value.tolist()
    raise TypeError(
        f"Expected {wanted.name} passed to parameter '{arg}' of op '{op_type}', got {shown!r} of "
        f"type '{type(value).__name__}' instead. Error: Expected {wanted.name}, but got "
        f"{shown!r} of type '{type(value).__name__}'."
    )


def _handle_constant(graph: Graph, value: Any, name: str) -> Tensor:
    """An integer handle made outside this graph, as a constant input."""
    from tf_accum.raw_ops.arguments import handle_of

    handle = handle_of(value)
    op = graph.create_op(
        "Const",
        [],
        [(resource, TensorShape([]))],
        lambda context, inputs: (handle,),
        name=name,
    )
    return op.outputs[0]


def _check_scalars(op_type: str, op_name: str, spec: OpSignature, inputs: Sequence[Tensor]) -> None:
    single = [(arg, kind) for arg, kind in spec.inputs if kind != COMPONENTS]
    for (arg, _), tensor in zip(single, inputs, strict=True):
        rank = tensor.shape.rank
        if arg in _SCALAR_INPUTS and rank is not None and rank != 0:
            shapes = ", ".join(_shape_text(t.shape) for t in inputs)
            sources = ", ".join(t.op.name for t in inputs)
            raise ValueError(
                f"Shape must be rank 0 but is rank {rank} for '{{{{node {op_name}}}}} = "
                f"{op_type}[]({sources})' with input shapes: {shapes}."
            )


def _shape_text(shape: TensorShape) -> str:
    if shape.rank is None:
        return "?"
    return "[" + ",".join("?" if d is None else str(d) for d in shape.as_list()) + "]"


def _constructor_kernel(func: Callable[..., Any], attrs: dict[str, Any]) -> Any:
    def kernel(context: RunContext, inputs: list[Any]) -> Sequence[Any]:
        op = context.op
        assert op is not None
        return (context.session.resource_for(op, lambda: func(**attrs, name=op.name)),)

    return kernel


def _kernel(func: Callable[..., Any], spec: OpSignature, attrs: dict[str, Any]) -> Any:
    names = [arg for arg, kind in spec.inputs if kind != COMPONENTS]
    listed = next((arg for arg, kind in spec.inputs if kind == COMPONENTS), None)
    fixed = dict(attrs)
    takes = spec.blocking
    single = len(spec.outputs) == 1 and spec.outputs != (COMPONENT_TYPES,)

    def kernel(context: RunContext, inputs: list[Any]) -> Sequence[Any]:
        arguments = dict(zip(names, inputs, strict=False))
        if listed is not None:
            arguments[listed] = inputs[len(names) :]
        arguments.update(fixed)
        if takes:
            arguments["timeout"] = context.remaining(fixed.get("timeout"))
        result = func(**arguments)
        if not spec.outputs:
            return ()
        if single:
            return (result,)
        return tuple(result)

    op_type = func.__name__
    if op_type in TAKE_OPS:

        def start(
            context: RunContext, inputs: list[Any], callback: Callable[[], Any]
        ) -> StartedTake | None:
            arguments = dict(zip(names, inputs, strict=False))
            return start_take(
                op_type,
                arguments["handle"],
                arguments["num_required"],
                fixed["dtype"],
                callback,
                context.cancellation,
            )

        # an accumulator take: the executor may queue its attempt instead of
        # blocking a thread on it (see executor.py); ``timeout`` is the op's own
        kernel.start = start  # type: ignore[attr-defined]
        kernel.timeout = fixed.get("timeout")  # type: ignore[attr-defined]
    return kernel
