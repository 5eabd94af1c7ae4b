"""The error for an accumulator that was destroyed or never existed.

It lives with the accumulators, which raise it once destroyed, so that they
need nothing from the resource tables above them (which raise it too).
"""

from __future__ import annotations

from tf_accum import errors

# How TensorFlow names the accumulators' resource type in its messages.
_TYPE_NAME = "N10tensorflow26ConditionalAccumulatorBaseE"


def missing_resource_error(label: str, type_known: bool = True) -> errors.NotFoundError:
    """The error for using an accumulator that was destroyed or never existed.

    ``label`` is ``container/name``. ``type_known`` is False where TensorFlow no
    longer knows the resource's type (destroying what is already gone).
    """
    type_name = _TYPE_NAME if type_known else "<unknown>"
    return errors.NotFoundError(None, None, f"Resource {label}/{type_name} does not exist.")
