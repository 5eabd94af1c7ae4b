"""``tf.compat.v1.train``: what a TF1 training loop uses beside its accumulators, its
optimizers and its cluster."""

from tf_accum.compat.v1 import queue_runner
from tf_accum.compat.v1.sync_replicas_optimizer import (
    SyncReplicasOptimizer,
    SyncReplicasOptimizerV2,
)
from tf_accum.graph.basic_hooks import (
    CheckpointSaverHook,
    CheckpointSaverListener,
    FeedFnHook,
    FinalOpsHook,
    GlobalStepWaiterHook,
    LoggingTensorHook,
    NanLossDuringTrainingError,
    NanTensorHook,
    SecondOrStepTimer,
    StepCounterHook,
    StopAtStepHook,
    SummarySaverHook,
)
from tf_accum.graph.checkpoint_management import (
    checkpoint_exists,
    get_checkpoint_mtimes,
    get_checkpoint_state,
    latest_checkpoint,
    list_variables,
    load_checkpoint,
    load_variable,
    remove_checkpoint,
    update_checkpoint_state,
)
from tf_accum.graph.cluster import ClusterSpec, Server
from tf_accum.graph.coordinator import Coordinator, LooperThread
from tf_accum.graph.global_step import (
    create_global_step,
    get_global_step,
    get_or_create_global_step,
    global_step,
)
from tf_accum.graph.monitored_session import (
    ChiefSessionCreator,
    MonitoredSession,
    MonitoredTrainingSession,
    SessionCreator,
    SingularMonitoredSession,
    WorkerSessionCreator,
)
from tf_accum.graph.optimizers.adadelta import AdadeltaOptimizer
from tf_accum.graph.optimizers.adagrad import AdagradOptimizer
from tf_accum.graph.optimizers.adam import AdamOptimizer
from tf_accum.graph.optimizers.ftrl import FtrlOptimizer
from tf_accum.graph.optimizers.gradient_descent import GradientDescentOptimizer
from tf_accum.graph.optimizers.learning_rate_decay import (
    exponential_decay,
    piecewise_constant,
    polynomial_decay,
)
from tf_accum.graph.optimizers.momentum import MomentumOptimizer
from tf_accum.graph.optimizers.moving_averages import ExponentialMovingAverage
from tf_accum.graph.optimizers.optimizer import Optimizer
from tf_accum.graph.optimizers.rmsprop import RMSPropOptimizer
from tf_accum.graph.queue_runner import QueueRunner, add_queue_runner, start_queue_runners
from tf_accum.graph.replica import replica_device_setter
from tf_accum.graph.saver import Saver, SaverDef
from tf_accum.graph.scaffold import Scaffold
from tf_accum.graph.session_manager import SessionManager
from tf_accum.graph.session_run_hook import (
    SessionRunArgs,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
)
from tf_accum.graph.supervisor import Supervisor

__all__ = [
    "Coordinator",
    "LooperThread",
    "create_global_step",
    "get_global_step",
    "get_or_create_global_step",
    "global_step",
    "ClusterSpec",
    "Server",
    "replica_device_setter",
    "Optimizer",
    "GradientDescentOptimizer",
    "MomentumOptimizer",
    "AdamOptimizer",
    "AdagradOptimizer",
    "RMSPropOptimizer",
    "AdadeltaOptimizer",
    "FtrlOptimizer",
    "SyncReplicasOptimizer",
    "SyncReplicasOptimizerV2",
    "exponential_decay",
    "piecewise_constant",
    "polynomial_decay",
    "ExponentialMovingAverage",
    # checkpoints
    "Saver",
    "SaverDef",
    "checkpoint_exists",
    "get_checkpoint_mtimes",
    "get_checkpoint_state",
    "latest_checkpoint",
    "list_variables",
    "load_checkpoint",
    "load_variable",
    "remove_checkpoint",
    "update_checkpoint_state",
    "QueueRunner",
    "add_queue_runner",
    "start_queue_runners",
    "queue_runner",
    # monitored sessions and hooks
    "Scaffold",
    "SessionManager",
    "SessionCreator",
    "ChiefSessionCreator",
    "WorkerSessionCreator",
    "MonitoredSession",
    "SingularMonitoredSession",
    "MonitoredTrainingSession",
    "SessionRunHook",
    "SessionRunArgs",
    "SessionRunContext",
    "SessionRunValues",
    "SecondOrStepTimer",
    "StopAtStepHook",
    "NanLossDuringTrainingError",
    "NanTensorHook",
    "LoggingTensorHook",
    "StepCounterHook",
    "CheckpointSaverListener",
    "CheckpointSaverHook",
    "SummarySaverHook",
    "GlobalStepWaiterHook",
    "FinalOpsHook",
    "FeedFnHook",
    "Supervisor",
]
