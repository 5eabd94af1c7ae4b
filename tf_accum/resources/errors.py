"""The errors a resource table gives for handles and names."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tf_accum import errors

if TYPE_CHECKING:
    from tf_accum.accumulators.spec import AccumulatorSpec

DEFAULT_CONTAINER = "localhost"

# How TensorFlow names the accumulators' resource type in its messages.
_TYPE_NAME = "N10tensorflow26ConditionalAccumulatorBaseE"


def missing_resource_error(label: str, type_known: bool = True) -> errors.NotFoundError:
    """The error for using an accumulator that was destroyed or never existed.

    ``label`` is ``container/name``. ``type_known`` is False where TensorFlow no
    longer knows the resource's type (destroying what is already gone).
    """
    type_name = _TYPE_NAME if type_known else "<unknown>"
    return errors.NotFoundError(None, None, f"Resource {label}/{type_name} does not exist.")


def unknown_handle_label(handle: int) -> str:
    """The label printed for a handle the table no longer (or never) knew."""
    return f"{DEFAULT_CONTAINER}/<handle {handle}>"


def shared_spec_conflict(
    label: str, found: AccumulatorSpec, requested: AccumulatorSpec
) -> errors.InvalidArgumentError:
    """The error for sharing a live name with other attributes (docs/departures.md T10)."""
    return errors.InvalidArgumentError(
        None,
        None,
        f"Accumulator {label} already exists as {found.describe()}; requested "
        f"{requested.describe()}. An accumulator shared by name must be created with the "
        "same kind, dtype, shape and reduction_type.",
    )
