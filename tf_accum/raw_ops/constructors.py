"""The constructor ops: each call makes (or, by shared_name, finds) an accumulator."""

from __future__ import annotations

from typing import Any

from tf_accum import errors
from tf_accum.accumulators.spec import REDUCTION_TYPES, AccumulatorSpec
from tf_accum.dtypes import ACCUMULATOR_DTYPES, DType, as_dtype
from tf_accum.raw_ops.keyword_only import raw_op
from tf_accum.resources import current_table
from tf_accum.shapes import DeclaredShape, kernel_text, parse_attr_shape

INT64_MAX = 2**63 - 1


def accumulator_dtype(dtype: Any) -> DType:
    """Check a constructor's ``dtype`` against the op definitions' list.

    Raises:
        TypeError: not a dtype, or one the accumulator ops do not allow.
    """
    try:
        found = as_dtype(dtype)
    except TypeError:
        # the op builder's message, which names the argument
        raise TypeError(f"Expected DataType for argument 'dtype' not {dtype!r}.") from None
    if found not in ACCUMULATOR_DTYPES:
        allowed = ", ".join(t.name for t in ACCUMULATOR_DTYPES)
        raise TypeError(
            f"Value passed to parameter 'dtype' has DataType {found.name} not in list of "
            f"allowed values: {allowed}"
        )
    return found


def string_attr(value: Any, arg_name: str) -> str:
    """A string attribute: None is "" (TensorFlow's default), bytes are decoded as UTF-8.

    Bytes that are not UTF-8 keep each undecodable byte as a lone surrogate, so
    that two different byte strings stay two different names.

    Raises:
        TypeError: neither a string nor bytes.
    """
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode("utf-8", "surrogateescape")
    if not isinstance(value, str):
        raise TypeError(f"Expected string for argument '{arg_name}' not {value!r}.")
    return value


def check_reduction_type(reduction_type: Any) -> str:
    """ "MEAN" or "SUM" (as str or bytes); None is the default, "MEAN".

    The empty string is refused, as TensorFlow refuses it: only None means the
    default.

    Raises:
        TypeError: neither a string nor bytes.
        InvalidArgumentError: another string.
    """
    checked = "MEAN" if reduction_type is None else string_attr(reduction_type, "reduction_type")
    if checked not in REDUCTION_TYPES:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Value for attr 'reduction_type' of \"{checked}\" is not in the list of "
            'allowed values: "MEAN", "SUM"',
        )
    return checked


def check_size(shape: DeclaredShape, kind: str) -> DeclaredShape:
    """Refuse a declared shape no gradient can have (TensorFlow refuses it at construction).

    A sparse accumulator's dense shape may hold more elements than any dense
    tensor could: only its rows are ever stored.

    Raises:
        OverflowError: a dimension above 2**63 - 1.
        InvalidArgumentError: a dense shape of more than 2**63 - 1 elements.
    """
    if shape is None:
        return shape
    known = [d for d in shape if d is not None]
    for size in known:
        if size > INT64_MAX:
            raise OverflowError(
                f"Dimension {size} of shape {list(shape)} is too big: a dimension must be at "
                "most 2**63 - 1"
            )
    total = 1
    for size in known if kind == "dense" else ():
        total *= size
    if total > INT64_MAX:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Shape {kernel_text(shape)} is too large (more than 2**63 - 1 entries)",
        )
    return shape


def create(kind: str, op_name: str, attrs: dict[str, Any]) -> int:
    """Validate a constructor's attributes and create the accumulator; returns its handle."""
    container = string_attr(attrs["container"], "container")
    shared_name = string_attr(attrs["shared_name"], "shared_name")
    spec = AccumulatorSpec(
        kind,
        accumulator_dtype(attrs["dtype"]),
        check_size(parse_attr_shape(attrs["shape"]), kind),
        check_reduction_type(attrs["reduction_type"]),
    )
    name = attrs["name"]
    return current_table().create(container, shared_name, name or op_name, spec)


@raw_op
def ConditionalAccumulator(
    *,
    dtype: Any,
    shape: Any,
    container: str | bytes | None = "",
    shared_name: str | bytes | None = "",
    reduction_type: str | bytes | None = "MEAN",
    name: str | None = None,
) -> int:
    """Create a dense accumulator; returns its integer handle.

    Args:
        dtype: any of the 19 accumulator dtypes (see ``tf_accum.dtypes``).
        shape: the declared gradient shape: a list whose entries are sizes, or
            None or -1 for an unknown size; ``None`` for an unknown rank.
        container: with ``shared_name``, the scope of sharing ("" or None =
            "localhost").
        shared_name: "" or None for a private accumulator; otherwise every
            constructor call with the same container and name gets the same
            accumulator, for as long as it exists.
        reduction_type: "MEAN" (a take divides by the count; None means
            "MEAN", "" is refused) or "SUM"; bytes are accepted for it, for
            container and for shared_name.
        name: the base of a private accumulator's name.

    Raises:
        TypeError: not a dtype, a dtype outside the list, a malformed shape,
            or a container, shared_name or reduction_type that is neither a
            string nor bytes.
        OverflowError: a dimension above 2**63 - 1.
        InvalidArgumentError: a bad reduction_type, a dimension below -1, a
            shape of more than 2**63 - 1 elements, or a shared name already
            used with other attributes.

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
    container: str | bytes | None = "",
    shared_name: str | bytes | None = "",
    reduction_type: str | bytes | None = "MEAN",
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
    container: str | bytes | None = "",
    shared_name: str | bytes | None = "",
    reduction_type: str | bytes | None = "MEAN",
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
