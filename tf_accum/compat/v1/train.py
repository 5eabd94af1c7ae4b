"""``tf.compat.v1.train``: what a TF1 training loop uses beside its accumulators."""

from tf_accum.graph.coordinator import Coordinator
from tf_accum.graph.global_step import (
    create_global_step,
    get_global_step,
    get_or_create_global_step,
    global_step,
)

__all__ = [
    "Coordinator",
    "create_global_step",
    "get_global_step",
    "get_or_create_global_step",
    "global_step",
]
