"""Sparse accumulators keep their own dtype: repeated indices wrap exactly as
elementwise arithmetic in that dtype does, and a take never returns a wider
type, in every one of the 19 dtypes and both reductions."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import tf_accum as tfa
from tf_accum.dtypes import ACCUMULATOR_DTYPES

raw = tfa.raw_ops
ROWS, WIDTH = 5, 2

gradient = st.tuples(
    st.lists(st.integers(0, ROWS - 1), min_size=1, max_size=8),  # duplicates likely
    st.integers(0, 2**31 - 1),  # seed for the values
)


def _values(np_dtype: np.dtype[Any], count: int, seed: int) -> np.ndarray[Any, Any]:
    rng = np.random.default_rng(seed)
    if np_dtype.kind in "iu":
        info = np.iinfo(np_dtype)
        # the whole range, so that sums of a few rows overflow and must wrap
        return rng.integers(info.min, info.max, (count, WIDTH), dtype=np_dtype, endpoint=True)
    # small whole numbers: floating sums are exact in any order (the order in
    # which a gradient's duplicates are summed is numpy's), means still round
    values = rng.integers(-8, 8, (count, WIDTH), endpoint=True)
    if np_dtype.kind == "c":
        return (values + 1j * rng.integers(-8, 8, (count, WIDTH))).astype(np_dtype)
    return values.astype(np_dtype)


def _reference_mean(total: np.ndarray[Any, Any], count: int) -> np.ndarray[Any, Any]:
    """Division by a row's count in the dtype: integers truncate toward zero."""
    if total.dtype.kind not in "iu":
        with np.errstate(all="ignore"):
            return np.divide(total, np.asarray(count).astype(total.dtype))
    wide = [int(x) for x in total]
    return np.array([abs(x) // count * (1 if x >= 0 else -1) for x in wide], total.dtype)


@settings(max_examples=200, deadline=None)
@given(
    grads=st.lists(gradient, min_size=1, max_size=4),
    dtype=st.sampled_from(ACCUMULATOR_DTYPES),
    reduction=st.sampled_from(["MEAN", "SUM"]),
)
def test_repeated_indices_stay_in_the_dtype(grads, dtype, reduction) -> None:  # type: ignore[no-untyped-def]
    np_dtype = dtype.numpy_dtype
    h = raw.SparseConditionalAccumulator(dtype=dtype, shape=[ROWS, WIDTH], reduction_type=reduction)
    # per row: the running sum, added one row at a time in the order the
    # accumulator adds them (a gradient's duplicates in order, then gradients
    # in order), and how many gradients touched the row
    totals: dict[int, np.ndarray[Any, Any]] = {}
    counts: dict[int, int] = {}
    for indices, seed in grads:
        values = _values(np_dtype, len(indices), seed)
        raw.SparseAccumulatorApplyGradient(
            handle=h, local_step=0, gradient_indices=np.array(indices, np.int64),
            gradient_values=values, gradient_shape=[ROWS, WIDTH], has_known_shape=True,
        )  # fmt: skip
        # the accumulator sums a gradient's duplicates first (stable, by index)
        own: dict[int, np.ndarray[Any, Any]] = {}
        for position in np.argsort(np.array(indices), kind="stable"):
            row = indices[position]
            if row in own:
                with np.errstate(all="ignore"):
                    own[row] = np.add(own[row], values[position])
            else:
                own[row] = values[position].copy()
        for row, rows_sum in own.items():
            if row in totals:
                with np.errstate(all="ignore"):
                    totals[row] = np.add(totals[row], rows_sum)
            else:
                totals[row] = rows_sum
            counts[row] = counts.get(row, 0) + 1
    indices_out, values_out, shape_out = raw.SparseAccumulatorTakeGradient(
        handle=h, num_required=1, dtype=dtype
    )
    raw.DestroyResourceOp(resource=h)
    expected_rows = sorted(totals)
    expected = [
        _reference_mean(totals[r], counts[r]) if reduction == "MEAN" else totals[r]
        for r in expected_rows
    ]
    assert values_out.dtype == np_dtype
    assert indices_out.tolist() == expected_rows
    assert values_out.shape == (len(expected_rows), WIDTH)
    assert shape_out.tolist() == [ROWS, WIDTH]
    # bit-for-bit (NaN, signed zero and all)
    np.testing.assert_array_equal(
        values_out.view(np.uint8), np.array(expected, np_dtype).reshape(-1, WIDTH).view(np.uint8)
    )


def test_int8_example_from_the_report() -> None:
    h = raw.SparseConditionalAccumulator(dtype=tfa.int8, shape=[4, 1], reduction_type="MEAN")
    # row 2 first arrives in a later gradient, as a new block of rows
    for indices in ([0], [2, 2], [2]):
        raw.SparseAccumulatorApplyGradient(
            handle=h, local_step=0, gradient_indices=np.array(indices, np.int64),
            gradient_values=np.full((len(indices), 1), 73, np.int8),
            gradient_shape=[4, 1], has_known_shape=True,
        )  # fmt: skip
    _, values, _ = raw.SparseAccumulatorTakeGradient(handle=h, num_required=3, dtype=tfa.int8)
    # 73 + 73 + 73 wraps to -37; the mean over the two gradients truncates to -18
    assert values.dtype == np.int8
    assert values.tolist() == [[73], [-18]]
