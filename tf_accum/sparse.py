"""``tf_accum.sparse``: the sparse accumulator class (as TF 1.15's ``tf.sparse``)."""

from tf_accum.compat.v1.sparse_conditional_accumulator import SparseConditionalAccumulator

__all__ = ["SparseConditionalAccumulator"]
