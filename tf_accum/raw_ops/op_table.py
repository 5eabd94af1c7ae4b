"""The raw ops, one entry each: the single table the op layer exports
(``tf_accum.raw_ops.__all__``) and graph mode builds nodes from
(tf_accum/graph/raw_op_nodes.py). tests/test_project.py holds it to
TensorFlow's recorded signatures (conformance/signatures.json).
"""

from __future__ import annotations

from dataclasses import dataclass

HANDLE = "handle"
VALUES = "T"  # the gradient's own dtype, inferred from the value
COMPONENTS = "Tcomponents"  # an input: a list of values, each of its own dtype (the last input)
COMPONENT_TYPES = "component_types"  # the outputs: one per dtype of that attribute


@dataclass(frozen=True)
class OpSignature:
    """A raw op's signature as TensorFlow defines it: which arguments are
    inputs (the rest are attributes), and its outputs."""

    inputs: tuple[tuple[str, str], ...]  # (argument, HANDLE | VALUES | dtype name)
    outputs: tuple[str, ...]  # dtype names; "dtype" is the op's dtype attribute
    constructor: bool = False
    blocking: bool = False
    scalar_output: bool = False  # TensorFlow's shape function makes the output a scalar


def _handle_ops(prefix: str) -> dict[str, OpSignature]:
    h = ((HANDLE, HANDLE),)
    return {
        f"{prefix}AccumulatorApplyGradient": OpSignature(
            (*h, ("local_step", "int64"), ("gradient", VALUES)), ()
        ),
        f"{prefix}AccumulatorNumAccumulated": OpSignature(h, ("int32",), scalar_output=True),
        f"{prefix}AccumulatorSetGlobalStep": OpSignature((*h, ("new_global_step", "int64")), ()),
        f"{prefix}AccumulatorTakeGradient": OpSignature(
            (*h, ("num_required", "int32")), ("dtype",), blocking=True
        ),
    }


def _queue_ops() -> dict[str, OpSignature]:
    h = ((HANDLE, HANDLE),)
    enqueue = OpSignature((*h, ("components", COMPONENTS)), (), blocking=True)
    many = OpSignature((*h, ("n", "int32")), (COMPONENT_TYPES,), blocking=True)
    return {
        "FIFOQueueV2": OpSignature((), ("resource",), constructor=True),
        "QueueEnqueueV2": enqueue,
        "QueueEnqueueManyV2": enqueue,
        "QueueDequeueV2": OpSignature(h, (COMPONENT_TYPES,), blocking=True),
        "QueueDequeueManyV2": many,
        "QueueDequeueUpToV2": many,
        "QueueSizeV2": OpSignature(h, ("int32",), scalar_output=True),
        "QueueCloseV2": OpSignature(h, (), blocking=True),
        "QueueIsClosedV2": OpSignature(h, ("bool",), scalar_output=True),
    }


OPS: dict[str, OpSignature] = {
    "ConditionalAccumulator": OpSignature((), ("string_ref",), constructor=True),
    "ResourceConditionalAccumulator": OpSignature((), ("resource",), constructor=True),
    "SparseConditionalAccumulator": OpSignature((), ("string_ref",), constructor=True),
    **_handle_ops(""),
    **_handle_ops("Resource"),
    "SparseAccumulatorApplyGradient": OpSignature(
        (
            (HANDLE, HANDLE),
            ("local_step", "int64"),
            ("gradient_indices", "int64"),
            ("gradient_values", VALUES),
            ("gradient_shape", "int64"),
        ),
        (),
    ),
    "SparseAccumulatorTakeGradient": OpSignature(
        ((HANDLE, HANDLE), ("num_required", "int32")), ("int64", "dtype", "int64"), blocking=True
    ),
    "DestroyResourceOp": OpSignature((("resource", HANDLE),), ()),
    **_queue_ops(),
}
