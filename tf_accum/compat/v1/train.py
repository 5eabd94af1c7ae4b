"""``tf.compat.v1.train``: the global step a TF1 training loop keeps."""

from tf_accum.graph.variables import get_global_step, get_or_create_global_step

__all__ = ["get_global_step", "get_or_create_global_step"]
