"""Raw ops with TensorFlow's names and arguments, called by keyword only.

Constructors return an integer handle into the process's resource table; every
other op takes such a handle. The training ops (``ResourceApplyAdam``, ...;
tf_accum/raw_ops/training.py) change variables. See each op's docstring for
what it accepts.
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
from tf_accum.raw_ops.training import TRAINING_OPS
from tf_accum.raw_ops.training_ops import ApplyAdadelta as ApplyAdadelta
from tf_accum.raw_ops.training_ops import ApplyAdagrad as ApplyAdagrad
from tf_accum.raw_ops.training_ops import ApplyAdagradV2 as ApplyAdagradV2
from tf_accum.raw_ops.training_ops import ApplyAdam as ApplyAdam
from tf_accum.raw_ops.training_ops import ApplyCenteredRMSProp as ApplyCenteredRMSProp
from tf_accum.raw_ops.training_ops import ApplyFtrl as ApplyFtrl
from tf_accum.raw_ops.training_ops import ApplyFtrlV2 as ApplyFtrlV2
from tf_accum.raw_ops.training_ops import ApplyGradientDescent as ApplyGradientDescent
from tf_accum.raw_ops.training_ops import ApplyMomentum as ApplyMomentum
from tf_accum.raw_ops.training_ops import ApplyRMSProp as ApplyRMSProp
from tf_accum.raw_ops.training_ops import ResourceApplyAdadelta as ResourceApplyAdadelta
from tf_accum.raw_ops.training_ops import ResourceApplyAdagrad as ResourceApplyAdagrad
from tf_accum.raw_ops.training_ops import ResourceApplyAdagradV2 as ResourceApplyAdagradV2
from tf_accum.raw_ops.training_ops import ResourceApplyAdam as ResourceApplyAdam
from tf_accum.raw_ops.training_ops import (
    ResourceApplyCenteredRMSProp as ResourceApplyCenteredRMSProp,
)
from tf_accum.raw_ops.training_ops import ResourceApplyFtrl as ResourceApplyFtrl
from tf_accum.raw_ops.training_ops import ResourceApplyFtrlV2 as ResourceApplyFtrlV2
from tf_accum.raw_ops.training_ops import (
    ResourceApplyGradientDescent as ResourceApplyGradientDescent,
)
from tf_accum.raw_ops.training_ops import ResourceApplyMomentum as ResourceApplyMomentum
from tf_accum.raw_ops.training_ops import ResourceApplyRMSProp as ResourceApplyRMSProp
from tf_accum.raw_ops.training_ops import ResourceSparseApplyAdadelta as ResourceSparseApplyAdadelta
from tf_accum.raw_ops.training_ops import ResourceSparseApplyAdagrad as ResourceSparseApplyAdagrad
from tf_accum.raw_ops.training_ops import (
    ResourceSparseApplyAdagradV2 as ResourceSparseApplyAdagradV2,
)
from tf_accum.raw_ops.training_ops import (
    ResourceSparseApplyCenteredRMSProp as ResourceSparseApplyCenteredRMSProp,
)
from tf_accum.raw_ops.training_ops import ResourceSparseApplyFtrl as ResourceSparseApplyFtrl
from tf_accum.raw_ops.training_ops import ResourceSparseApplyFtrlV2 as ResourceSparseApplyFtrlV2
from tf_accum.raw_ops.training_ops import ResourceSparseApplyMomentum as ResourceSparseApplyMomentum
from tf_accum.raw_ops.training_ops import ResourceSparseApplyRMSProp as ResourceSparseApplyRMSProp
from tf_accum.raw_ops.training_ops import SparseApplyAdadelta as SparseApplyAdadelta
from tf_accum.raw_ops.training_ops import SparseApplyAdagrad as SparseApplyAdagrad
from tf_accum.raw_ops.training_ops import SparseApplyAdagradV2 as SparseApplyAdagradV2
from tf_accum.raw_ops.training_ops import SparseApplyCenteredRMSProp as SparseApplyCenteredRMSProp
from tf_accum.raw_ops.training_ops import SparseApplyFtrl as SparseApplyFtrl
from tf_accum.raw_ops.training_ops import SparseApplyFtrlV2 as SparseApplyFtrlV2
from tf_accum.raw_ops.training_ops import SparseApplyMomentum as SparseApplyMomentum
from tf_accum.raw_ops.training_ops import SparseApplyRMSProp as SparseApplyRMSProp

# the op table's names, in its order, then the training ops'
__all__ = list(OPS) + list(TRAINING_OPS)
