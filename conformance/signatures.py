"""Argument names and defaults of every raw op and compat method, against TensorFlow's.

    python -m conformance.signatures     # re-record signatures.json from TensorFlow

tf_accum may add only keyword-only arguments listed in ``ADDITIONS``.
"""

from __future__ import annotations

import inspect
import json
import sys
from pathlib import Path
from typing import Any

SIGNATURES_FILE = Path(__file__).parent / "signatures.json"

RAW_OPS = [
    "ConditionalAccumulator", "ResourceConditionalAccumulator", "SparseConditionalAccumulator",
    "AccumulatorApplyGradient", "ResourceAccumulatorApplyGradient",
    "AccumulatorNumAccumulated", "ResourceAccumulatorNumAccumulated",
    "AccumulatorSetGlobalStep", "ResourceAccumulatorSetGlobalStep",
    "AccumulatorTakeGradient", "ResourceAccumulatorTakeGradient",
    "SparseAccumulatorApplyGradient", "SparseAccumulatorTakeGradient", "DestroyResourceOp",
    # the training ops (tf_accum/raw_ops/training.py)
    "ApplyGradientDescent", "ResourceApplyGradientDescent", "ApplyMomentum", "SparseApplyMomentum",
    "ResourceApplyMomentum", "ResourceSparseApplyMomentum", "ApplyAdam", "ResourceApplyAdam",
    "ApplyAdagrad", "SparseApplyAdagrad", "ResourceApplyAdagrad", "ResourceSparseApplyAdagrad",
    "ApplyAdagradV2", "SparseApplyAdagradV2", "ResourceApplyAdagradV2",
    "ResourceSparseApplyAdagradV2", "ApplyRMSProp", "SparseApplyRMSProp", "ResourceApplyRMSProp",
    "ResourceSparseApplyRMSProp", "ApplyCenteredRMSProp", "SparseApplyCenteredRMSProp",
    "ResourceApplyCenteredRMSProp", "ResourceSparseApplyCenteredRMSProp", "ApplyAdadelta",
    "SparseApplyAdadelta", "ResourceApplyAdadelta", "ResourceSparseApplyAdadelta", "ApplyFtrl",
    "SparseApplyFtrl", "ResourceApplyFtrl", "ResourceSparseApplyFtrl", "ApplyFtrlV2",
    "SparseApplyFtrlV2", "ResourceApplyFtrlV2", "ResourceSparseApplyFtrlV2",
    "FIFOQueueV2", "QueueEnqueueV2", "QueueEnqueueManyV2", "QueueDequeueV2",
    "QueueDequeueManyV2", "QueueDequeueUpToV2", "QueueSizeV2", "QueueCloseV2", "QueueIsClosedV2",
]  # fmt: skip
CLASSES = {
    "ConditionalAccumulatorBase": ["__init__", "num_accumulated", "set_global_step"],
    "ConditionalAccumulator": ["__init__", "apply_grad", "take_grad", "num_accumulated",
                               "set_global_step"],
    "SparseConditionalAccumulator": ["__init__", "apply_grad", "apply_indexed_slices_grad",
                                     "take_grad", "take_indexed_slices_grad", "num_accumulated",
                                     "set_global_step"],
    "FIFOQueue": ["__init__", "enqueue", "enqueue_many", "dequeue", "dequeue_many",
                  "dequeue_up_to", "size", "close", "is_closed"],
    "train.SyncReplicasOptimizer": ["__init__", "compute_gradients", "apply_gradients",
                                    "get_chief_queue_runner", "get_init_tokens_op",
                                    "make_session_run_hook", "get_slot", "get_slot_names",
                                    "variables"],
}  # fmt: skip
# Our documented keyword-only additions (docs/departures.md T2): name -> default.
ADDITIONS = {
    "raw_ops.AccumulatorTakeGradient": {"timeout": None},
    "raw_ops.ResourceAccumulatorTakeGradient": {"timeout": None},
    "raw_ops.SparseAccumulatorTakeGradient": {"timeout": None},
    "ConditionalAccumulator.take_grad": {"timeout": None},
    "SparseConditionalAccumulator.take_grad": {"timeout": None},
    "SparseConditionalAccumulator.take_indexed_slices_grad": {"timeout": None},
    # docs/departures.md T28: the queue ops that can wait
    **{
        f"raw_ops.{op}": {"timeout": None}
        for op in (
            "QueueEnqueueV2",
            "QueueEnqueueManyV2",
            "QueueDequeueV2",
            "QueueDequeueManyV2",
            "QueueDequeueUpToV2",
            "QueueCloseV2",
        )
    },
    "FIFOQueue.dequeue": {"timeout": None},
    "FIFOQueue.dequeue_many": {"timeout": None},
    "FIFOQueue.dequeue_up_to": {"timeout": None},
}


def describe(fn: Any) -> list[list[Any]]:
    """[[name, default or "<required>"], ...] in order, without ``self``."""
    params = []
    for p in inspect.signature(fn).parameters.values():
        if p.name == "self":
            continue
        default = "<required>" if p.default is inspect.Parameter.empty else p.default
        params.append([p.name, default])
    return params


def signatures_of(raw_ops: Any, compat_v1: Any) -> dict[str, list[list[Any]]]:
    found = {f"raw_ops.{op}": describe(getattr(raw_ops, op)) for op in RAW_OPS}
    for cls, methods in CLASSES.items():
        owner = compat_v1
        for part in cls.split("."):  # "train.SyncReplicasOptimizer": in a sub-namespace
            owner = getattr(owner, part)
        for method in methods:
            found[f"{cls}.{method}"] = describe(getattr(owner, method))
    return found


def ours() -> dict[str, list[list[Any]]]:
    """tf_accum's signatures with the documented additions taken out.

    Raises:
        AssertionError: an addition is missing, or not keyword-only with its default.
    """
    import tf_accum

    found = signatures_of(tf_accum.raw_ops, tf_accum.compat.v1)
    for key, added in ADDITIONS.items():
        kept = []
        for name, default in found[key]:
            if name in added:
                assert default == added[name], f"{key}: {name} defaults to {default!r}"
                continue
            kept.append([name, default])
        assert len(kept) == len(found[key]) - len(added), f"{key}: additions missing"
        found[key] = kept
    return found


def tensorflow_signatures() -> dict[str, list[list[Any]]]:
    import tensorflow as tf

    return signatures_of(tf.raw_ops, tf.compat.v1)


def load() -> dict[str, list[list[Any]]]:
    return json.loads(SIGNATURES_FILE.read_text())  # type: ignore[no-any-return]


def main() -> None:
    SIGNATURES_FILE.write_text(json.dumps(tensorflow_signatures(), indent=1) + "\n")
    print(f"wrote {SIGNATURES_FILE}", file=sys.stderr)


if __name__ == "__main__":
    main()
