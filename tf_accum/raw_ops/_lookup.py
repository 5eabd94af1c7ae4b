"""Finding the accumulator an op acts on, and checking it is the right kind."""

from __future__ import annotations

from typing import Any

from tf_accum import errors
from tf_accum.accumulators.protocol import Accumulator
from tf_accum.accumulators.spec import AccumulatorSpec
from tf_accum.dtypes import as_dtype
from tf_accum.raw_ops.arguments import handle_of
from tf_accum.resources import current_table

# Handle type names as TensorFlow prints them in signature messages.
RESOURCE = "resource"
REF = "string_ref"


def accumulator(handle: Any, op_name: str, kind: str | None = None) -> Accumulator:
    """The live accumulator behind ``handle``, of ``kind`` when one is required.

    Raises:
        NotFoundError: destroyed or unknown handle.
        InvalidArgumentError: the accumulator is of the other kind.
    """
    found = current_table().lookup(handle_of(handle))
    if not isinstance(found.spec, AccumulatorSpec):
        raise errors.InvalidArgumentError(
            None,
            None,
            f"{op_name} needs an accumulator, but handle {handle} refers to "
            f"{found.spec.describe()} ({found.label})",
        )
    if kind is not None and found.spec.kind != kind:
        other = "SparseAccumulator" if found.spec.kind == "sparse" else "Accumulator"
        raise errors.InvalidArgumentError(
            None,
            None,
            f"{op_name} needs a {kind} accumulator, but handle {handle} refers to "
            f"{found.spec.describe()} ({found.label}); use the {other}* ops on it",
        )
    return found


def byte_swapped(given: Any, wanted: Any) -> bool:
    """Whether ``given`` is ``wanted`` in the other byte order (big-endian data, say).

    TensorFlow accepts such arrays as the same dtype; they are converted.
    """
    return bool(given.byteorder not in "=|" and given.newbyteorder("=") == wanted)


def handle_type(op_name: str) -> str:
    """How TensorFlow names the handle input of ``op_name`` in its messages."""
    return RESOURCE if op_name.startswith("Resource") else REF


def signature_mismatch(have: str, expected: str, detail: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(
        None, None, f"Signature mismatch, have: {have} expected: {expected}; {detail}"
    )


def check_take_dtype(acc: Accumulator, dtype: Any, op_name: str, outputs: str) -> None:
    """Refuse a take whose ``dtype`` is not the accumulator's.

    ``outputs`` spells the op's outputs with ``{}`` for the value dtype, as
    TensorFlow's signature message does (``"{}"``, ``"int64, {}, int64"``).

    Raises:
        TypeError: not a dtype.
        InvalidArgumentError: another dtype.
    """
    wanted = as_dtype(dtype)
    if wanted != acc.spec.dtype:
        kind = handle_type(op_name)
        raise signature_mismatch(
            f"{kind}, int32->{outputs.format(wanted.kernel_name)}",
            f"{kind}, int32->{outputs.format(acc.spec.dtype.kernel_name)}",
            f"dtype is {wanted.name} but the accumulator's dtype is {acc.spec.dtype.name}",
        )
