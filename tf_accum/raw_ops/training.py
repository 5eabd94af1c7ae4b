"""TensorFlow's training ops: one optimizer step on variables, dense or for some rows.

``ResourceApplyAdam(var=v.handle, m=m.handle, v=s.handle, ...)`` changes the
variables ``var``, ``m`` and ``v`` in place, with TensorFlow's update formula
and in the variables' dtype (float16 rounds after every operation, as
TensorFlow's CPU kernels do). The ``Resource*`` ops take variable handles and
return nothing; the others (``ApplyAdam``, ``SparseApplyAdagrad``, ...) take
the variable itself, as TensorFlow's ref ops take a ref, and return its new
value; like TensorFlow's, they only build in graph mode (eagerly
RuntimeError). The sparse ops update the rows ``indices`` one index after the
other, so a repeated index is updated twice, as TensorFlow's kernels do.

The ops themselves are in :mod:`tf_accum.raw_ops.training_ops`, their
formulas in :mod:`tf_accum.raw_ops.training_rules`. Graph mode builds a node
(tf_accum/graph/training_nodes.py) whose kernel is :func:`updated_values`,
the function the eager ops call.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from tf_accum import errors
from tf_accum.dtypes import DType, from_numpy, kernel_type_name
from tf_accum.raw_ops.keyword_only import snake_case
from tf_accum.raw_ops.training_rules import RULES, Rule, Values
from tf_accum.shapes import kernel_text

Array = np.ndarray[Any, Any]

# The arguments that are variables (as TensorFlow names them across the ops).
VARIABLE_ARGUMENTS = ("var", "accum", "accum_update", "m", "v", "ms", "mom", "mg", "linear")
# The dtypes TensorFlow 2.21 registers CPU kernels of these ops for (all of them
# but the exceptions below).
KERNEL_DTYPES = ("float16", "bfloat16", "float32", "float64", "complex64", "complex128")
_NO_BFLOAT16 = ("SparseApplyRMSProp", "SparseApplyCenteredRMSProp")
_NO_COMPLEX = ("Ftrl", "FtrlV2")


def kernel_dtypes(op_type: str) -> tuple[str, ...]:
    """The dtypes TensorFlow 2.21 has CPU kernels of ``op_type`` for."""
    spec = TRAINING_OPS[op_type]
    found: tuple[str, ...] = KERNEL_DTYPES
    if op_type.removeprefix("Resource") in _NO_BFLOAT16:
        found = tuple(d for d in found if d != "bfloat16")
    if spec.rule in _NO_COMPLEX:
        found = tuple(d for d in found if not d.startswith("complex"))
    return found


class VariableHandle(Protocol):
    """What an eager ``Resource*`` op needs of its variable arguments (``Variable.handle``)."""

    @property
    def dtype(self) -> DType: ...

    def read(self) -> Array: ...

    def write(self, value: Array) -> None: ...


@dataclass(frozen=True)
class TrainingOp:
    """One training op: its arguments in TensorFlow's order and which update it makes."""

    rule: str  # the key of RULES
    arguments: tuple[str, ...]  # inputs, in TensorFlow's order
    attrs: tuple[tuple[str, Any], ...]  # attributes and their defaults
    sparse: bool
    resource: bool

    @functools.cached_property
    def variables(self) -> tuple[str, ...]:
        return tuple(a for a in self.arguments if a in VARIABLE_ARGUMENTS)

    @functools.cached_property
    def gradient(self) -> str:
        return "delta" if "delta" in self.arguments else "grad"

    @functools.cached_property
    def scalars(self) -> tuple[str, ...]:
        skip = (*VARIABLE_ARGUMENTS, "grad", "delta", "indices")
        return tuple(a for a in self.arguments if a not in skip)


_LOCKING = (("use_locking", False),)
# rule -> (dense arguments, the argument the sparse ops put ``indices`` after, attributes)
_FAMILIES: dict[str, tuple[tuple[str, ...], str | None, tuple[tuple[str, Any], ...]]] = {
    "GradientDescent": (("var", "alpha", "delta"), None, _LOCKING),
    "Momentum": (
        ("var", "accum", "lr", "grad", "momentum"),
        "grad",
        (*_LOCKING, ("use_nesterov", False)),
    ),
    "Adam": (
        ("var", "m", "v", "beta1_power", "beta2_power", "lr", "beta1", "beta2", "epsilon", "grad"),
        None,
        (*_LOCKING, ("use_nesterov", False)),
    ),
    "Adagrad": (("var", "accum", "lr", "grad"), "grad", (*_LOCKING, ("update_slots", True))),
    "AdagradV2": (
        ("var", "accum", "lr", "epsilon", "grad"),
        "grad",
        (*_LOCKING, ("update_slots", True)),
    ),
    "RMSProp": (("var", "ms", "mom", "lr", "rho", "momentum", "epsilon", "grad"), "grad", _LOCKING),
    "CenteredRMSProp": (
        ("var", "mg", "ms", "mom", "lr", "rho", "momentum", "epsilon", "grad"),
        "grad",
        _LOCKING,
    ),
    "Adadelta": (
        ("var", "accum", "accum_update", "lr", "rho", "epsilon", "grad"),
        "grad",
        _LOCKING,
    ),
    "Ftrl": (
        ("var", "accum", "linear", "grad", "lr", "l1", "l2", "lr_power"),
        "grad",
        (*_LOCKING, ("multiply_linear_by_lr", False)),
    ),
    "FtrlV2": (
        ("var", "accum", "linear", "grad", "lr", "l1", "l2", "l2_shrinkage", "lr_power"),
        "grad",
        (*_LOCKING, ("multiply_linear_by_lr", False)),
    ),
}


def _table() -> dict[str, TrainingOp]:
    table: dict[str, TrainingOp] = {}
    for rule, (dense, before_indices, attrs) in _FAMILIES.items():
        for resource in (False, True):
            prefix = "Resource" if resource else ""
            table[f"{prefix}Apply{rule}"] = TrainingOp(rule, dense, attrs, False, resource)
            if before_indices is not None:
                at = dense.index(before_indices) + 1
                sparse = (*dense[:at], "indices", *dense[at:])
                table[f"{prefix}SparseApply{rule}"] = TrainingOp(
                    rule, sparse, attrs, True, resource
                )
    return table


TRAINING_OPS: dict[str, TrainingOp] = _table()


# --- checks and the update, shared by eager ops and graph nodes ---


def _invalid(message: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, message)


def check_kernel_dtype(op_type: str, dtype: DType) -> None:
    """Raises InvalidArgumentError for a dtype TensorFlow has no kernel of ``op_type`` for."""
    allowed = kernel_dtypes(op_type)
    if dtype.name not in allowed:
        raise _invalid(
            f"No OpKernel was registered to support Op '{op_type}' with these attrs: "
            f"[T=DT_{dtype.name.upper()}]; its CPU kernels take {', '.join(allowed)}"
        )


def updated_values(op_type: str, current: list[Array], given: Values, attrs: Values) -> list[Array]:
    """The new values of ``op_type``'s variables (in the op's order).

    ``current`` holds the variables' values; ``given`` the other inputs as
    arrays of the variables' dtype (``indices`` int32 or int64).

    Raises:
        InvalidArgumentError: what TensorFlow's kernel refuses: shapes that
            differ from ``var``'s, a non-scalar scalar input, bad indices.
    """
    spec = TRAINING_OPS[op_type]
    names = spec.variables
    var = current[0]
    for name, value in zip(names[1:], current[1:], strict=True):
        if value.shape != var.shape:
            raise _invalid(
                f"var and {name} do not have the same shape"
                f"{kernel_text(var.shape)} {kernel_text(value.shape)}"
            )
    for name in spec.scalars:
        if np.ndim(given[name]) != 0:
            raise _invalid(f"{name} is not a scalar: {kernel_text(np.shape(given[name]))}")
    gradient = spec.gradient
    grad = given[gradient]
    values: Values = {name: given[name] for name in spec.scalars}
    rule = RULES[spec.rule]
    attrs = {**attrs, "sparse": spec.sparse}
    if not spec.sparse:
        if grad.shape != var.shape:
            raise _invalid(
                f"var and {gradient} do not have the same shape"
                f"{kernel_text(var.shape)} {kernel_text(grad.shape)}"
            )
        values.update(zip(names, current, strict=True))
        values[gradient] = grad
        found = rule(values, attrs)
        return [np.asarray(found[name], var.dtype) for name in names]
    indices = _check_rows(var, grad, given["indices"])
    return _sparse_update(rule, names, current, values, grad, indices, attrs)


def _check_rows(var: Array, grad: Array, indices: Array) -> Array:
    if var.ndim < 1:
        raise _invalid("var must be at least 1 dimensional")
    if indices.ndim != 1:
        raise _invalid("indices must be one-dimensional")
    if grad.ndim != var.ndim:
        raise _invalid("grad must have the same number of dimensions as var")
    for axis in range(1, var.ndim):
        if var.shape[axis] != grad.shape[axis]:
            raise _invalid(f"var and grad must match in dimension {axis}")
    if grad.shape[0] != indices.shape[0]:
        raise _invalid("grad must be the same size as indices in the first dimension.")
    outside = np.flatnonzero((indices < 0) | (indices >= var.shape[0]))
    if outside.size:
        at = int(outside[0])
        raise _invalid(f"Index {int(indices[at])} at offset {at} in indices is out of range")
    return indices.astype(np.intp)


def _sparse_update(
    rule: Rule,
    names: tuple[str, ...],
    current: list[Array],
    scalars: Values,
    grad: Array,
    indices: Array,
    attrs: Values,
) -> list[Array]:
    """Apply ``rule`` row by row, in the order of ``indices``: a row named twice is
    updated twice. Rows are independent, so each pass updates the k-th
    occurrences of every index at once."""
    fresh = [np.array(value) for value in current]
    occurrence = _occurrence_numbers(indices)
    for k in range(int(occurrence.max()) + 1 if occurrence.size else 0):
        chosen = occurrence == k
        rows = indices[chosen] if not chosen.all() else indices
        values = dict(scalars)
        values.update((name, value[rows]) for name, value in zip(names, fresh, strict=True))
        values["grad"] = grad[chosen] if not chosen.all() else grad
        found = rule(values, attrs)
        for name, value in zip(names, fresh, strict=True):
            value[rows] = found[name]
    return fresh


def _occurrence_numbers(indices: Array) -> Array:
    """For each position, how many earlier positions hold the same index."""
    if indices.size == 0:
        return np.zeros(0, np.intp)
    order = np.argsort(indices, kind="stable")
    ordered = indices[order]
    starts = np.r_[True, ordered[1:] != ordered[:-1]]
    first = np.maximum.accumulate(np.where(starts, np.arange(ordered.size), 0))
    numbers = np.empty(indices.size, np.intp)
    numbers[order] = np.arange(ordered.size) - first
    return numbers


# --- the eager ops ---

_eager_lock = threading.Lock()  # one update of eager variables at a time


def _typed(value: Any, dtype: DType, arg: str, op_type: str) -> Array:
    """An input as an array of the variables' dtype: Python numbers converted,
    arrays (and tensors) required to have that dtype already.

    Raises:
        InvalidArgumentError: an array of another dtype (TensorFlow 2.21
            aborts the process instead: docs/departures.md T23).
        TypeError: a value that does not convert.
    """
    own = getattr(value, "dtype", None)
    if own is not None:
        found = np.asarray(value)
        if found.dtype != dtype.numpy_dtype:
            raise _invalid(
                f"{op_type}: input '{arg}' has type {kernel_type_name(found.dtype)} that does "
                f"not match the variable's type {kernel_type_name(dtype.numpy_dtype)}"
            )
        return found
    try:
        return np.asarray(value, dtype.numpy_dtype)
    except (TypeError, ValueError) as error:
        raise TypeError(
            f"Cannot convert {value!r} to EagerTensor of dtype {dtype.name} (input '{arg}' "
            f"of {op_type})"
        ) from error


def index_values(value: Any, op_type: str) -> Array:
    """``indices`` as an int32 or int64 array.

    Raises:
        InvalidArgumentError: indices of another type, as TensorFlow's eager attr check.
    """
    found = np.asarray(value)
    if found.dtype.kind not in "iu" or found.size == 0 and found.dtype.kind == "f":
        if found.size == 0:
            return found.astype(np.int32)
        shown = from_numpy(found.dtype)
        raise _invalid(
            f"Value for attr 'Tindices' of {shown.name if shown else found.dtype} is not in the "
            f"list of allowed values: int32, int64 ({op_type})"
        )
    if found.dtype not in (np.int32, np.int64):
        return found.astype(np.int64)
    return found


def run_eagerly(op_type: str, kwargs: Values) -> None:
    """Run ``op_type`` eagerly with its arguments ``kwargs`` (the op function's locals).

    Raises:
        RuntimeError: a ref form (``ApplyAdam``, ...), which only builds.
        ValueError: a variable argument that is not a variable's handle.
        InvalidArgumentError: what :func:`updated_values` refuses; variables or
            inputs of another dtype; a dtype without TensorFlow kernels.
    """
    spec = TRAINING_OPS[op_type]
    if not spec.resource:
        raise RuntimeError(
            f"{snake_case(op_type)} op does not support eager execution. Arg 'out' is a ref."
        )
    handles: list[VariableHandle] = []
    for name in spec.variables:
        handle = kwargs[name]
        if not (hasattr(handle, "read") and hasattr(handle, "write")):
            raise ValueError(
                f"Tensor conversion requested dtype resource for {type(handle).__name__} "
                f"{handle!r}: argument '{name}' of {op_type} must be a variable's handle "
                "(Variable.handle)"
            )
        handles.append(handle)
    dtype = handles[0].dtype
    for name, handle in zip(spec.variables[1:], handles[1:], strict=True):
        if handle.dtype != dtype:
            raise _invalid(
                f"{op_type}: variable '{name}' has type {handle.dtype.name}, variable 'var' "
                f"{dtype.name}"
            )
    check_kernel_dtype(op_type, dtype)
    given = {name: _typed(kwargs[name], dtype, name, op_type) for name in spec.scalars}
    given[spec.gradient] = _typed(kwargs[spec.gradient], dtype, spec.gradient, op_type)
    if spec.sparse:
        given["indices"] = index_values(kwargs["indices"], op_type)
    attrs = {key: bool(kwargs.get(key, default)) for key, default in spec.attrs}
    with _eager_lock:
        fresh = updated_values(op_type, [h.read() for h in handles], given, attrs)
        for handle, value in zip(handles, fresh, strict=True):
            handle.write(value)


__all__ = ["TRAINING_OPS", "TrainingOp", "VariableHandle", "run_eagerly", "updated_values"]
