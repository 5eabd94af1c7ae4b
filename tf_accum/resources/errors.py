"""The errors a resource table gives for handles and names."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tf_accum import errors
from tf_accum.accumulators.missing import missing_resource_error

if TYPE_CHECKING:
    from tf_accum.accumulators.spec import AccumulatorSpec

__all__ = [
    "DEFAULT_CONTAINER",
    "missing_resource_error",
    "shared_spec_conflict",
    "unknown_handle_label",
]

DEFAULT_CONTAINER = "localhost"


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
