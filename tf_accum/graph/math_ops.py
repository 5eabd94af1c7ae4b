"""Elementwise arithmetic with TensorFlow's dtypes, static shapes and errors:
what a synchronous-SGD chief needs around the accumulator
(``v - lr * acc.take_grad(n)``). Reductions are in ``reduce_ops``, filled
tensors in ``fill_ops``, what the ops compute in ``math_kernels``.

In graph mode each function builds an op and returns its Tensor; in eager
mode it acts at once and returns a numpy array. Tensor operators (``t * 0.1``,
``0.1 * t``, ``-t``, ``abs(t)``) come here through ``Tensor``'s methods and
build in the tensor's own graph.

Dtype rules, as TensorFlow's: the two operands of a binary op must have the
same dtype; a Python number or list, or a numpy value, takes the dtype of the
tensor on the other side when it can (see ``math_convert``); nothing is
promoted. Mismatches raise TypeError when the op is built, with TensorFlow's
messages, which differ by entry point (``t + 0.5``, ``t - 0.5``, ``0.5 - t``,
``t / 0.5`` and ``tf.subtract(t, 0.5)`` each say it their own way). Shapes
broadcast; shapes that cannot raise ValueError when built if known, else
InvalidArgumentError when run.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tf_accum import errors
from tf_accum.dtypes import DType, as_dtype, float32, float64, int32, string
from tf_accum.dtypes import bool as bool_
from tf_accum.graph import mode
from tf_accum.graph.graph import Graph, Tensor, is_symbolic
from tf_accum.graph.math_convert import array_as, default_array
from tf_accum.graph.math_kernels import ALLOWED, BINARY, TRUEDIV_FLOAT, elementwise, string_add
from tf_accum.graph.math_shapes import broadcast_shape
from tf_accum.graph.ops import (
    as_tensor,
    cast,
    cast_value,
    constant,
    dtype_of_array,
    packed_or_dense,
)

Array = np.ndarray[Any, Any]


@dataclass(frozen=True)
class Converted:
    """A non-tensor operand already converted to the dtype it will have."""

    array: Array
    dtype: DType


# A Tensor operator method's name (also the name of the ops it builds) -> the op type.
OPERATORS = {
    "add": "AddV2",
    "sub": "Sub",
    "mul": "Mul",
    "truediv": "RealDiv",
    "floordiv": "FloorDiv",
    "mod": "FloorMod",
    "pow": "Pow",
}


# --- building ------------------------------------------------------------------


def graph_of(values: Sequence[Any]) -> Graph | None:
    for value in values:
        if is_symbolic(value):
            graph: Graph = as_tensor(value).graph
            return graph
    return mode.building_graph()


@contextlib.contextmanager
def building_in(graph: Graph | None) -> Iterator[None]:
    """Build in ``graph`` (a symbolic operand's), as TensorFlow's operators do."""
    if graph is None or mode.building_graph() is graph:
        yield
        return
    with graph.as_default():
        yield


def _dtype_of(value: Any) -> DType:
    return value.dtype if isinstance(value, Converted) else as_tensor(value).dtype


def op_def_inputs(
    op_type: str, pairs: Sequence[tuple[str, Any]], allowed: bool = True
) -> tuple[DType, list[Any]]:
    """Convert inputs sharing one dtype left to right, as an op definition does:
    the first fixes the dtype, the others must have it or convert to it.

    Raises:
        TypeError: a tensor of another dtype, a value that does not convert, or
            a dtype the op does not allow.
        ValueError: None.
    """
    dtype: DType | None = None
    first = ""
    converted: list[Any] = []
    for param, value in pairs:
        value = packed_or_dense(value)
        if not is_symbolic(value) and hasattr(value, "numpy") and not isinstance(value, np.generic):
            value = np.asarray(value.numpy())  # an eager Variable: its current value
        if isinstance(value, Converted) or is_symbolic(value):
            have = _dtype_of(value)
            if dtype is None:
                dtype, first = have, param
                if allowed:
                    check_allowed(op_type, first, dtype)
            elif have != dtype:
                raise TypeError(
                    f"Input '{param}' of '{op_type}' Op has type {have.name} that does not match "
                    f"type {dtype.name} of argument '{first}'."
                )
            converted.append(value if isinstance(value, Converted) else as_tensor(value))
            continue
        try:
            if dtype is None:
                array = default_array(value)
                dtype, first = dtype_of_array(array), param
                if allowed:
                    check_allowed(op_type, first, dtype)
            else:
                array = array_as(value, dtype)
        except ValueError as error:
            raise ValueError(
                f"Tried to convert '{param}' to a tensor and failed. Error: {error}"
            ) from None
        except TypeError as error:
            if dtype is None or param == first:
                raise
            if mode.building_graph() is None:
                raise TypeError(
                    f"Cannot convert {value!r} to EagerTensor of dtype {dtype.name}"
                ) from None
            raise TypeError(
                f"Expected {dtype.name} passed to parameter '{param}' of op '{op_type}', got "
                f"{value!r} of type '{type(value).__name__}' instead. Error: {error}"
            ) from None
        converted.append(Converted(array, dtype))
    assert dtype is not None
    return dtype, converted


def check_allowed(
    op_type: str, param: str, dtype: DType, names: Sequence[str] | None = None
) -> None:
    """Refuse a dtype the op does not take (``names``, default the op's list in
    ``ALLOWED``): TypeError when building, and InvalidArgumentError in eager
    mode, as TensorFlow's eager kernels say it."""
    if names is None:
        names = ALLOWED[op_type]
    if dtype.name in names:
        return
    if mode.building_graph() is None:
        kernel_names = ", ".join(as_dtype(name).kernel_name for name in names)
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Value for attr 'T' of {dtype.kernel_name} is not in the list of allowed values: "
            f"{kernel_names}\n\t; NodeDef: {{{{node {op_type}}}}}",
        )
    raise TypeError(
        f"Value passed to parameter '{param}' has DataType {dtype.name} not in list of "
        f"allowed values: {', '.join(names)}"
    )


def materialize(graph: Graph, value: Any, name: str) -> Tensor:
    """A tensor of ``graph`` (the one being built) for an input: a Tensor as it
    is, a converted value as a constant called ``name``."""
    if isinstance(value, Converted):
        made: Tensor = constant(value.array, dtype=value.dtype, name=name)
        return made
    return as_tensor(value)


def build_binary(op_type: str, scope: str, params: Sequence[str], inputs: Sequence[Any]) -> Any:
    """The op ``op_type`` of two converted inputs of one dtype, in a scope named ``scope``."""
    dtype = _dtype_of(inputs[0])
    fn = string_add if dtype == string else BINARY[op_type]
    kernel = elementwise(fn, dtype)
    graph = mode.building_graph()
    if graph is None:
        return kernel(None, [eager_value(v) for v in inputs])[0]
    with graph.name_scope(scope) as full:
        tensors = [materialize(graph, v, p) for p, v in zip(params, inputs, strict=True)]
        node = full[:-1]
        shape = broadcast_shape(node, op_type, tensors[0], tensors[1])
        op = graph.create_op(
            op_type,
            tensors,
            [(dtype, shape)],
            kernel,
            name=full,
            attrs={"T": dtype},
            effects=False,
        )
    return op.outputs[0]


def eager_value(value: Any) -> Any:
    return value.array if isinstance(value, Converted) else value


# --- operators -----------------------------------------------------------------


def binary_operator(name: str, tensor: Any, other: Any, reflected: bool = False) -> Any:
    """``tensor <op> other`` (or ``other <op> tensor`` when ``reflected``) for a
    Tensor's operator method ``name`` (``"add"``, ``"truediv"``, ...).

    Raises:
        TypeError: the two sides' dtypes differ and ``other`` does not convert.
        ValueError: ``other`` is None, or the static shapes do not broadcast.
    """
    op_type = OPERATORS[name]
    with building_in(graph_of([tensor, other])):
        tensor = _operand(tensor)
        if not is_symbolic(other) and hasattr(other, "numpy"):
            other = _operand(other)  # another holder, eagerly: a value of fixed dtype
        dtype = _dtype_of(tensor)
        if reflected:
            if not isinstance(other, Converted) and not is_symbolic(other):
                other = Converted(array_as(other, dtype), dtype)
            left, right = other, tensor
        else:
            left, right = tensor, other
            if name in ("add", "truediv") and not (
                isinstance(other, Converted) or is_symbolic(other)
            ):
                right = _converted_with_hint(other, dtype)
        if name == "truediv":
            return truediv(left, right, scope="truediv")
        if name == "mul" and _dtype_of(left).name == "bool":
            if not (isinstance(right, Converted) or is_symbolic(right)):
                right = _converted_with_hint(right, bool_)
            return _bool_mul([left, right])
        if op_type == "AddV2" and _dtype_of(left) == string == _dtype_of(right):
            op_type = "Add"
            dtype, inputs = op_def_inputs("Add", [("x", left), ("y", right)], allowed=False)
        else:
            dtype, inputs = op_def_inputs(op_type, [("x", left), ("y", right)])
        return build_binary(op_type, name, ("x", "y"), inputs)


def _bool_mul(inputs: Sequence[Any]) -> Any:
    """``x * y`` with a bool ``x``: TensorFlow multiplies both as int32 and casts
    the product to bool (their logical and, for two bools)."""
    kernel = elementwise(np.multiply, int32)
    graph = mode.building_graph()
    if graph is None:
        arrays = [cast_value(np.asarray(eager_value(v)), int32) for v in inputs]
        product = kernel(None, arrays)[0]
        return product.astype(np.bool_)
    with graph.name_scope("mul") as full:
        tensors = [
            _cast_op(graph, materialize(graph, v, p), int32)
            for p, v in zip("xy", inputs, strict=True)
        ]
        shape = broadcast_shape(full[:-1], "Mul", tensors[0], tensors[1])
        op = graph.create_op(
            "Mul",
            tensors,
            [(int32, shape)],
            kernel,
            name=full,
            attrs={"T": int32},
            effects=False,
        )
        return _cast_op(graph, op.outputs[0], bool_)


def _cast_op(graph: Graph, tensor: Tensor, dtype: DType) -> Tensor:
    """A Cast op, even to the tensor's own dtype (as TensorFlow's bool product builds them)."""
    op = graph.create_op(
        "Cast",
        [tensor],
        [(dtype, tensor.shape)],
        lambda context, inputs: (cast_value(np.asarray(inputs[0]), dtype),),
        name="Cast",
        attrs={"SrcT": tensor.dtype, "DstT": dtype},
        effects=False,
    )
    return op.outputs[0]


def _operand(value: Any) -> Any:
    """The side of an operator that is the tensor: a graph tensor, or, eagerly, the
    current value of an object holding one (an eager Variable's ``numpy()``)."""
    if is_symbolic(value) or not hasattr(value, "numpy"):
        return as_tensor(value)
    array = np.asarray(value.numpy())
    return Converted(array, dtype_of_array(array))


def _converted_with_hint(value: Any, dtype: DType) -> Converted:
    """``value`` in ``dtype`` if it converts, else in its own default dtype."""
    try:
        return Converted(array_as(value, dtype), dtype)
    except (TypeError, ValueError):
        array = default_array(value)
        return Converted(array, dtype_of_array(array))


def truediv(x: Any, y: Any, scope: str = "truediv") -> Any:
    """``x / y`` of converted inputs: the same dtype, integers divided as floats."""
    left, right = _dtype_of(x), _dtype_of(y)
    if left != right:
        raise TypeError(
            f"`x` and `y` must have the same dtype, got tf.{left.name} != tf.{right.name}."
        )
    target = TRUEDIV_FLOAT.get(left.name)
    check_allowed("RealDiv", "x", target or left)
    graph = mode.building_graph()
    if graph is None:
        arrays = [eager_value(v) for v in (x, y)]
        if target is not None:
            arrays = [cast_value(np.asarray(a), target) for a in arrays]
        return elementwise(np.true_divide, target or left)(None, arrays)[0]
    with graph.name_scope(scope) as full:
        tensors = [materialize(graph, v, p) for p, v in (("x", x), ("y", y))]
        if target is not None:
            tensors = [cast(t, target, name="Cast") for t in tensors]
        dtype = target or left
        shape = broadcast_shape(full[:-1], "RealDiv", tensors[0], tensors[1])
        op = graph.create_op(
            "RealDiv",
            tensors,
            [(dtype, shape)],
            elementwise(np.true_divide, dtype),
            name=full,
            attrs={"T": dtype},
            effects=False,
        )
    return op.outputs[0]


def unary(op_type: str, x: Any, name: str | None) -> Any:
    """``Neg``, ``Abs`` or ``Square`` of ``x`` (a complex ``Abs`` is ``ComplexAbs``, real-valued)."""
    with building_in(graph_of([x])):
        if not is_symbolic(x) and hasattr(x, "numpy"):
            x = _operand(x)
        dtype, (source,) = op_def_inputs(op_type, [("x", x)], allowed=False)
        scope, out = op_type, dtype
        fn: Callable[..., Any] = {"Neg": np.negative, "Abs": np.abs, "Square": np.square}[op_type]
        if op_type == "Abs" and dtype.is_complex:
            op_type = "ComplexAbs"
            out = float32 if dtype.name == "complex64" else float64
        check_allowed(op_type, "x", dtype)
        kernel = elementwise(fn, out)
        graph = mode.building_graph()
        if graph is None:
            return kernel(None, [eager_value(source)])[0]
        with graph.name_scope(name or scope) as full:
            tensor = materialize(graph, source, "x")
            op = graph.create_op(
                op_type,
                [tensor],
                [(out, tensor.shape)],
                kernel,
                name=full,
                attrs={"T": dtype},
                effects=False,
            )
        return op.outputs[0]


# --- functions -----------------------------------------------------------------


def add(x: Any, y: Any, name: str | None = None) -> Any:
    """``x + y`` elementwise, with broadcasting (strings are concatenated).

    ``x`` fixes the dtype (a Python int gives int32, a float float32); ``y``
    takes it when it can: a Python value of a kind that dtype holds, or any
    numpy value (cast, as ``t + y`` does). Otherwise ``y`` keeps its own dtype
    and the two must agree.

    Raises:
        TypeError: the dtypes differ when the op is built, or a dtype ``AddV2``
            does not take (bool).
        InvalidArgumentError: the dtypes differ, in eager mode.
        ValueError: None, or static shapes that do not broadcast.
    """
    x, y = packed_or_dense(x), packed_or_dense(y)
    with building_in(graph_of([x, y])):
        if not is_symbolic(x):
            if mode.building_graph() is None and x is None:
                raise ValueError(_EAGER_NONE)
            array = default_array(x)
            x = Converted(array, dtype_of_array(array))
        if not is_symbolic(y):
            if mode.building_graph() is None and y is None:
                raise ValueError(_EAGER_NONE)
            y = _converted_with_hint(y, _dtype_of(x))
        op_type = "Add" if _dtype_of(x) == string else "AddV2"
        if mode.building_graph() is None and _dtype_of(x) != _dtype_of(y):
            raise errors.InvalidArgumentError(
                None,
                None,
                f"cannot compute {op_type} as input #1(zero-based) was expected to be a "
                f"{_dtype_of(x).kernel_name} tensor but is a {_dtype_of(y).kernel_name} tensor",
            )
        _, inputs = op_def_inputs(op_type, [("x", x), ("y", y)], allowed=op_type == "AddV2")
        return build_binary(op_type, name or "Add", ("x", "y"), inputs)


_EAGER_NONE = (
    "Attempt to convert a value (None) with an unsupported type (<class 'NoneType'>) to a Tensor."
)


def multiply(x: Any, y: Any, name: str | None = None) -> Any:
    """``x * y`` elementwise, with broadcasting.

    ``x`` fixes the dtype (a Python int gives int32, a float float32); ``y``
    must have it or convert to it.

    Raises:
        TypeError: the dtypes differ, or a dtype ``Mul`` does not take.
        ValueError: None, or static shapes that do not broadcast.
    """
    return _binary_function("Mul", x, y, name)


def subtract(x: Any, y: Any, name: str | None = None) -> Any:
    """``x - y`` elementwise, with broadcasting; dtypes and errors as :func:`multiply`."""
    return _binary_function("Sub", x, y, name)


def _binary_function(op_type: str, x: Any, y: Any, name: str | None) -> Any:
    with building_in(graph_of([x, y])):
        _, inputs = op_def_inputs(op_type, [("x", x), ("y", y)])
        return build_binary(op_type, name or op_type, ("x", "y"), inputs)


def divide(x: Any, y: Any, name: str | None = None) -> Any:
    """``x / y``: floats divide in their dtype; int8/16 and uint8/16 give float32,
    int32/64 and uint32/64 float64.

    Raises:
        TypeError: ``x`` and ``y`` have different dtypes, or ``x`` does not convert
            to the dtype of a tensor ``y``.
        ValueError: None, or static shapes that do not broadcast.
    """
    with building_in(graph_of([x, y])):
        if not is_symbolic(x):
            if is_symbolic(y):
                wanted = as_tensor(y).dtype
                x = Converted(array_as(x, wanted), wanted)
            else:
                array = default_array(x)
                x = Converted(array, dtype_of_array(array))
        if not is_symbolic(y):
            y = _converted_with_hint(y, _dtype_of(x))
        return truediv(x, y, scope=name or "truediv")


def negative(x: Any, name: str | None = None) -> Any:
    """``-x``. Raises TypeError for unsigned, bool and string dtypes."""
    return unary("Neg", x, name)


def square(x: Any, name: str | None = None) -> Any:
    """``x * x``. Raises TypeError for bool and string dtypes."""
    return unary("Square", x, name)


def absolute(x: Any, name: str | None = None) -> Any:
    """``|x|``; of complex values, their real-valued modulus. Raises TypeError for
    unsigned, bool and string dtypes."""
    return unary("Abs", x, name)
