"""``tf.compat.v1.nn``: activations, softmax, cross entropies and the other
``tf.nn`` functions a TF1 model uses, with their gradients registered."""

from tf_accum.graph import nn_gradients as _nn_gradients  # noqa: F401 - registers the gradients
from tf_accum.graph.embedding_ops import dropout, embedding_lookup
from tf_accum.graph.nn_ops import (
    bias_add,
    elu,
    in_top_k,
    l2_loss,
    log_softmax,
    relu,
    relu6,
    sigmoid,
    sigmoid_cross_entropy_with_logits,
    softmax,
    softmax_cross_entropy_with_logits,
    softmax_cross_entropy_with_logits_v2,
    sparse_softmax_cross_entropy_with_logits,
    tanh,
    xw_plus_b,
)

__all__ = [
    "bias_add",
    "dropout",
    "elu",
    "embedding_lookup",
    "in_top_k",
    "l2_loss",
    "log_softmax",
    "relu",
    "relu6",
    "sigmoid",
    "sigmoid_cross_entropy_with_logits",
    "softmax",
    "softmax_cross_entropy_with_logits",
    "softmax_cross_entropy_with_logits_v2",
    "sparse_softmax_cross_entropy_with_logits",
    "tanh",
    "xw_plus_b",
]
