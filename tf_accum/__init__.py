"""TensorFlow's gradient accumulators, on numpy, without TensorFlow.

import tf_accum as tfa
acc = tfa.compat.v1.ConditionalAccumulator(tfa.float32, shape=[2])
acc.apply_grad([1.0, 2.0], local_step=0)
acc.take_grad(1)            # array([1., 2.], dtype=float32)

h = tfa.raw_ops.ResourceConditionalAccumulator(dtype=tfa.float32, shape=[2])
tfa.raw_ops.ResourceAccumulatorApplyGradient(handle=h, local_step=0, gradient=[1.0, 2.0])
"""

from typing import TYPE_CHECKING, Any

from tf_accum import dtypes, errors
from tf_accum.dtypes import *  # noqa: F403 - tfa.float32 etc., like tf.float32
from tf_accum.dtypes import __all__ as _dtype_names

if TYPE_CHECKING:
    from tf_accum import compat, distributed, raw_ops, sparse
    from tf_accum.indexed_slices import IndexedSlices
    from tf_accum.raw_ops.common import accumulator_stats

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

# Loaded at first use rather than by every import of tf_accum, which then
# costs little beyond numpy: the raw ops and the accumulators under them, the
# compat classes with graph mode, and the distributed tables (sockets,
# hashing, the Ray client's helpers). Name -> (module, attribute or None for
# the module itself).
_LAZY: dict[str, tuple[str, str | None]] = {
    "compat": ("tf_accum.compat", None),
    "distributed": ("tf_accum.distributed", None),
    "raw_ops": ("tf_accum.raw_ops", None),
    "sparse": ("tf_accum.sparse", None),
    "IndexedSlices": ("tf_accum.indexed_slices", "IndexedSlices"),
    "accumulator_stats": ("tf_accum.raw_ops.common", "accumulator_stats"),
}


def __getattr__(name: str) -> Any:
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    module_name, attribute = where
    found = importlib.import_module(module_name)
    if attribute is not None:
        found = getattr(found, attribute)
    globals()[name] = found
    return found


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
