"""``tf.compat.v1.losses``: weighted losses added to the graph's ``losses`` collection."""

from tf_accum.graph.losses import (
    Reduction,
    add_loss,
    compute_weighted_loss,
    get_losses,
    get_regularization_losses,
    get_total_loss,
    mean_squared_error,
    softmax_cross_entropy,
    sparse_softmax_cross_entropy,
)

__all__ = [
    "Reduction",
    "add_loss",
    "compute_weighted_loss",
    "get_losses",
    "get_regularization_losses",
    "get_total_loss",
    "mean_squared_error",
    "softmax_cross_entropy",
    "sparse_softmax_cross_entropy",
]
