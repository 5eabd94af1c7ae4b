"""What math ops compute when they run, and the dtypes each op allows.

Kernels act on numpy arrays and keep TensorFlow's results where numpy's
differ: integer division and modulo by zero are InvalidArgumentError, a float
floor division is ``floor(x / y)``, a float modulo takes the divisor's sign,
integers to negative powers are refused, and integer overflow wraps.
Shapes that do not broadcast are InvalidArgumentError ``Incompatible shapes``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tf_accum import errors
from tf_accum.accumulators.float_errors import ignoring_float_errors
from tf_accum.dtypes import DType, float32, float64, string
from tf_accum.graph.math_shapes import type_enum
from tf_accum.shapes import kernel_text

Array = np.ndarray[Any, Any]
ArrayFn = Callable[[Array, Array], Any]

_REAL = ("bfloat16", "float16", "float32", "float64")
_SIGNED = ("int8", "int16", "int32", "int64")
_COMPLEX = ("complex64", "complex128")
# The dtypes each op definition allows, in the order TensorFlow's message lists them.
ALLOWED: dict[str, tuple[str, ...]] = {
    "AddV2": (*_REAL, "uint8", "uint16", "uint32", "uint64", *_SIGNED, *_COMPLEX),
    "Sub": (*_REAL, "uint8", "int8", "uint16", "int16", "int32", "int64", *_COMPLEX,
            "uint32", "uint64"),
    "Mul": (*_REAL, "uint8", "int8", "uint16", "int16", "int32", "uint32", "uint64", "int64",
            *_COMPLEX),
    "FloorMod": (*_SIGNED, "uint8", "uint16", "uint32", "uint64", *_REAL),
    "Pow": ("bfloat16", "float32", "float16", "float64", *_SIGNED, *_COMPLEX),
    "Neg": (*_REAL, *_SIGNED, *_COMPLEX),
    "Abs": (*_REAL, *_SIGNED),
    "Square": (*_REAL, *_SIGNED, "uint8", "uint16", "uint32", "uint64", *_COMPLEX),
    "Sum": ("float32", "float64", "int32", "uint8", "int16", "int8", "complex64", "int64",
            "qint8", "quint8", "qint32", "bfloat16", "qint16", "quint16", "uint16",
            "complex128", "float16", "uint32", "uint64"),
}  # fmt: skip
ALLOWED["RealDiv"] = ALLOWED["FloorDiv"] = ALLOWED["Mul"]
ALLOWED["Mean"] = ALLOWED["Prod"] = ALLOWED["Sum"]
ALLOWED["Max"] = ALLOWED["Min"] = (
    "float32", "float64", "int32", "uint8", "int16", "int8", "int64", "bfloat16", "uint16",
    "float16", "uint32", "uint64", "qint8", "quint8", "qint32", "qint16", "quint16",
)  # fmt: skip
ALLOWED["ArgMax"] = ALLOWED["ArgMin"] = (*ALLOWED["Max"], "bool")
ALLOWED["ComplexAbs"] = _COMPLEX
_REAL_NUMBERS = ("float32", "float64", "int32", "uint8", "int16", "int8", "int64", "bfloat16",
                 "uint16", "float16", "uint32", "uint64")  # fmt: skip
for _name in ("Sqrt", "Rsqrt", "Exp", "Log", "Log1p", "SqrtGrad", "RsqrtGrad", "ReciprocalGrad"):
    ALLOWED[_name] = (*_REAL, *_COMPLEX)
ALLOWED["Sign"] = ALLOWED["Reciprocal"] = (*_REAL, *_SIGNED, *_COMPLEX)
ALLOWED["Maximum"] = ALLOWED["Minimum"] = (*_REAL, "int8", "uint8", "int16", "uint16", "int32",
                                           "uint32", "int64", "uint64")  # fmt: skip
ALLOWED["Floor"] = ALLOWED["Ceil"] = _REAL
ALLOWED["DivNoNan"] = (*_REAL, *_COMPLEX)
ALLOWED["SquaredDifference"] = (*_REAL, "int32", "int64", *_COMPLEX)
ALLOWED["Round"] = (*_REAL, *_SIGNED)
for _name in ("Less", "LessEqual", "Greater", "GreaterEqual"):
    ALLOWED[_name] = _REAL_NUMBERS
ALLOWED["AddN"] = (*ALLOWED["Sum"], "variant")
ALLOWED["MatMul"] = (*_REAL, "int32", "int64", "uint8", "uint16", "uint32", "uint64", *_COMPLEX)
ALLOWED["BatchMatMulV2"] = (*_REAL, "int16", "int32", "int64", "uint8", "uint16", "uint32",
                            "uint64", *_COMPLEX)  # fmt: skip
# tf.nn's ops
_NN_FLOATS = ("float16", "bfloat16", "float32", "float64")
ALLOWED["Relu"] = (*_REAL_NUMBERS, "qint8")
for _name in ("ReluGrad", "Relu6", "Relu6Grad"):
    ALLOWED[_name] = _REAL_NUMBERS
for _name in ("Sigmoid", "SigmoidGrad", "Tanh", "TanhGrad"):
    ALLOWED[_name] = (*_REAL, *_COMPLEX)
for _name in ("Elu", "EluGrad", "Softmax", "LogSoftmax", "SoftmaxCrossEntropyWithLogits",
              "SparseSoftmaxCrossEntropyWithLogits", "L2Loss"):  # fmt: skip
    ALLOWED[_name] = _NN_FLOATS
ALLOWED["BiasAdd"] = ALLOWED["BiasAddGrad"] = ALLOWED["Sum"]
# `/` of integers divides in floating point: small integers in float32, others in float64.
TRUEDIV_FLOAT = {"int8": float32, "uint8": float32, "int16": float32, "uint16": float32,
                  "int32": float64, "uint32": float64, "int64": float64, "uint64": float64}  # fmt: skip


def half_float(dtype: np.dtype[Any]) -> bool:
    """float16 or bfloat16 (ml_dtypes' numpy type, of kind "V"): the dtypes whose
    math is done in float32 and rounded once."""
    return dtype.itemsize == 2 and dtype.kind in "fV"


def _check_broadcast(a: Array, b: Array) -> None:
    try:
        np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        raise errors.InvalidArgumentError(
            None, None, f"Incompatible shapes: {kernel_text(a.shape)} vs. {kernel_text(b.shape)}"
        ) from None


def _refuse_zero_divisor(b: Array) -> None:
    if b.dtype.kind in "iu" and (b == 0).any():
        raise errors.InvalidArgumentError(None, None, "Integer division by zero")


def _floordiv(a: Array, b: Array) -> Any:
    _refuse_zero_divisor(b)
    if a.dtype.kind in "iu":
        return np.floor_divide(a, b)
    return np.floor(np.true_divide(a, b))  # floor(x / y): 1.0 // 0.1 is 10.0, as in TensorFlow


def _floormod(a: Array, b: Array) -> Any:
    _refuse_zero_divisor(b)
    if a.dtype.kind in "iu":
        return np.mod(a, b)
    rest = np.fmod(a, b)
    return np.where((rest != 0) & ((b < 0) != (rest < 0)), rest + b, rest)


def _no_complex_floordiv(context: Any, dtype: DType) -> None:
    # the op definition allows complex numbers, but TensorFlow has no kernel for them
    node = context.op.name if context is not None and context.op is not None else "FloorDiv"
    raise errors.InvalidArgumentError(
        None,
        None,
        f"No OpKernel was registered to support Op 'FloorDiv' used by {{{{node {node}}}}} with "
        f"these attrs: [T={type_enum(dtype)}]",
    )


def _pow(a: Array, b: Array) -> Any:
    if b.dtype.kind == "i" and np.any(b < 0):
        raise errors.InvalidArgumentError(
            None, None, "Integers to negative integer powers are not allowed"
        )
    if a.dtype.kind == "f" and a.dtype.itemsize < 8:
        # numpy's float32 pow may miss the correctly rounded result by an ulp; a
        # wider pow rounded once matches TensorFlow's
        wider = np.float64 if a.dtype.itemsize == 4 else np.float32
        return np.power(a.astype(wider), b.astype(wider))
    return np.power(a, b)


def _div_no_nan(a: Array, b: Array) -> Any:
    zero = b == 0
    quotient = np.true_divide(a, np.where(zero, np.ones_like(b), b))
    return np.where(zero, np.zeros_like(quotient), quotient)


def _squared_difference(a: Array, b: Array) -> Any:
    difference = np.subtract(a, b)
    if difference.dtype.kind == "c":
        return difference * np.conj(difference)
    return np.square(difference)


def string_add(a: Array, b: Array) -> Any:
    return np.frompyfunc(_concat, 2, 1)(a, b)


def _concat(a: str | bytes, b: str | bytes) -> bytes:
    # a constant made from a Python str holds str; TensorFlow's strings are bytes
    left = a.encode() if isinstance(a, str) else a
    right = b.encode() if isinstance(b, str) else b
    return left + right


def elementwise(fn: Callable[..., Any], out: DType) -> Callable[[Any, list[Any]], Sequence[Any]]:
    """A kernel applying ``fn`` to the input arrays, its result stored as ``out``."""
    target = object if out == string else out.numpy_dtype
    refused = fn is _floordiv and out.is_complex
    # a ufunc refuses shapes that do not broadcast before it computes anything, so
    # the check (which costs more than many an op) can wait for its refusal; other
    # functions may refuse other inputs first (a zero divisor), so theirs comes first
    check_first = not isinstance(fn, np.ufunc)

    def kernel(context: Any, inputs: list[Any]) -> Sequence[Any]:
        arrays = [np.asarray(value) for value in inputs]
        if refused:
            _no_complex_floordiv(context, out)
        pair = len(arrays) == 2 and arrays[0].shape != arrays[1].shape
        if pair and check_first:
            _check_broadcast(arrays[0], arrays[1])
        try:
            found = ignoring_float_errors(fn, *arrays)
        except ValueError:
            if pair:
                _check_broadcast(arrays[0], arrays[1])
            raise
        return (np.asarray(found, dtype=target),)

    return kernel


BINARY: dict[str, ArrayFn] = {
    "AddV2": np.add,
    "Sub": np.subtract,
    "Mul": np.multiply,
    "RealDiv": np.true_divide,
    "FloorDiv": _floordiv,
    "FloorMod": _floormod,
    "Pow": _pow,
    "Maximum": np.maximum,  # NaN wins, as in TensorFlow
    "Minimum": np.minimum,
    "DivNoNan": _div_no_nan,
    "SquaredDifference": _squared_difference,
}
