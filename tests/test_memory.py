"""Memory behaviour the benchmarks report, pinned down with tracemalloc (no timing)."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

import tf_accum as tfa

raw = tfa.raw_ops


@pytest.mark.usefixtures("quiet_background")  # tracemalloc sees every thread
def test_dense_apply_allocates_nothing_after_the_first_gradient() -> None:
    n = 1 << 18
    h = raw.ResourceConditionalAccumulator(dtype=tfa.float32, shape=[n])
    gradient = np.ones(n, np.float32)
    raw.ResourceAccumulatorApplyGradient(handle=h, local_step=0, gradient=gradient)
    tracemalloc.start()
    try:
        for _ in range(20):
            raw.ResourceAccumulatorApplyGradient(handle=h, local_step=0, gradient=gradient)
        current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 * 1024, f"applies allocated up to {peak} bytes"
    assert raw.ResourceAccumulatorTakeGradient(handle=h, num_required=1, dtype=tfa.float32)[0] == 1


@pytest.mark.usefixtures("quiet_background")  # tracemalloc sees every thread
def test_dense_peak_is_one_buffer() -> None:
    n = 1 << 18
    h = raw.ResourceConditionalAccumulator(dtype=tfa.float32, shape=[n])
    gradient = np.ones(n, np.float32)
    tracemalloc.start()
    try:
        for _ in range(5):
            raw.ResourceAccumulatorApplyGradient(handle=h, local_step=0, gradient=gradient)
        result = raw.ResourceAccumulatorTakeGradient(handle=h, num_required=5, dtype=tfa.float32)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.nbytes == gradient.nbytes
    assert peak < 1.1 * gradient.nbytes  # the take hands over the sum buffer itself


@pytest.mark.usefixtures("quiet_background")  # tracemalloc sees every thread
def test_sparse_state_holds_only_the_touched_rows() -> None:
    rows, width = 10**6, 64
    h = raw.SparseConditionalAccumulator(dtype=tfa.float32, shape=[rows, width])
    rng = np.random.default_rng(0)
    batches = [np.sort(rng.choice(rows, 2000, replace=False)) for _ in range(5)]
    values = np.ones((2000, width), np.float32)
    touched = len(np.unique(np.concatenate(batches)))
    tracemalloc.start()
    try:
        for indices in batches:
            raw.SparseAccumulatorApplyGradient(
                handle=h, local_step=0, gradient_indices=indices, gradient_values=values,
                gradient_shape=[], has_known_shape=False,
            )  # fmt: skip
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    row_bytes = width * 4
    assert held < 1.5 * touched * row_bytes + 64 * 1024
    assert held < rows * row_bytes / 50  # nowhere near a dense buffer
