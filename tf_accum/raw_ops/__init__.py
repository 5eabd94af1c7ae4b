"""Raw ops with TensorFlow's names and arguments, called by keyword only.

Constructors return an integer handle into the process's resource table; every
other op takes such a handle. See each op's docstring for what it accepts.
"""

from tf_accum.raw_ops.common import (
    AccumulatorNumAccumulated as AccumulatorNumAccumulated,
)
from tf_accum.raw_ops.common import (
    AccumulatorSetGlobalStep as AccumulatorSetGlobalStep,
)
from tf_accum.raw_ops.common import (
    DestroyResourceOp as DestroyResourceOp,
)
from tf_accum.raw_ops.common import (
    ResourceAccumulatorNumAccumulated as ResourceAccumulatorNumAccumulated,
)
from tf_accum.raw_ops.common import (
    ResourceAccumulatorSetGlobalStep as ResourceAccumulatorSetGlobalStep,
)
from tf_accum.raw_ops.constructors import (
    ConditionalAccumulator as ConditionalAccumulator,
)
from tf_accum.raw_ops.constructors import (
    ResourceConditionalAccumulator as ResourceConditionalAccumulator,
)
from tf_accum.raw_ops.constructors import (
    SparseConditionalAccumulator as SparseConditionalAccumulator,
)
from tf_accum.raw_ops.dense import (
    AccumulatorApplyGradient as AccumulatorApplyGradient,
)
from tf_accum.raw_ops.dense import (
    AccumulatorTakeGradient as AccumulatorTakeGradient,
)
from tf_accum.raw_ops.dense import (
    ResourceAccumulatorApplyGradient as ResourceAccumulatorApplyGradient,
)
from tf_accum.raw_ops.dense import (
    ResourceAccumulatorTakeGradient as ResourceAccumulatorTakeGradient,
)
from tf_accum.raw_ops.op_table import OPS
from tf_accum.raw_ops.queues import FIFOQueueV2 as FIFOQueueV2
from tf_accum.raw_ops.queues import QueueCloseV2 as QueueCloseV2
from tf_accum.raw_ops.queues import QueueDequeueManyV2 as QueueDequeueManyV2
from tf_accum.raw_ops.queues import QueueDequeueUpToV2 as QueueDequeueUpToV2
from tf_accum.raw_ops.queues import QueueDequeueV2 as QueueDequeueV2
from tf_accum.raw_ops.queues import QueueEnqueueManyV2 as QueueEnqueueManyV2
from tf_accum.raw_ops.queues import QueueEnqueueV2 as QueueEnqueueV2
from tf_accum.raw_ops.queues import QueueIsClosedV2 as QueueIsClosedV2
from tf_accum.raw_ops.queues import QueueSizeV2 as QueueSizeV2
from tf_accum.raw_ops.sparse import (
    SparseAccumulatorApplyGradient as SparseAccumulatorApplyGradient,
)
from tf_accum.raw_ops.sparse import (
    SparseAccumulatorTakeGradient as SparseAccumulatorTakeGradient,
)

__all__ = list(OPS)  # the op table's names, in its order
