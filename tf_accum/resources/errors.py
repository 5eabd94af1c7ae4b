"""The errors a resource table gives for handles and names."""

from __future__ import annotations

from tf_accum import errors

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
