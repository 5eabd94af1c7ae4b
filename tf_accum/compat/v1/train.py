"""``tf.compat.v1.train``: what a TF1 training loop uses beside its accumulators, and its cluster."""

from tf_accum.compat.v1 import queue_runner
from tf_accum.graph.cluster import ClusterSpec, Server
from tf_accum.graph.coordinator import Coordinator
from tf_accum.graph.global_step import (
    create_global_step,
    get_global_step,
    get_or_create_global_step,
    global_step,
)
from tf_accum.graph.queue_runner import QueueRunner, add_queue_runner, start_queue_runners
from tf_accum.graph.replica import replica_device_setter

__all__ = [
    "Coordinator",
    "create_global_step",
    "get_global_step",
    "get_or_create_global_step",
    "global_step",
    "ClusterSpec",
    "Server",
    "replica_device_setter",
    "QueueRunner",
    "add_queue_runner",
    "start_queue_runners",
    "queue_runner",
]
