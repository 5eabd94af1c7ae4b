"""``zeros``, ``ones``, ``zeros_like`` and ``ones_like``.

As in TensorFlow 2's graph mode, a shape known when the graph is built gives
a constant: ``zeros_like(acc.take_grad(1))`` of an accumulator of fully
defined shape does not run (or wait for) the take. A shape known only at run
time gives an op that reads it then.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tf_accum.dtypes import DType, as_dtype, float32, string
from tf_accum.graph.graph import Graph, Tensor, is_symbolic
from tf_accum.graph.math_convert import default_array
from tf_accum.graph.math_ops import building_in, graph_of
from tf_accum.graph.ops import as_tensor, constant, dtype_of_array
from tf_accum.graph.tensor_shape import Dimension, TensorShape

Array = np.ndarray[Any, Any]


def zeros(shape: Any, dtype: Any = float32, name: str | None = None) -> Any:
    """A tensor of ``shape`` (a list of ints, an int, a TensorShape or a 1-D
    int32/int64 Tensor) filled with zeros of ``dtype`` (False, b"" for bool, string).

    Raises:
        TypeError: a dimension that is not an int (None included).
        ValueError: a negative dimension.
    """
    return _filled(shape, as_dtype(dtype), 0, name or "zeros")


def ones(shape: Any, dtype: Any = float32, name: str | None = None) -> Any:
    """A tensor of ``shape`` filled with ones of ``dtype``; arguments and errors as :func:`zeros`."""
    return _filled(shape, as_dtype(dtype), 1, name or "ones")


def zeros_like(
    tensor: Any, dtype: Any = None, name: str | None = None, optimize: bool = True
) -> Any:
    """Zeros of ``tensor``'s shape, in ``dtype`` (default: ``tensor``'s).

    A Tensor of fully known static shape gives a constant, built without
    running ``tensor`` (``optimize=False`` runs it).
    """
    return _like(tensor, dtype, 0, name or "zeros_like", optimize, "ZerosLike")


def ones_like(
    tensor: Any, dtype: Any = None, name: str | None = None, optimize: bool = True
) -> Any:
    """Ones of ``tensor``'s shape, in ``dtype`` (default: ``tensor``'s); as :func:`zeros_like`."""
    return _like(tensor, dtype, 1, name or "ones_like", optimize, "OnesLike")


def _fill_value(dtype: DType, value: int) -> Any:
    if dtype == string:
        return b""
    if dtype.name == "bool":
        return bool(value)
    return value


def _filled_array(dims: Sequence[int], dtype: DType, value: int) -> Array:
    if dtype == string:
        return np.full(tuple(dims), _fill_value(dtype, value), dtype=object)
    return np.full(tuple(dims), _fill_value(dtype, value), dtype=dtype.numpy_dtype)


def _static_dims(shape: Any) -> list[int]:
    if isinstance(shape, TensorShape):
        if not shape.is_fully_defined():
            raise ValueError(f"Cannot convert a partially known TensorShape {shape} to a Tensor.")
        return [int(d) for d in shape.as_list()]  # type: ignore[arg-type]
    items = list(shape) if isinstance(shape, (list, tuple)) else [shape]
    dims = []
    for item in items:
        if isinstance(item, Dimension):
            item = item.value
        if isinstance(item, bool) or not isinstance(item, (int, np.integer)):
            raise TypeError(f"Expected int32, but got {item} of type '{type(item).__name__}'.")
        if item < 0:
            raise ValueError(f"Fill dimensions must be >= 0, but shape {items} has {item}.")
        dims.append(int(item))
    return dims


def _filled(shape: Any, dtype: DType, value: int, name: str) -> Any:
    graph = graph_of([shape])
    if not is_symbolic(shape):
        dims = _static_dims(shape)
        if graph is None:
            return _filled_array(dims, dtype, value)
        if isinstance(shape, (list, tuple, TensorShape)):
            return constant(_filled_array(dims, dtype, value), dtype=dtype, name=name)
        # a bare int is a shape tensor to TensorFlow, filled when run
        with graph.as_default(), graph.name_scope(name) as full:
            dims_tensor = constant(np.asarray(dims, np.int32), name="shape_as_tensor")
            return _fill_op(graph, full, dims_tensor, dtype, TensorShape(dims), value)
    with building_in(graph):
        assert graph is not None
        dims_tensor = as_tensor(shape)
        if dims_tensor.dtype.name not in ("int32", "int64"):
            raise TypeError(
                f"Value passed to parameter 'dims' has DataType {dims_tensor.dtype.name} not in "
                "list of allowed values: int32, int64"
            )
        rank = dims_tensor.shape.as_list()[0] if dims_tensor.shape.rank == 1 else None
        static = TensorShape([None] * rank) if rank is not None else TensorShape(None)
        if dims_tensor.op.type == "Const":
            static = TensorShape([int(d) for d in np.asarray(dims_tensor.op.get_attr("value"))])
        return _fill_op(graph, name, dims_tensor, dtype, static, value)


def _fill_op(
    graph: Graph,
    name: str,
    source: Tensor,
    dtype: DType,
    static: TensorShape,
    value: int,
    op_type: str = "Fill",
    like: bool = False,
) -> Tensor:
    """An op filling a shape read when it runs: ``source``'s value, or its shape if ``like``."""

    def fill(context: Any, inputs: list[Any]) -> Sequence[Any]:
        dims = np.shape(inputs[0]) if like else [int(d) for d in np.asarray(inputs[0])]
        return (_filled_array(dims, dtype, value),)

    op = graph.create_op(op_type, [source], [(dtype, static)], fill, name=name, effects=False)
    return op.outputs[0]


def _like(tensor: Any, dtype: Any, value: int, name: str, optimize: bool, op_type: str) -> Any:
    graph = graph_of([tensor])
    if not is_symbolic(tensor):
        array = default_array(tensor)
        wanted = as_dtype(dtype) if dtype is not None else dtype_of_array(array)
        if graph is None:
            return _filled_array(array.shape, wanted, value)
        if op_type == "ZerosLike":
            return constant(_filled_array(array.shape, wanted, value), dtype=wanted, name=name)
        with graph.as_default():
            tensor = constant(array, name=f"{name}/input")
    assert graph is not None
    with building_in(graph):
        source = as_tensor(tensor)
        wanted = as_dtype(dtype) if dtype is not None else source.dtype
        known = optimize and source.shape.is_fully_defined()
        if known and op_type == "ZerosLike":
            dims = [int(d) for d in source.shape.as_list()]  # type: ignore[arg-type]
            return constant(_filled_array(dims, wanted, value), dtype=wanted, name=name)
        if known:
            # TensorFlow fills the static shape: the tensor itself is not run
            with graph.name_scope(name) as full:
                dims_tensor = constant(
                    np.asarray(source.shape.as_list(), np.int32), name="Shape/shape_as_tensor"
                )
                return _fill_op(graph, full, dims_tensor, wanted, source.shape, value)
        kind = op_type if op_type == "ZerosLike" and wanted == source.dtype else "Fill"
        return _fill_op(graph, name, source, wanted, source.shape, value, kind, like=True)
