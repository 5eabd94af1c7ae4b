"""One adapter per accumulator kind, so behaviour suites run against each.

A gradient is described by a single number ``v``; ``total`` reads back the
summed ``v`` (and ``count`` the number of gradients) from a SUM take.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import tf_accum as tfa

raw = tfa.raw_ops


class DenseKind:
    name = "dense"

    def create(self, reduction_type: str = "MEAN", dtype: Any = tfa.float32, **kw: Any) -> int:
        return raw.ResourceConditionalAccumulator(
            dtype=dtype, shape=[2], reduction_type=reduction_type, **kw
        )

    def apply(self, h: int, v: float, step: int = 0, dtype: Any = np.float32) -> None:
        raw.ResourceAccumulatorApplyGradient(
            handle=h, local_step=step, gradient=np.array([v, 1], dtype)
        )

    def take(self, h: int, n: int, dtype: Any = tfa.float32, **kw: Any) -> Any:
        return raw.ResourceAccumulatorTakeGradient(handle=h, num_required=n, dtype=dtype, **kw)

    def total(self, result: Any) -> float:
        return float(result[0])

    def count(self, result: Any) -> float:
        return float(result[1])


class SparseKind:
    """Gradient ``v`` is row 0 = [v] and row 2 = [1] of a [3, 1] dense tensor."""

    name = "sparse"

    def create(self, reduction_type: str = "MEAN", dtype: Any = tfa.float32, **kw: Any) -> int:
        return raw.SparseConditionalAccumulator(
            dtype=dtype, shape=[3, 1], reduction_type=reduction_type, **kw
        )

    def apply(self, h: int, v: float, step: int = 0, dtype: Any = np.float32) -> None:
        raw.SparseAccumulatorApplyGradient(
            handle=h,
            local_step=step,
            gradient_indices=np.array([0, 2], np.int64),
            gradient_values=np.array([[v], [1]], dtype),
            gradient_shape=np.array([3, 1], np.int64),
            has_known_shape=True,
        )

    def take(self, h: int, n: int, dtype: Any = tfa.float32, **kw: Any) -> Any:
        return raw.SparseAccumulatorTakeGradient(handle=h, num_required=n, dtype=dtype, **kw)

    def total(self, result: Any) -> float:
        assert list(result.indices) == [0, 2]
        return float(result.values[0, 0])

    def count(self, result: Any) -> float:
        return float(result.values[1, 0])


KINDS: list[Any] = [DenseKind(), SparseKind()]
