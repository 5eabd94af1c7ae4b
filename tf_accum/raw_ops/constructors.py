"""The constructor ops: each call makes (or, by shared_name, finds) an accumulator."""

from __future__ import annotations

from typing import Any

from tf_accum import errors
from tf_accum.accumulators.spec import REDUCTION_TYPES, AccumulatorSpec
from tf_accum.dtypes import ACCUMULATOR_DTYPES, DType, as_dtype
from tf_accum.raw_ops._keyword_only import raw_op
from tf_accum.resources import current_table
from tf_accum.shapes import parse_attr_shape


def accumulator_dtype(dtype: Any) -> DType:
    """Check a constructor's ``dtype`` against the op definitions' list.

    Raises:
        TypeError: not a dtype, or one the accumulator ops do not allow.
    """
    found = as_dtype(dtype)
    if found not in ACCUMULATOR_DTYPES:
        allowed = ", ".join(t.name for t in ACCUMULATOR_DTYPES)
        raise TypeError(
            f"Value passed to parameter 'dtype' has DataType {found.name} not in list of "
            f"allowed values: {allowed}"
        )
    return found


def check_reduction_type(reduction_type: Any) -> str:
    """Raises InvalidArgumentError unless ``reduction_type`` is "MEAN" or "SUM"."""
    if reduction_type not in REDUCTION_TYPES:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Value for attr 'reduction_type' of {reduction_type!r} is not in the list of "
            'allowed values: "MEAN", "SUM"',
        )
    return str(reduction_type)


def create(kind: str, op_name: str, attrs: dict[str, Any]) -> int:
    """Validate a constructor's attributes and create the accumulator; returns its handle."""
    spec = AccumulatorSpec(
        kind,
        accumulator_dtype(attrs["dtype"]),
        parse_attr_shape(attrs["shape"]),
        check_reduction_type(attrs["reduction_type"]),
    )
    container, shared_name, name = attrs["container"], attrs["shared_name"], attrs["name"]
    return current_table().create(str(container), str(shared_name), name or op_name, spec)


@raw_op
def ConditionalAccumulator(
    *,
    dtype: Any,
    shape: Any,
    container: str = "",
    shared_name: str = "",
    reduction_type: str = "MEAN",
    name: str | None = None,
) -> int:
    """Create a dense accumulator; returns its integer handle.

    Args:
        dtype: any of the 19 accumulator dtypes (see ``tf_accum.dtypes``).
        shape: the declared gradient shape: a list whose entries are sizes, or
            None or -1 for an unknown size; ``None`` for an unknown rank.
        container: with ``shared_name``, the scope of sharing ("" = "localhost").
        shared_name: "" for a private accumulator; otherwise every constructor
            call with the same container and name gets the same accumulator,
            for as long as it exists.
        reduction_type: "MEAN" (a take divides by the count) or "SUM".
        name: the base of a private accumulator's name.

    Raises:
        TypeError: a dtype outside the list, or a malformed shape.
        InvalidArgumentError: a bad reduction_type, a dimension below -1, or a
            shared name already used with other attributes.

    Differs from TensorFlow (docs/departures.md T1, T4, T10, T11, T15): works
    eagerly; every dtype of the op definition works (TensorFlow has kernels for
    float16/32/64 only); a call without shared_name always makes a new
    accumulator; a shared name with conflicting attributes is an error instead
    of silently returning the first accumulator.
    """
    return create("dense", "ConditionalAccumulator", locals())


@raw_op
def ResourceConditionalAccumulator(
    *,
    dtype: Any,
    shape: Any,
    container: str = "",
    shared_name: str = "",
    reduction_type: str = "MEAN",
    name: str | None = None,
) -> int:
    """Create a dense accumulator; the same as :func:`ConditionalAccumulator`.

    Handles of both are interchangeable and shared names are common to both.
    """
    return create("dense", "ResourceConditionalAccumulator", locals())


@raw_op
def SparseConditionalAccumulator(
    *,
    dtype: Any,
    shape: Any,
    container: str = "",
    shared_name: str = "",
    reduction_type: str = "MEAN",
    name: str | None = None,
) -> int:
    """Create a sparse accumulator; returns its integer handle.

    Arguments as for :func:`ConditionalAccumulator`; the declared shape is that
    of the dense tensor the sparse gradients are slices of (dimension 0 bounds
    the indices).

    Differs from TensorFlow (docs/departures.md T1, T4, T10, T11, T15): works
    eagerly; every dtype of the op definition works; a shared name already used
    by a dense accumulator (or with other attributes) is an
    InvalidArgumentError.
    """
    return create("sparse", "SparseConditionalAccumulator", locals())
