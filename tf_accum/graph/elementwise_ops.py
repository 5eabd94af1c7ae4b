"""Elementwise model math beyond an SGD step's: roots, exponentials and logs,
signs, maximum and minimum, the division family, powers, comparisons, logical
ops and ``add_n``.

Binary ops follow the dtype rules of ``math_ops`` (one dtype for both
operands, a Python or numpy value converting to the tensor's) and broadcast
their shapes; comparisons give bools. Eagerly each returns a numpy array.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tf_accum import errors
from tf_accum.dtypes import DType
from tf_accum.dtypes import bool as bool_
from tf_accum.graph import mode
from tf_accum.graph.math_kernels import ALLOWED, elementwise
from tf_accum.graph.math_ops import (
    build_binary,
    check_allowed,
    eager_value,
    op_def_inputs,
)
from tf_accum.graph.math_shapes import broadcast_shape
from tf_accum.graph.op_building import (
    Converted,
    build_in,
    convert_input,
    dtype_of,
    make_op,
)
from tf_accum.graph.tensor_shape import TensorShape
from tf_accum.shapes import kernel_text

Array = np.ndarray[Any, Any]


def _rsqrt(x: Array) -> Any:
    return 1 / np.sqrt(x)


def _sign(x: Array) -> Any:
    if x.dtype.kind == "c":
        size = np.abs(x)
        return np.where(size == 0, 0, x / np.where(size == 0, 1, size))
    return np.sign(x)


def _no_kernel(op_type: str, dtype: Any) -> errors.InvalidArgumentError:
    """TensorFlow's error for an op whose definition allows a dtype no kernel takes."""
    from tf_accum.dtypes import from_numpy
    from tf_accum.graph.math_shapes import type_enum

    found = from_numpy(np.dtype(dtype))
    name = type_enum(found) if found is not None else str(dtype)
    return errors.InvalidArgumentError(
        None,
        None,
        f"No OpKernel was registered to support Op '{op_type}' used by {{{{node {op_type}}}}} "
        f"with these attrs: [T={name}]",
    )


def _reciprocal(x: Array) -> Any:
    if x.dtype.kind in "iu":
        raise _no_kernel("Reciprocal", x.dtype)
    return np.reciprocal(x)


def _wide(fn: Callable[[Array], Any]) -> Callable[[Array], Any]:
    """``fn`` computed in float32 for half-precision inputs, as Eigen does, rounded once."""

    def wrapped(x: Array) -> Any:
        if x.dtype.kind == "f" and x.dtype.itemsize < 4 or str(x.dtype) == "bfloat16":
            return fn(x.astype(np.float32))
        return fn(x)

    return wrapped


UNARY: dict[str, Callable[[Array], Any]] = {
    "Sqrt": np.sqrt,
    "Rsqrt": _wide(_rsqrt),
    "Exp": np.exp,
    "Log": np.log,
    "Log1p": np.log1p,
    "Sign": _sign,
    "Reciprocal": _reciprocal,
    "Floor": np.floor,
    "Ceil": np.ceil,
    "Round": np.round,  # half to even, as TensorFlow's
}


def _unary(op_type: str, x: Any, name: str | None) -> Any:
    with build_in([x]):
        source = convert_input(x, param="x")
        dtype = dtype_of(source)
        check_allowed(op_type, "x", dtype)
        kernel = elementwise(UNARY[op_type], dtype)
        return make_op(
            op_type, name, [("x", source)], kernel, lambda t: [(dtype, t[0].shape)], {"T": dtype}
        )


def sqrt(x: Any, name: str | None = None) -> Any:
    """The square root of each element (NaN below 0). Floats and complex numbers only."""
    return _unary("Sqrt", x, name)


def rsqrt(x: Any, name: str | None = None) -> Any:
    """``1 / sqrt(x)`` of each element."""
    return _unary("Rsqrt", x, name)


def exp(x: Any, name: str | None = None) -> Any:
    """``e ** x`` of each element."""
    return _unary("Exp", x, name)


def log(x: Any, name: str | None = None) -> Any:
    """The natural logarithm of each element (-inf at 0, NaN below)."""
    return _unary("Log", x, name)


def log1p(x: Any, name: str | None = None) -> Any:
    """``log(1 + x)`` of each element, exact for small ``x``."""
    return _unary("Log1p", x, name)


def sign(x: Any, name: str | None = None) -> Any:
    """-1, 0 or 1 by the sign of each element (``x / |x|`` for complex numbers)."""
    return _unary("Sign", x, name)


def reciprocal(x: Any, name: str | None = None) -> Any:
    """``1 / x`` of each element (integer division for integers)."""
    return _unary("Reciprocal", x, name)


def floor(x: Any, name: str | None = None) -> Any:
    """The largest integer not above each element (floats only)."""
    return _unary("Floor", x, name)


def ceil(x: Any, name: str | None = None) -> Any:
    """The smallest integer not below each element (floats only)."""
    return _unary("Ceil", x, name)


def round(x: Any, name: str | None = None) -> Any:  # noqa: A001 - TensorFlow's name
    """Each element rounded to the nearest integer, halves to even (integers as they are)."""
    with build_in([x]):
        source = convert_input(x, param="x")
        if dtype_of(source).is_integer:
            if isinstance(source, Converted):
                from tf_accum.graph.ops import constant

                return constant(source.array, dtype=source.dtype)
            return source
    return _unary("Round", x, name)


def unary_grad(op_type: str, y: Any, dy: Any, name: str | None = None) -> Any:
    """``SqrtGrad``, ``RsqrtGrad`` or ``ReciprocalGrad``: the gradient of the op
    from its output ``y`` and the incoming gradient ``dy``."""

    def fn(out: Array, grad: Array) -> Any:
        if op_type == "SqrtGrad":
            return grad * np.asarray(0.5, out.dtype) / out
        if op_type == "RsqrtGrad":
            return grad * np.asarray(-0.5, out.dtype) * out * out * out
        return -grad * out * out

    with build_in([y, dy]):
        dtype, inputs = op_def_inputs(op_type, [("y", y), ("dy", dy)])
        return make_op(
            op_type,
            name,
            [("y", inputs[0]), ("dy", inputs[1])],
            elementwise(fn, dtype),
            lambda t: [(dtype, t[0].shape)],
            {"T": dtype},
        )


# --- binary --------------------------------------------------------------------


def _binary(op_type: str, x: Any, y: Any, name: str | None, scope: str) -> Any:
    with build_in([x, y]):
        _, inputs = op_def_inputs(op_type, [("x", x), ("y", y)])
        return build_binary(op_type, name or scope, ("x", "y"), inputs)


def maximum(x: Any, y: Any, name: str | None = None) -> Any:
    """The larger of ``x`` and ``y``, elementwise with broadcasting."""
    return _binary("Maximum", x, y, name, "Maximum")


def minimum(x: Any, y: Any, name: str | None = None) -> Any:
    """The smaller of ``x`` and ``y``, elementwise with broadcasting."""
    return _binary("Minimum", x, y, name, "Minimum")


def pow(x: Any, y: Any, name: str | None = None) -> Any:  # noqa: A001 - TensorFlow's name
    """``x ** y`` elementwise, with broadcasting."""
    return _binary("Pow", x, y, name, "Pow")


def div_no_nan(x: Any, y: Any, name: str | None = None) -> Any:
    """``x / y``, but 0 where ``y`` is 0, elementwise with broadcasting."""
    return _binary("DivNoNan", x, y, name, "DivNoNan")


def squared_difference(x: Any, y: Any, name: str | None = None) -> Any:
    """``(x - y) * conj(x - y)`` elementwise, with broadcasting."""
    return _binary("SquaredDifference", x, y, name, "SquaredDifference")


def floordiv(x: Any, y: Any, name: str | None = None) -> Any:
    """``x // y``: division rounded toward negative infinity."""
    return _binary("FloorDiv", x, y, name, "floordiv")


def floormod(x: Any, y: Any, name: str | None = None) -> Any:
    """``x % y``, with the divisor's sign."""
    return _binary("FloorMod", x, y, name, "FloorMod")


def realdiv(x: Any, y: Any, name: str | None = None) -> Any:
    """``x / y`` of one dtype (integers divided as integers, toward zero)."""
    with build_in([x, y]):
        dtype, inputs = op_def_inputs("RealDiv", [("x", x), ("y", y)])
        if dtype.is_integer:
            return _build_binary_fn("RealDiv", name or "RealDiv", inputs, _int_realdiv, dtype)
        return build_binary("RealDiv", name or "RealDiv", ("x", "y"), inputs)


def _int_realdiv(a: Array, b: Array) -> Any:
    raise _no_kernel("RealDiv", a.dtype)


def truediv(x: Any, y: Any, name: str | None = None) -> Any:
    """``x / y``, integers divided as floats (as ``tf.divide``)."""
    from tf_accum.graph.math_ops import divide

    return divide(x, y, name=name)


def div(x: Any, y: Any, name: str | None = None) -> Any:
    """TensorFlow 1's ``div``: floor division for integers, ``x / y`` for floats."""
    with build_in([x, y]):
        dtype, inputs = op_def_inputs("RealDiv", [("x", x), ("y", y)])
        if dtype.is_integer:
            return build_binary("FloorDiv", name or "div", ("x", "y"), inputs)
        return build_binary("RealDiv", name or "div", ("x", "y"), inputs)


def _build_binary_fn(
    op_type: str, name: str, inputs: Sequence[Any], fn: Callable[..., Any], out: DType
) -> Any:
    kernel = elementwise(fn, out)
    graph = mode.building_graph()
    if graph is None:
        return kernel(None, [eager_value(v) for v in inputs])[0]
    return make_op(
        op_type,
        name,
        [("x", inputs[0]), ("y", inputs[1])],
        kernel,
        lambda t: [(out, broadcast_shape(name, op_type, t[0], t[1]))],
        {"T": dtype_of(inputs[0])},
    )


# --- comparisons and logic -----------------------------------------------------

_COMPARE: dict[str, Callable[[Array, Array], Any]] = {
    "Equal": np.equal,
    "NotEqual": np.not_equal,
    "Less": np.less,
    "LessEqual": np.less_equal,
    "Greater": np.greater,
    "GreaterEqual": np.greater_equal,
    "LogicalAnd": np.logical_and,
    "LogicalOr": np.logical_or,
}


def _compare(op_type: str, x: Any, y: Any, name: str | None) -> Any:
    with build_in([x, y]):
        if op_type.startswith("Logical"):
            pairs = [("x", _bool_input(x, "x")), ("y", _bool_input(y, "y"))]
            for param, value in pairs:
                if dtype_of(value) != bool_:
                    raise TypeError(
                        f"Input '{param}' of '{op_type}' Op has type {dtype_of(value).name} that "
                        "does not match expected type of bool."
                    )
            inputs = [pairs[0][1], pairs[1][1]]
            dtype = bool_
        else:
            dtype, inputs = op_def_inputs(op_type, [("x", x), ("y", y)], allowed=False)
            if op_type in ALLOWED:
                check_allowed(op_type, "x", dtype)
        fn = _COMPARE[op_type]
        if dtype.name == "string":
            fn = _string_compare(fn)
        attrs: dict[str, Any] = {} if op_type.startswith("Logical") else {"T": dtype}
        if op_type in ("Equal", "NotEqual"):
            attrs["incompatible_shape_error"] = True
        return make_op(
            op_type,
            name,
            [("x", inputs[0]), ("y", inputs[1])],
            elementwise(fn, bool_),
            lambda t: [(bool_, broadcast_shape(name or op_type, op_type, t[0], t[1]))],
            attrs,
        )


def _bool_input(value: Any, param: str) -> Any:
    from tf_accum.graph.graph import is_symbolic

    return convert_input(value, None if is_symbolic(value) else bool_, param=param)


def _string_compare(fn: Callable[[Array, Array], Any]) -> Callable[[Array, Array], Any]:
    def compare(a: Array, b: Array) -> Any:
        as_bytes = np.frompyfunc(lambda v: v.encode() if isinstance(v, str) else v, 1, 1)
        return fn(as_bytes(a), as_bytes(b)).astype(np.bool_)

    return compare


def equal(x: Any, y: Any, name: str | None = None) -> Any:
    """Whether ``x == y``, elementwise with broadcasting (bools)."""
    return _compare("Equal", x, y, name)


def not_equal(x: Any, y: Any, name: str | None = None) -> Any:
    """Whether ``x != y``, elementwise with broadcasting."""
    return _compare("NotEqual", x, y, name)


def less(x: Any, y: Any, name: str | None = None) -> Any:
    """Whether ``x < y``, elementwise with broadcasting."""
    return _compare("Less", x, y, name)


def less_equal(x: Any, y: Any, name: str | None = None) -> Any:
    """Whether ``x <= y``, elementwise with broadcasting."""
    return _compare("LessEqual", x, y, name)


def greater(x: Any, y: Any, name: str | None = None) -> Any:
    """Whether ``x > y``, elementwise with broadcasting."""
    return _compare("Greater", x, y, name)


def greater_equal(x: Any, y: Any, name: str | None = None) -> Any:
    """Whether ``x >= y``, elementwise with broadcasting."""
    return _compare("GreaterEqual", x, y, name)


def logical_and(x: Any, y: Any, name: str | None = None) -> Any:
    """``x and y`` of bools, elementwise with broadcasting."""
    return _compare("LogicalAnd", x, y, name)


def logical_or(x: Any, y: Any, name: str | None = None) -> Any:
    """``x or y`` of bools, elementwise with broadcasting."""
    return _compare("LogicalOr", x, y, name)


def logical_not(x: Any, name: str | None = None) -> Any:
    """``not x`` of bools."""
    with build_in([x]):
        source = _bool_input(x, "x")
        if dtype_of(source) != bool_:
            raise TypeError(
                f"Input 'x' of 'LogicalNot' Op has type {dtype_of(source).name} that does not "
                "match expected type of bool."
            )
        return make_op(
            "LogicalNot",
            name,
            [("x", source)],
            elementwise(np.logical_not, bool_),
            lambda t: [(bool_, t[0].shape)],
        )


def logical_xor(x: Any, y: Any, name: str = "LogicalXor") -> Any:
    """``x != y`` of bools, built as TensorFlow builds it: (x or y) and not (x and y)."""
    return logical_and(logical_or(x, y), logical_not(logical_and(x, y)), name=name)


# --- add_n ---------------------------------------------------------------------


def add_n(inputs: Any, name: str | None = None) -> Any:
    """The sum of a list of tensors of one dtype and shape (IndexedSlices made dense).

    Raises:
        ValueError: an empty list, or one that is not a list of tensors.
        InvalidArgumentError: shapes that differ (when run).
    """
    if not isinstance(inputs, (list, tuple)) or not inputs:
        raise ValueError(
            "Inputs must be an iterable of at least one Tensor/IndexedSlices with the same "
            "dtype and shape."
        )
    values = list(inputs)
    with build_in(values):
        converted = [convert_input(v, param="inputs") for v in values]
        dtypes = {dtype_of(c) for c in converted}
        if len(dtypes) > 1:
            first = dtype_of(converted[0])
            converted = [
                c
                if dtype_of(c) == first or not isinstance(c, Converted)
                else convert_input(v, first)
                for c, v in zip(converted, values, strict=False)
            ]
            if len({dtype_of(c) for c in converted}) > 1:
                raise TypeError(
                    "Tensors in list passed to 'inputs' of 'AddN' Op have types "
                    f"[{', '.join(dtype_of(c).name for c in converted)}] that don't all match."
                )
        dtype = dtype_of(converted[0])
        if len(converted) == 1:
            # one input is the sum, as it is (TensorFlow checks nothing else then)
            only = converted[0]
            if isinstance(only, Converted):
                from tf_accum.graph.ops import constant

                return constant(only.array, dtype=only.dtype)
            return only
        check_allowed("AddN", "inputs", dtype)

        def kernel(context: Any, arrays: list[Any]) -> Sequence[Any]:
            parts = [np.asarray(a) for a in arrays]
            for part in parts[1:]:
                if part.shape != parts[0].shape:
                    raise errors.InvalidArgumentError(
                        None,
                        None,
                        f"Inputs to operation AddN of type AddN must have the same size and "
                        f"shape.  Input 0: {kernel_text(parts[0].shape)} != input 1: "
                        f"{kernel_text(part.shape)}",
                    )
            total = parts[0].copy()
            with np.errstate(all="ignore"):
                for part in parts[1:]:
                    total = total + part
            return (np.asarray(total, dtype=dtype.numpy_dtype),)

        def outputs(tensors: list[Any]) -> list[tuple[DType, TensorShape]]:
            from tf_accum.graph.array_ops import merged_shapes

            return [(dtype, merged_shapes([t.shape for t in tensors], tensors))]

        return make_op(
            "AddN",
            name,
            [(f"inputs_{i}", c) for i, c in enumerate(converted)],
            kernel,
            outputs,
            {"N": len(converted), "T": dtype},
        )
