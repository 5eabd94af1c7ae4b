"""``tf.compat.v1.train``: the global step a TF1 training loop keeps, and its cluster."""

from tf_accum.graph.cluster import ClusterSpec, Server
from tf_accum.graph.replica import replica_device_setter
from tf_accum.graph.variables import get_global_step, get_or_create_global_step

__all__ = [
    "get_global_step",
    "get_or_create_global_step",
    "ClusterSpec",
    "Server",
    "replica_device_setter",
]
