"""``tf.compat.v1.queue``: the queue classes."""

from tf_accum.compat.v1.queues import FIFOQueue, QueueBase

__all__ = ["FIFOQueue", "QueueBase"]
