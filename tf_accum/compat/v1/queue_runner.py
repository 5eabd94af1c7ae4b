"""``tf.compat.v1.train.queue_runner``: the queue runner names, as a module."""

from tf_accum.graph.queue_runner import QueueRunner, add_queue_runner, start_queue_runners

__all__ = ["QueueRunner", "add_queue_runner", "start_queue_runners"]
