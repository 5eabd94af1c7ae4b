"""The graph's plumbing ops: constants, placeholders, identity, grouping, add, cast.

In graph mode each function builds an op and returns its Tensor (or
Operation); in eager mode it acts at once on numpy values, as TensorFlow 2
does, except ``placeholder``, which only exists in graphs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from tf_accum import errors
from tf_accum.dtypes import DType, as_dtype, from_numpy, string
from tf_accum.graph import mode
from tf_accum.graph.graph import Graph, Operation, Tensor, is_symbolic
from tf_accum.graph.tensor_shape import TensorShape, as_shape
from tf_accum.indexed_slices import IndexedSlices
from tf_accum.shapes import kernel_text

Array = np.ndarray[Any, Any]
NO_OUTPUTS: tuple[()] = ()


def _graph_or_none() -> Graph | None:
    return mode.building_graph()


def dtype_of_array(array: Array) -> DType:
    """The DType of a numpy array (strings and bytes are ``string``)."""
    if array.dtype.kind in "USO":
        return string
    found = from_numpy(array.dtype)
    if found is None:
        raise TypeError(f"Cannot convert an array of dtype {array.dtype} to a Tensor.")
    return found


def infer_array(value: Any, dtype: Any = None) -> Array:
    """``value`` as TensorFlow would make it a constant: Python floats become
    float32 and Python ints int32 unless ``dtype`` says otherwise.

    Raises:
        TypeError: values that do not convert to ``dtype`` without loss.
        ValueError: a ragged sequence.
    """
    from tf_accum.raw_ops.arguments import tensor_array
    from tf_accum.tensor_conversion import convert_to_dtype

    if dtype is not None:
        wanted = as_dtype(dtype)
        if wanted == string:
            return np.asarray(value, dtype=object)
        return convert_to_dtype(value, wanted)
    if isinstance(value, (str, bytes)) or (
        isinstance(value, (list, tuple)) and value and isinstance(value[0], (str, bytes))
    ):
        return np.asarray(value, dtype=object)
    if isinstance(value, bool) or (isinstance(value, np.ndarray) and value.dtype == np.bool_):
        return np.asarray(value)
    # as TensorFlow: a Python float beyond float32 is an error eagerly, inf in a graph
    return tensor_array(value, graph=_graph_or_none() is not None)


def _const_op(graph: Graph, array: Array, name: str | None) -> Tensor:
    array = np.array(array)  # our own copy, read-only: every run hands out the same one
    array.setflags(write=False)
    op = graph.create_op(
        "Const",
        [],
        [(dtype_of_array(array), TensorShape(array.shape))],
        lambda context, inputs: (array,),
        name=name or "Const",
        attrs={"value": array, "dtype": dtype_of_array(array)},
        effects=False,
    )
    return op.outputs[0]


def constant(
    value: Any,
    dtype: Any = None,
    shape: Any = None,
    name: str = "Const",
    verify_shape: bool = False,
) -> Any:
    """A constant tensor (graph mode) or a numpy array (eager mode).

    Args:
        value: a number, nested list or array.
        dtype: the dtype (default: inferred; Python floats give float32).
        shape: reshape (or broadcast a scalar) to this shape.

    Raises:
        TypeError: values that do not convert to ``dtype`` without loss.
        ValueError: a shape the values cannot take.
    """
    array = infer_array(value, dtype)
    if shape is not None:
        dims = as_shape(shape).as_list()
        if array.size == 1 and list(array.shape) != dims:
            array = np.broadcast_to(array.reshape(()), [int(d or 0) for d in dims]).copy()
        elif list(array.shape) != dims:
            try:
                array = array.reshape(dims)
            except ValueError:
                raise TypeError(
                    f"Expected Tensor's shape: {tuple(dims)}, but got {array.shape}."
                ) from None
    graph = _graph_or_none()
    if graph is None:
        return array
    return _const_op(graph, array, name)


def convert_to_tensor(
    value: Any,
    dtype: Any = None,
    name: str | None = None,
    preferred_dtype: Any = None,
    dtype_hint: Any = None,
) -> Any:
    """``value`` as a Tensor of the default graph (a Tensor or Variable is used as it is).

    Raises:
        ValueError: a Tensor of another dtype than ``dtype``.
        TypeError: values that do not convert.
    """
    value = packed_or_dense(value)
    if is_symbolic(value):
        tensor = as_tensor(value)
        if dtype is not None and as_dtype(dtype) != tensor.dtype:
            raise ValueError(
                f"Tensor conversion requested dtype {as_dtype(dtype).name} for Tensor with dtype "
                f"{tensor.dtype.name}: {tensor!r}"
            )
        return tensor
    if dtype is None and (preferred_dtype or dtype_hint) is not None:
        try:
            return constant(value, preferred_dtype or dtype_hint, name=name or "Const")
        except (TypeError, ValueError):
            pass
    return constant(value, dtype, name=name or "Const")


def as_tensor(value: Any) -> Tensor:
    """A Tensor, or the tensor a Variable stands for."""
    element = getattr(value, "graph_element", value)
    if not isinstance(element, Tensor):
        raise TypeError(f"Expected a Tensor, got {type(value).__name__}")
    return element


def packed_or_dense(value: Any) -> Any:
    """A list holding tensors packed into one, an IndexedSlices of tensors made
    dense, as TensorFlow's conversion does; anything else as it is."""
    if isinstance(value, (list, tuple)):
        from tf_accum.graph.op_building import convert_input, holds_symbolic

        if isinstance(value, IndexedSlices) or holds_symbolic(value):
            return convert_input(value)
    return value


def graph_input(graph: Graph, value: Any, dtype: Any = None, name: str | None = None) -> Tensor:
    """``value`` as an input of an op of ``graph``: a Tensor as it is, else a constant
    (a list holding tensors packed, an IndexedSlices made dense)."""
    value = packed_or_dense(value)
    if is_symbolic(value):
        return as_tensor(value)
    return _const_op(graph, infer_array(value, dtype), name)


def placeholder(dtype: Any, shape: Any = None, name: str | None = None) -> Tensor:
    """A tensor whose value every ``Session.run`` must feed.

    Raises:
        RuntimeError: in eager mode.
        TypeError: not a dtype, a dimension that is no integer, or one above 2**63 - 1.
        ValueError: a negative dimension.
    """
    graph = _graph_or_none()
    if graph is None:
        raise RuntimeError("tf.placeholder() is not compatible with eager execution.")
    wanted = as_dtype(dtype)
    static = attr_shape(shape)

    def must_be_fed(context: Any, inputs: list[Any]) -> Sequence[Any]:
        # TensorFlow names the shape only when it has dimensions
        text = f" and shape {kernel_text(static.as_tuple())}" if static.rank else ""
        raise errors.InvalidArgumentError(
            None,
            None,
            f"You must feed a value for placeholder tensor '{op.name}' with dtype "
            f"{wanted.kernel_name}{text}",
        )

    op = graph.create_op(
        "Placeholder",
        [],
        [(wanted, static)],
        must_be_fed,
        name=name or "Placeholder",
        attrs={"dtype": wanted, "shape": static},
        effects=False,
    )
    return op.outputs[0]


def attr_shape(shape: Any, arg: str = "shape") -> TensorShape:
    """An op's shape attribute, refused as TensorFlow's op builder refuses it.

    Raises:
        ValueError: a negative dimension ("Error converting shape to a
            TensorShape: Dimension -2 must be >= 0.").
        TypeError: a dimension that is not an integer or None, or one above
            2**63 - 1.
    """
    try:
        static = as_shape(shape)
    except TypeError as error:
        raise TypeError(f"Error converting {arg} to a TensorShape: {error}.") from None
    except ValueError as error:
        raise ValueError(f"Error converting {arg} to a TensorShape: {error}.") from None
    dims = static.as_list() if static.rank is not None else []
    too_big = [d for d in dims if d is not None and d > 2**63 - 1]
    if too_big:
        raise TypeError(
            f"Error converting {dims} (arg name = {arg}) to a TensorShape: Value out of range: "
            f"{too_big[0]}"
        )
    return static


def placeholder_with_default(input: Any, shape: Any, name: str | None = None) -> Any:  # noqa: A002
    """A tensor that is ``input`` unless a run feeds another value (of ``shape``)."""
    graph = _graph_or_none()
    if graph is None:
        return np.asarray(input)
    source = graph_input(graph, input, name=f"{name or 'PlaceholderWithDefault'}/input")
    static = attr_shape(shape)
    if not static.is_compatible_with(source.shape):
        raise ValueError(
            f"Shapes {source.shape} and {static} are incompatible for placeholder_with_default"
        )
    op = graph.create_op(
        "PlaceholderWithDefault",
        [source],
        [(source.dtype, static)],
        lambda context, inputs: (inputs[0],),
        name=name or "PlaceholderWithDefault",
        effects=False,
    )
    return op.outputs[0]


def identity(input: Any, name: str | None = None) -> Any:  # noqa: A002
    """The same value, as a new tensor (graph) or array (eager)."""
    graph = _graph_or_none()
    if graph is None:
        return np.asarray(input)
    source = graph_input(graph, input)
    op = graph.create_op(
        "Identity",
        [source],
        [(source.dtype, source.shape)],
        lambda context, inputs: (inputs[0],),
        name=name or "Identity",
        effects=False,
    )
    return op.outputs[0]


def group(*inputs: Any, name: str | None = None) -> Operation | None:
    """An op that runs after all of ``inputs`` (ops, tensors, or lists of them).

    Returns None in eager mode, where everything has run already.
    """
    graph = _graph_or_none()
    if graph is None:
        return None
    controls: list[Any] = []
    for item in inputs:
        if isinstance(item, (list, tuple)) and not hasattr(item, "_fields"):
            controls.extend(item)
        elif item is not None:
            controls.append(item)
    with graph.control_dependencies(controls):
        return graph.create_op(
            "NoOp", [], [], _no_outputs, name=name or "group_deps", effects=False
        )


def no_op(name: str | None = None) -> Operation | None:
    """An op that does nothing (a target for control dependencies)."""
    graph = _graph_or_none()
    if graph is None:
        return None
    return graph.create_op("NoOp", [], [], _no_outputs, name=name or "NoOp", effects=False)


def _no_outputs(context: Any, inputs: list[Any]) -> Sequence[Any]:
    return NO_OUTPUTS


def cast(x: Any, dtype: Any, name: str | None = None) -> Any:
    """``x`` converted to ``dtype``; floats become integers by truncation toward zero.

    Raises:
        UnimplementedError: a string to a number (when the op runs).
    """
    wanted = as_dtype(dtype)
    graph = _graph_or_none()
    if graph is None:
        return cast_value(np.asarray(x), wanted)
    source = graph_input(graph, x)
    if source.dtype == wanted:
        return source
    op = graph.create_op(
        "Cast",
        [source],
        [(wanted, source.shape)],
        lambda context, inputs: (cast_value(np.asarray(inputs[0]), wanted),),
        name=name or "Cast",
        attrs={"SrcT": source.dtype, "DstT": wanted},
        effects=False,
    )
    return op.outputs[0]


def to_float(x: Any, name: str = "ToFloat") -> Any:
    """``cast(x, float32)`` (TensorFlow 1's shorthand)."""
    return cast(x, "float32", name=name)


def to_double(x: Any, name: str = "ToDouble") -> Any:
    """``cast(x, float64)``."""
    return cast(x, "float64", name=name)


def to_int32(x: Any, name: str = "ToInt32") -> Any:
    """``cast(x, int32)``."""
    return cast(x, "int32", name=name)


def to_int64(x: Any, name: str = "ToInt64") -> Any:
    """``cast(x, int64)``."""
    return cast(x, "int64", name=name)


def cast_value(array: Array, dtype: DType) -> Array:
    if array.dtype.kind in "USO":
        raise errors.UnimplementedError(
            None, None, f"Cast string to {dtype.kernel_name} is not supported"
        )
    if array.dtype.kind == "f" and dtype.is_integer:
        array = np.trunc(array)
    return array.astype(dtype.numpy_dtype)


@contextlib.contextmanager
def name_scope(
    name: str | None, default_name: str | None = None, values: Any = None
) -> Iterator[str]:
    """Prefix op names built in the block with ``name/`` (graph mode; a no-op eagerly)."""
    graph = _graph_or_none()
    scope_name = name if name is not None else default_name
    if graph is None:
        yield "" if scope_name is None else f"{scope_name}/"
        return
    with graph.name_scope(scope_name) as scope:
        yield scope


@contextlib.contextmanager
def control_dependencies(control_inputs: Any) -> Iterator[None]:
    """Ops built in the block run after ``control_inputs`` (a no-op eagerly)."""
    graph = _graph_or_none()
    if graph is None:
        yield
        return
    with graph.control_dependencies(control_inputs):
        yield
