"""``tf.compat.v1.sparse``: the sparse accumulator class."""

from tf_accum.compat.v1.sparse_conditional_accumulator import SparseConditionalAccumulator

__all__ = ["SparseConditionalAccumulator"]
