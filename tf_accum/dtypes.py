"""Data types: TensorFlow's names, stored as numpy dtypes.

A :class:`DType` is what tf_accum accepts wherever TensorFlow takes a dtype. It
compares equal to anything :func:`as_dtype` turns into it: the name string, the
numpy dtype or type, or TensorFlow's own DType object.

The quantized types (qint8, quint8, qint16, quint16, qint32) are stored as the
integer type of the same width, with the same arithmetic. bfloat16 is stored
as ml_dtypes' bfloat16, imported at its first use (its numpy type, an array
of it, or ``as_dtype`` given ml_dtypes' type) rather than by ``import tf_accum``.
"""

from __future__ import annotations

import builtins
import sys
from typing import Any

import numpy as np


class DType:
    """A TensorFlow data type backed by a numpy dtype.

    Attributes:
        name: TensorFlow's Python name (``"float32"``, ``"qint8"``, ...).
        as_numpy_dtype: the numpy scalar type values of this dtype are stored in.
        kernel_name: the name TensorFlow's kernels print in messages (``"float"``,
            ``"double"``, ``"half"``, ...).
    """

    __slots__ = ("name", "kernel_name", "_numpy_dtype", "is_quantized")

    def __init__(
        self, name: str, kernel_name: str, numpy_dtype: Any, is_quantized: builtins.bool = False
    ):
        self.name = name
        self.kernel_name = kernel_name
        self._numpy_dtype = np.dtype(numpy_dtype) if numpy_dtype is not None else None
        self.is_quantized = is_quantized

    @property
    def as_numpy_dtype(self) -> type:
        """The numpy scalar type (``numpy.float32``, ``ml_dtypes.bfloat16``, ...).

        Raises:
            TypeError: the type has no numpy equivalent (string, resource).
        """
        found: type = self.numpy_dtype.type
        return found

    @property
    def numpy_dtype(self) -> np.dtype[Any]:
        """The numpy dtype values of this type are stored in.

        Raises:
            TypeError: the type has no numpy equivalent (string, resource).
        """
        found = self._numpy_dtype
        if found is None:
            found = self._unset_numpy_dtype()
        return found

    def _unset_numpy_dtype(self) -> np.dtype[Any]:
        if self.name == "bfloat16":
            return _load_bfloat16()
        raise TypeError(f"{self.name} has no numpy equivalent")

    @property
    def base_dtype(self) -> DType:
        """The non-reference type: itself, or ``string`` for ``string_ref`` (TF1
        code writes ``variable.dtype.base_dtype``)."""
        return string if self.name == "string_ref" else self

    @property
    def is_floating(self) -> builtins.bool:
        return self.name == "bfloat16" or (
            self._numpy_dtype is not None and self._numpy_dtype.kind == "f"
        )

    @property
    def is_complex(self) -> builtins.bool:
        return self._numpy_dtype is not None and self._numpy_dtype.kind == "c"

    @property
    def is_integer(self) -> builtins.bool:
        return self._numpy_dtype is not None and self._numpy_dtype.kind in "iu"

    def __eq__(self, other: object) -> builtins.bool:
        if isinstance(other, DType):
            return self.name == other.name
        try:
            return as_dtype(other).name == self.name
        except TypeError:
            return False

    def __ne__(self, other: object) -> builtins.bool:
        return not self == other

    def __hash__(self) -> int:
        return hash(self.name)

    def __repr__(self) -> str:
        return f"tf_accum.{self.name}"

    def __str__(self) -> str:
        return f"<dtype: {self.name!r}>"

    def __reduce__(self) -> tuple[Any, ...]:
        return (as_dtype, (self.name,))


float16 = DType("float16", "half", np.float16)
half = float16
bfloat16 = DType("bfloat16", "bfloat16", None)  # ml_dtypes' type, set by _load_bfloat16
float32 = DType("float32", "float", np.float32)
float64 = DType("float64", "double", np.float64)
double = float64
complex64 = DType("complex64", "complex64", np.complex64)
complex128 = DType("complex128", "complex128", np.complex128)
int8 = DType("int8", "int8", np.int8)
int16 = DType("int16", "int16", np.int16)
int32 = DType("int32", "int32", np.int32)
int64 = DType("int64", "int64", np.int64)
uint8 = DType("uint8", "uint8", np.uint8)
uint16 = DType("uint16", "uint16", np.uint16)
uint32 = DType("uint32", "uint32", np.uint32)
uint64 = DType("uint64", "uint64", np.uint64)
qint8 = DType("qint8", "qint8", np.int8, is_quantized=True)
quint8 = DType("quint8", "quint8", np.uint8, is_quantized=True)
qint16 = DType("qint16", "qint16", np.int16, is_quantized=True)
quint16 = DType("quint16", "quint16", np.uint16, is_quantized=True)
qint32 = DType("qint32", "qint32", np.int32, is_quantized=True)
# Not accumulator types; known so that using them gets TensorFlow's error.
bool = DType("bool", "bool", np.bool_)  # noqa: A001 - TensorFlow's name
string = DType("string", "string", None)
# Handle types of graph-mode tensors: a constructor's output (an integer handle here).
resource = DType("resource", "resource", None)
string_ref = DType("string_ref", "string_ref", None)

#: The 19 dtypes the accumulator op definitions allow, in TensorFlow's order
#: (the order its "not in list of allowed values" message prints them in).
ACCUMULATOR_DTYPES: tuple[DType, ...] = (
    float32, float64, int32, uint8, int16, int8, complex64, int64, qint8, quint8,
    qint32, bfloat16, qint16, quint16, uint16, complex128, float16, uint32, uint64,
)  # fmt: skip

_BY_NAME: dict[str, DType] = {
    t.name: t for t in (*ACCUMULATOR_DTYPES, bool, string, resource, string_ref)
}
_BY_NAME.update({"half": float16, "double": float64, "float": float32})

# TensorFlow's DataType enum numbers, which tf.as_dtype accepts too.
_BY_ENUM: dict[int, DType] = {
    1: float32, 2: float64, 3: int32, 4: uint8, 5: int16, 6: int8, 7: string, 8: complex64,
    9: int64, 10: bool, 11: qint8, 12: quint8, 13: qint32, 14: bfloat16, 15: qint16,
    16: quint16, 17: uint16, 18: complex128, 19: float16, 20: resource, 22: uint32, 23: uint64,
}  # fmt: skip

# numpy -> DType: plain types only; a numpy int8 is int8, never qint8. bfloat16
# joins when ml_dtypes is loaded (_load_bfloat16).
_BY_NUMPY: dict[np.dtype[Any], DType] = {
    t.numpy_dtype: t
    for t in (*ACCUMULATOR_DTYPES, bool)
    if not t.is_quantized and t is not bfloat16
}


def _load_bfloat16() -> np.dtype[Any]:
    """Import ml_dtypes (its extension is most of what bfloat16 costs, so a
    program that never uses bfloat16 does not pay it) and make bfloat16 its
    type. Idempotent; concurrent callers all get the same dtype."""
    import ml_dtypes

    found: np.dtype[Any] = np.dtype(ml_dtypes.bfloat16)
    bfloat16._numpy_dtype = found
    _BY_NUMPY[found] = bfloat16
    return found


def _lookup_numpy(dtype: np.dtype[Any]) -> DType | None:
    found = _BY_NUMPY.get(dtype)
    # A dtype numpy does not define may be ml_dtypes' bfloat16, made by a
    # program that imported ml_dtypes before tf_accum needed it.
    if (
        found is None
        and bfloat16._numpy_dtype is None
        and dtype.isbuiltin != 1
        and "ml_dtypes" in sys.modules
    ):
        _load_bfloat16()
        found = _BY_NUMPY.get(dtype)
    return found


def is_bfloat16(dtype: np.dtype[Any]) -> builtins.bool:
    """Whether the numpy ``dtype`` is bfloat16 (ml_dtypes'), without importing
    ml_dtypes: a value can have that dtype only once the program has imported
    it, and numpy's own types are told apart by a flag alone."""
    return dtype.isbuiltin != 1 and _lookup_numpy(dtype) is bfloat16


def as_dtype(type_value: Any) -> DType:
    """Return the :class:`DType` for ``type_value``.

    Args:
        type_value: a DType; a name string (``"float32"``, ``"half"``,
            ``"qint8"``, ...); TensorFlow's DataType enum number (``1`` is
            float32, ``19`` float16); a numpy dtype or scalar type (``np.float32``,
            ``ml_dtypes.bfloat16``); or any object whose ``name`` attribute is a
            TensorFlow dtype name, which includes TensorFlow's own DType.

    Returns:
        The DType.

    Raises:
        TypeError: ``type_value`` names no TensorFlow dtype.
    """
    if isinstance(type_value, DType):
        return type_value
    if isinstance(type_value, str):
        found = _BY_NAME.get(type_value)
        if found is not None:
            return found
    elif isinstance(type_value, (np.dtype, type)):
        try:
            found = _lookup_numpy(np.dtype(type_value))
        except TypeError:
            found = None
        if found is not None:
            return found
        if type_value is str or type_value is bytes:
            return string
    elif isinstance(type_value, (int, float)):
        # as in TensorFlow, 1.0 and True find the enum number 1 too
        found = _BY_ENUM.get(type_value)  # type: ignore[arg-type]
        if found is not None:
            return found
    else:
        name = getattr(type_value, "name", None)
        if isinstance(name, str) and name in _BY_NAME:
            return _BY_NAME[name]
    raise TypeError(
        f"Cannot convert the argument `type_value`: {type_value!r} to a TensorFlow DType."
    )


def kernel_type_name(dtype: np.dtype[Any]) -> str:
    """TensorFlow's kernel-message name for the type of a numpy array."""
    found = _lookup_numpy(dtype)
    if found is not None:
        return found.kernel_name
    if dtype.kind in "SUO":
        return "string"
    return str(dtype)


def from_numpy(dtype: np.dtype[Any]) -> DType | None:
    """The DType of a numpy array's dtype, or None if TensorFlow has no such type."""
    return _lookup_numpy(dtype)


__all__ = [
    "DType",
    "as_dtype",
    "ACCUMULATOR_DTYPES",
    "float16",
    "half",
    "bfloat16",
    "float32",
    "float64",
    "double",
    "complex64",
    "complex128",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "qint8",
    "quint8",
    "qint16",
    "quint16",
    "qint32",
    "bool",
    "string",
    "resource",
]
