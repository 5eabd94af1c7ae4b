"""``tf.compat.v1.linalg``: matrix products and transposes."""

from tf_accum.graph.linalg_ops import matmul, matrix_transpose
from tf_accum.graph.linalg_ops import matrix_transpose as transpose

__all__ = ["matmul", "matrix_transpose", "transpose"]
