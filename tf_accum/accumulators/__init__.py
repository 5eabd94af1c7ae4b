"""Accumulator state: the shared step/counter/queue machine and its dense and sparse leaves."""

from tf_accum.accumulators.base import AccumulatorBase, AccumulatorSpec
from tf_accum.accumulators.dense import DenseAccumulator
from tf_accum.accumulators.sparse import SparseAccumulator, SparseTakeResult

__all__ = [
    "AccumulatorBase",
    "AccumulatorSpec",
    "DenseAccumulator",
    "SparseAccumulator",
    "SparseTakeResult",
]
