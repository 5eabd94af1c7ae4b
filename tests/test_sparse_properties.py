"""The sparse accumulator against a plain dense reference (scatter-add, per-row counts)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import tf_accum as tfa

raw = tfa.raw_ops
ROWS, WIDTH = 12, 3
DTYPES = [tfa.int32, tfa.int64, tfa.int16, tfa.float64, tfa.float32, tfa.complex128]

gradient = st.tuples(
    st.lists(st.integers(0, ROWS - 1), max_size=10),  # indices, duplicates and any order
    st.integers(-2, 3),  # local step
    st.integers(0, 2**31 - 1),  # seed for the values
)


@settings(max_examples=150, deadline=None)
@given(
    grads=st.lists(gradient, min_size=1, max_size=6),
    dtype=st.sampled_from(DTYPES),
    reduction=st.sampled_from(["MEAN", "SUM"]),
    start_step=st.integers(-1, 2),
)
def test_matches_dense_reference(grads, dtype, reduction, start_step) -> None:
    h = raw.SparseConditionalAccumulator(dtype=dtype, shape=[ROWS, WIDTH], reduction_type=reduction)
    raw.AccumulatorSetGlobalStep(handle=h, new_global_step=start_step)
    np_dtype = dtype.numpy_dtype
    total = np.zeros((ROWS, WIDTH), np_dtype)
    counts = np.zeros(ROWS, np.int64)
    accepted = 0
    for indices, step, seed in grads:
        # small integers: every dtype sums them exactly, in any order
        values = (
            np.random.default_rng(seed).integers(-50, 50, (len(indices), WIDTH)).astype(np_dtype)
        )
        raw.SparseAccumulatorApplyGradient(
            handle=h, local_step=step, gradient_indices=np.array(indices, np.int64),
            gradient_values=values, gradient_shape=[ROWS, WIDTH], has_known_shape=True,
        )  # fmt: skip
        if step >= start_step:
            accepted += 1
            np.add.at(total, np.array(indices, np.intp), values)
            counts[np.unique(np.array(indices, np.intp))] += 1
    assert int(raw.AccumulatorNumAccumulated(handle=h)) == accepted
    if accepted == 0:
        raw.DestroyResourceOp(resource=h)
        return
    result = raw.SparseAccumulatorTakeGradient(handle=h, num_required=accepted, dtype=dtype)
    touched = np.flatnonzero(counts)
    np.testing.assert_array_equal(result.indices, touched)
    expected = total[touched]
    if reduction == "MEAN":
        divisor = counts[touched][:, None]
        if dtype.is_integer:
            expected = (np.trunc(expected.astype(np.float64) / divisor)).astype(np_dtype)
        else:
            expected = expected / divisor.astype(np_dtype)
    assert result.values.dtype == np_dtype
    np.testing.assert_array_equal(result.values, expected)
    np.testing.assert_array_equal(result.shape, [ROWS, WIDTH])
    raw.DestroyResourceOp(resource=h)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.lists(st.integers(0, 10**6 - 1), unique=True, max_size=50), min_size=1, max_size=5)
)
def test_sorted_unique_float32_is_bit_identical_to_sequential_adds(batches) -> None:
    """TensorFlow's merge for sorted unique indices: per row, add in arrival order."""
    h = raw.SparseConditionalAccumulator(dtype=tfa.float32, shape=[10**6, 2])
    rng = np.random.default_rng(len(batches))
    expected: dict[int, np.ndarray] = {}
    counts: dict[int, int] = {}
    for batch in batches:
        indices = np.array(sorted(batch), np.int64)
        values = rng.standard_normal((len(indices), 2)).astype(np.float32)
        raw.SparseAccumulatorApplyGradient(
            handle=h, local_step=0, gradient_indices=indices, gradient_values=values,
            gradient_shape=[], has_known_shape=False,
        )  # fmt: skip
        for i, row in zip(indices.tolist(), values, strict=True):
            expected[i] = expected[i] + row if i in expected else row.copy()
            counts[i] = counts.get(i, 0) + 1
    result = raw.SparseAccumulatorTakeGradient(
        handle=h, num_required=len(batches), dtype=tfa.float32
    )
    keys = sorted(expected)
    np.testing.assert_array_equal(result.indices, keys)
    want = np.array([expected[k] / np.float32(counts[k]) for k in keys], np.float32).reshape(-1, 2)
    assert result.values.tobytes() == want.tobytes()
