"""Raw ops with TensorFlow's names and arguments, called by keyword only.

Constructors return an integer handle into the process's resource table; every
other op takes such a handle. See each op's docstring for what it accepts.
"""

from tf_accum.raw_ops.common import (
    AccumulatorNumAccumulated,
    AccumulatorSetGlobalStep,
    DestroyResourceOp,
    ResourceAccumulatorNumAccumulated,
    ResourceAccumulatorSetGlobalStep,
)
from tf_accum.raw_ops.constructors import (
    ConditionalAccumulator,
    ResourceConditionalAccumulator,
    SparseConditionalAccumulator,
)
from tf_accum.raw_ops.dense import (
    AccumulatorApplyGradient,
    AccumulatorTakeGradient,
    ResourceAccumulatorApplyGradient,
    ResourceAccumulatorTakeGradient,
)
from tf_accum.raw_ops.sparse import SparseAccumulatorApplyGradient, SparseAccumulatorTakeGradient

__all__ = [
    "ConditionalAccumulator",
    "ResourceConditionalAccumulator",
    "AccumulatorApplyGradient",
    "ResourceAccumulatorApplyGradient",
    "AccumulatorNumAccumulated",
    "ResourceAccumulatorNumAccumulated",
    "AccumulatorSetGlobalStep",
    "ResourceAccumulatorSetGlobalStep",
    "AccumulatorTakeGradient",
    "ResourceAccumulatorTakeGradient",
    "SparseConditionalAccumulator",
    "SparseAccumulatorApplyGradient",
    "SparseAccumulatorTakeGradient",
    "DestroyResourceOp",
]
