"""The errors a resource table gives for handles and names."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tf_accum import errors
from tf_accum.accumulators.missing import missing_resource_error

if TYPE_CHECKING:
    from tf_accum.accumulators.spec import AccumulatorSpec

__all__ = [
    "DEFAULT_CONTAINER",
    "missing_resource_error",
    "shared_queue_conflict",
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


def shared_queue_conflict(name: str, found: Any, requested: Any) -> errors.InvalidArgumentError:
    """The error for a queue's shared name already used with other attributes,
    or by an accumulator (TensorFlow's words for the attribute that differs)."""
    if getattr(found, "kind", None) != requested.kind or not hasattr(found, "capacity"):
        text = f"Shared resource '{name}' is {found.describe()}, not {requested.describe()}"
    elif found.component_types != requested.component_types:
        text = (
            f"Shared queue '{name}' has component types "
            f"{', '.join(t.kernel_name for t in found.component_types)} but requested component "
            f"types were {', '.join(t.kernel_name for t in requested.component_types)}"
        )
    elif found.capacity != requested.capacity:
        text = (
            f"Shared queue '{name}' has capacity {found.capacity} but requested capacity was "
            f"{requested.capacity}"
        )
    else:
        text = (
            f"Shared queue '{name}' has component shapes {found.describe()} but requested "
            f"{requested.describe()}"
        )
    return errors.InvalidArgumentError(None, None, text)
