"""TensorFlow's gradient accumulators, on numpy, without TensorFlow.

import tf_accum as tfa
acc = tfa.compat.v1.ConditionalAccumulator(tfa.float32, shape=[2])
acc.apply_grad([1.0, 2.0], local_step=0)
acc.take_grad(1)            # array([1., 2.], dtype=float32)

h = tfa.raw_ops.ResourceConditionalAccumulator(dtype=tfa.float32, shape=[2])
tfa.raw_ops.ResourceAccumulatorApplyGradient(handle=h, local_step=0, gradient=[1.0, 2.0])
"""

from typing import TYPE_CHECKING, Any

from tf_accum import compat, dtypes, errors, raw_ops, sparse
from tf_accum.dtypes import *  # noqa: F403 - tfa.float32 etc., like tf.float32
from tf_accum.dtypes import __all__ as _dtype_names
from tf_accum.indexed_slices import IndexedSlices
from tf_accum.raw_ops.common import accumulator_stats

if TYPE_CHECKING:
    from tf_accum import distributed

__version__ = "0.1.0"

__all__ = [
    "compat",
    "distributed",
    "dtypes",
    "errors",
    "raw_ops",
    "sparse",
    "IndexedSlices",
    "accumulator_stats",
    *_dtype_names,
]


def __getattr__(name: str) -> Any:
    # tfa.distributed (sockets, hashing, the Ray client's helpers) is imported
    # at its first use, not by every import of tf_accum
    if name == "distributed":
        import importlib

        return importlib.import_module("tf_accum.distributed")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
