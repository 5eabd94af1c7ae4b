"""``tf.compat.v1``'s accumulator classes and dtypes."""

from tf_accum.compat.v1 import sparse
from tf_accum.compat.v1.accumulator_base import ConditionalAccumulatorBase
from tf_accum.compat.v1.conditional_accumulator import ConditionalAccumulator
from tf_accum.compat.v1.sparse_conditional_accumulator import SparseConditionalAccumulator
from tf_accum.dtypes import *  # noqa: F403 - TensorFlow exposes its dtypes here too
from tf_accum.dtypes import __all__ as _dtype_names

__all__ = [
    "ConditionalAccumulatorBase",
    "ConditionalAccumulator",
    "SparseConditionalAccumulator",
    "sparse",
    *_dtype_names,
]
