"""Every fast path gives the bits of the simple numpy path it replaces.

The simple paths: a float16/bfloat16 sum is ``np.add(total, gradient,
out=total)`` in the narrow dtype after a copy of the first gradient; large
adds, divisions and copies are one numpy call each. The thresholds and chunk
sizes are lowered here so that small arrays cross them (several chunks, sizes
on either side of each threshold).
"""

from __future__ import annotations

import contextlib
import threading
import tracemalloc
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tf_accum as tfa
from tests.helpers import SPARSE_PATHS, WAIT, sparse_row_loops
from tf_accum.accumulators import (
    division,
    float_errors,
    narrow_sum,
    running_sum,
    sparse_round,
)
from tf_accum.resources import current_table

raw = tfa.raw_ops
NARROW = {"float16": (tfa.float16, np.float16), "bfloat16": (tfa.bfloat16, ml_dtypes.bfloat16)}


@contextlib.contextmanager
def small_thresholds(chunk: int = 5, narrow_min: int = 8) -> Iterator[None]:
    with (
        mock.patch.object(narrow_sum, "CHUNK", chunk),
        mock.patch.object(running_sum, "NARROW_MIN_ELEMENTS", narrow_min),
    ):
        yield


# bit patterns that matter: zeros, subnormals, the largest finite values, the
# smallest normals, infinities and NaNs (quiet, signalling, with payloads)
HALF_EDGES = [0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x0400, 0x7BFF, 0xFBFF, 0x7BFE,
              0x7C00, 0xFC00, 0x7E00, 0xFE00, 0x7C01, 0x7FFF, 0x3C00, 0xBC00]  # fmt: skip
BF16_EDGES = [0x0000, 0x8000, 0x0001, 0x8001, 0x007F, 0x0080, 0x7F7F, 0xFF7F, 0x7F7E,
              0x7F80, 0xFF80, 0x7FC0, 0xFFC0, 0x7F81, 0x7FFF, 0x3F80, 0xBF80]  # fmt: skip


def narrow_bits(kind: str, size: int, seed: int, mode: str) -> np.ndarray[Any, Any]:
    """Random narrow values as their uint16 bits, of one of several flavours."""
    rng = np.random.default_rng(seed)
    edges = np.array(HALF_EDGES if kind == "float16" else BF16_EDGES, np.uint16)
    if mode == "any bits":
        return rng.integers(0, 2**16, size, dtype=np.uint16)
    if mode == "edges":
        return rng.choice(edges, size)
    scale = {"ordinary": 1.0, "large": 3e4 if kind == "float16" else 1e38, "tiny": 1e-6}[mode]
    values = rng.standard_normal(size) * scale
    dtype = NARROW[kind][1]
    with np.errstate(all="ignore"):
        return values.astype(np.float32).astype(dtype).view(np.uint16)


def simple_sum(gradients: list[np.ndarray[Any, Any]]) -> np.ndarray[Any, Any]:
    total = np.array(gradients[0], copy=True)
    with np.errstate(all="ignore"):
        for gradient in gradients[1:]:
            np.add(total, gradient, out=total)
    return total


@settings(max_examples=120, deadline=None)
@given(
    kind=st.sampled_from(sorted(NARROW)),
    size=st.sampled_from([7, 8, 9, 10, 11, 17, 64]),  # around NARROW_MIN_ELEMENTS and CHUNK
    modes=st.lists(
        st.sampled_from(["any bits", "edges", "ordinary", "large", "tiny"]), min_size=1, max_size=5
    ),  # fmt: skip
    seed=st.integers(0, 2**32 - 1),
    reduction=st.sampled_from(["SUM", "MEAN"]),
    strided=st.booleans(),
)
def test_narrow_sums_match_numpy_bit_for_bit(kind, size, modes, seed, reduction, strided) -> None:
    dtype, np_dtype = NARROW[kind]
    gradients = []
    for i, mode in enumerate(modes):
        bits = narrow_bits(kind, size * 2 if strided else size, seed + i, mode)
        # odd strides: every other element of a longer array
        gradients.append(bits.view(np_dtype)[::2] if strided else bits.view(np_dtype))
    with small_thresholds():
        h = raw.ConditionalAccumulator(dtype=dtype, shape=[size], reduction_type=reduction)
        for gradient in gradients:
            raw.AccumulatorApplyGradient(handle=h, local_step=0, gradient=gradient)
        taken = raw.AccumulatorTakeGradient(handle=h, num_required=1, dtype=dtype)
    expected = simple_sum(gradients)
    if reduction == "MEAN":
        with np.errstate(all="ignore"):
            expected = np.divide(expected, np.asarray(len(gradients)).astype(np_dtype))
    assert taken.dtype == np_dtype and taken.shape == (size,)
    np.testing.assert_array_equal(taken.view(np.uint16), expected.view(np.uint16))


@pytest.mark.parametrize("kind", sorted(NARROW))
def test_narrow_sum_of_a_multi_dimensional_transposed_gradient(kind: str) -> None:
    dtype, np_dtype = NARROW[kind]
    rng = np.random.default_rng(5)
    grads = [rng.standard_normal((6, 4)).astype(np_dtype).T for _ in range(3)]  # not contiguous
    with small_thresholds():
        h = raw.ConditionalAccumulator(dtype=dtype, shape=[4, 6], reduction_type="SUM")
        for g in grads:
            raw.AccumulatorApplyGradient(handle=h, local_step=0, gradient=g)
        # the round runs on the float32 path, not numpy's narrow loops
        running = current_table().lookup(h)._round  # type: ignore[attr-defined]
        assert isinstance(running, narrow_sum.NarrowSum)
        assert running.exact is None
        taken = raw.AccumulatorTakeGradient(handle=h, num_required=3, dtype=dtype)
    np.testing.assert_array_equal(taken.view(np.uint16), simple_sum(grads).view(np.uint16))


def test_half_overflow_found_by_the_bound_check() -> None:
    # two 40000s overflow; the bound must notice although no input is special
    size = 12
    with small_thresholds():
        h = raw.ConditionalAccumulator(dtype=tfa.float16, shape=[size], reduction_type="SUM")
        values = [np.full(size, 40000, np.float16), np.full(size, -30000, np.float16)]
        values[0][3] = -40000
        for g in (values[0], values[0], values[1]):
            raw.AccumulatorApplyGradient(handle=h, local_step=0, gradient=g)
        taken = raw.AccumulatorTakeGradient(handle=h, num_required=3, dtype=tfa.float16)
    expected = simple_sum([values[0], values[0], values[1]])
    assert np.isinf(taken[0]) and np.isneginf(taken[3])
    np.testing.assert_array_equal(taken.view(np.uint16), expected.view(np.uint16))


FLOATS = [np.float16, ml_dtypes.bfloat16, np.float32, np.float64]


@settings(max_examples=150, deadline=None)
@given(
    dtype=st.sampled_from(FLOATS),
    size=st.sampled_from([1, 5, 6, 7, 13]),  # around the lowered parallel threshold
    count=st.one_of(
        st.integers(1, 70_000),
        st.integers(0, 62).map(lambda k: 2**k),  # powers of two
    ),
    seed=st.integers(0, 2**32 - 1),
    strided=st.booleans(),
)
def test_a_means_division_gives_numpys_bits(dtype, size, count, seed, strided) -> None:
    # any bits: NaNs with payloads, infinities, subnormals, zeros of both signs
    every = np.frombuffer(np.random.default_rng(seed).bytes(size * 16), dtype).copy()
    total = every[: 2 * size : 2] if strided else every[:size]
    with np.errstate(all="ignore"):
        divisor = np.asarray(count).astype(dtype)
        expected = np.divide(total, divisor)
    with small_thresholds():
        divided = division.divide_in_place(total, count)
    assert divided is total and divided.dtype == dtype
    np.testing.assert_array_equal(_bytes(divided), _bytes(expected))


def _bytes(array: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    return np.ascontiguousarray(array).view(np.uint8)


@pytest.mark.usefixtures("quiet_background")  # tracemalloc sees every thread
@pytest.mark.parametrize("dtype", [tfa.float16, tfa.bfloat16, tfa.float32])
def test_fast_applies_allocate_nothing_after_the_first(dtype: Any) -> None:
    size = 400_000  # a temporary the size of the result would be 800 kB
    gradient = np.ones(size, dtype.numpy_dtype)
    with small_thresholds(chunk=4096, narrow_min=1000):
        h = raw.ConditionalAccumulator(dtype=dtype, shape=[size], reduction_type="SUM")
        raw.AccumulatorApplyGradient(handle=h, local_step=0, gradient=gradient)
        tracemalloc.start()
        try:
            for _ in range(5):
                raw.AccumulatorApplyGradient(handle=h, local_step=0, gradient=gradient)
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.reset_peak()
            base = tracemalloc.get_traced_memory()[0]
            taken = raw.AccumulatorTakeGradient(handle=h, num_required=1, dtype=dtype)
            _, take_peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert peak < 16 * 1024, f"applies allocated up to {peak} bytes"
    # the take allocates the result (for the narrow types the float32 sum is the
    # buffer), and numpy casting buffers of fixed size
    assert take_peak - base < taken.nbytes + 160 * 1024
    assert taken[0] == 6 and taken.dtype == dtype.numpy_dtype


@pytest.mark.parametrize(
    "context_local",
    [
        pytest.param(
            True,
            id="context",
            marks=pytest.mark.skipif(
                not float_errors.CONTEXT_LOCAL_ERRORS,
                reason="numpy before 2.0 keeps float error state per thread, not per context",
            ),
        ),
        pytest.param(False, id="errstate"),
    ],
)
def test_quiet_errors_leave_the_callers_state(context_local: bool) -> None:
    """Both ways of silencing (a quiet context per thread on numpy >= 2, and
    ``np.errstate`` as on older numpy) give infinities and NaNs without a
    warning or an error, and leave the caller's error state as it was."""
    total = np.array([np.finfo(np.float32).max, 0.0], np.float32)
    with (
        mock.patch.object(float_errors, "CONTEXT_LOCAL_ERRORS", context_local),
        warnings.catch_warnings(),
    ):
        warnings.simplefilter("error")
        with np.errstate(all="raise"):
            float_errors.in_place_adder(total.dtype)(total, np.array([np.inf, 1.0], np.float32))
            running_sum.sum_adder(total.dtype)(total, np.array([-np.inf, 0.0], np.float32))
            float_errors.ignoring_float_errors(np.divide, total, np.float32(0), out=total)
            with float_errors.float_errors_ignored():
                np.divide(total, np.float32(0), out=total)
            assert np.geterr()["over"] == "raise"
    assert np.isnan(total[0]) and np.isinf(total[1])
    # and the error state is back as it was
    with pytest.raises(FloatingPointError), np.errstate(all="raise"):
        np.divide(np.ones(1), 0)


def test_quiet_errors_in_several_threads_at_once() -> None:
    """Each thread has its own quiet context: threads adding quietly at the
    same time neither fail nor change another thread's error state."""
    barrier = threading.Barrier(4, timeout=WAIT)
    failures: list[BaseException] = []

    def work() -> None:
        try:
            barrier.wait()
            big = np.full(8, np.finfo(np.float32).max, np.float32)
            with np.errstate(all="raise"):
                for _ in range(200):
                    float_errors.add_ignoring_float_errors(big, big)
                with pytest.raises(FloatingPointError):
                    np.add(np.full(1, 3e38, np.float32), np.float32(3e38))
            assert np.all(np.isinf(big))
        except BaseException as exc:  # reported below
            failures.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)
    assert not failures and not any(thread.is_alive() for thread in threads)


def test_no_private_numpy_names() -> None:
    """The package reaches numpy through its public names only."""
    package = Path(tfa.__file__).parent
    for path in package.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert "numpy._core" not in text and "_extobj" not in text, path


def test_a_slot_map_is_kept_between_rounds_and_cleared_before_its_entries_overflow(
    monkeypatch, row_adds: str
) -> None:
    """Each round's entries in the slot map lie above the last round's: rows of
    earlier rounds are not found in later ones, though the map is not cleared;
    once a round's entries could pass the largest allowed, the map is zeroed
    and starts again from 0."""
    # first dimension 16, 4 entries a round: round 3 (base 12) could reach 28
    monkeypatch.setattr(sparse_round, "MARK_LIMIT", 27)
    h = raw.SparseConditionalAccumulator(dtype=tfa.float64, shape=[16, 2], reduction_type="SUM")
    acc: Any = current_table().lookup(h)  # the in-process accumulator
    bases = []
    for round_number in range(6):
        # four rows, the first two the last round's too, where they are still
        # in the map: the second gradient must find them new to this round
        rows = [(round_number * 2 + r) % 16 for r in range(4)]
        for value, indices in ((1.0, rows[2:]), (2.0, rows)):
            raw.SparseAccumulatorApplyGradient(
                handle=h, local_step=2**40, gradient_indices=np.array(indices[::-1], np.int64),
                gradient_values=np.full((len(indices), 2), value), gradient_shape=[16, 2],
                has_known_shape=True,
            )  # fmt: skip
        state = acc._round
        assert state.places is not None
        assert state.base + 16 <= sparse_round.MARK_LIMIT  # every entry fits
        bases.append(state.base)
        marked = np.flatnonzero(state.places > state.base)
        assert marked.tolist() == sorted(rows)  # only this round's rows count as held
        taken = raw.SparseAccumulatorTakeGradient(handle=h, num_required=2, dtype=tfa.float64)
        expected = {rows[0]: 2.0, rows[1]: 2.0, rows[2]: 3.0, rows[3]: 3.0}
        assert taken.indices.tolist() == sorted(rows)
        np.testing.assert_array_equal(
            taken.values, np.array([[expected[i]] * 2 for i in sorted(rows)])
        )
    # 0, 4, 8; then 12 + 16 passes 27: cleared, 0 again
    assert bases == [0, 4, 8, 0, 4, 8]
    raw.DestroyResourceOp(resource=h)


def test_a_slot_map_made_again_midway_through_a_round_keeps_the_rounds_base(
    row_adds: str,
) -> None:
    """A round that inherited the last round's map (its base above 0) loses
    the map when a far row makes it too large for the row buffer, then makes
    it again from its index once the buffer has grown: the entries made again
    carry the round's base, so held rows are found held and no row is taken
    twice."""
    h = raw.SparseConditionalAccumulator(dtype=tfa.float64, shape=[64, 1], reduction_type="SUM")
    acc: Any = current_table().lookup(h)  # the in-process accumulator

    def apply(indices: list[int]) -> None:
        raw.SparseAccumulatorApplyGradient(
            handle=h, local_step=2**40, gradient_indices=np.array(indices, np.int64),
            gradient_values=np.ones((len(indices), 1)), gradient_shape=[64, 1],
            has_known_shape=True,
        )  # fmt: skip

    apply(list(range(10)))
    raw.SparseAccumulatorTakeGradient(handle=h, num_required=1, dtype=tfa.float64)
    apply([0])
    assert acc._round.base == 10 and acc._round.places is not None
    apply([60])
    assert acc._round.places is None  # dropped: larger than the row buffer
    apply(list(range(1, 41)))
    apply([0, 5])
    assert acc._round.places is not None and acc._round.base == 10  # made again
    taken = raw.SparseAccumulatorTakeGradient(handle=h, num_required=4, dtype=tfa.float64)
    raw.DestroyResourceOp(resource=h)
    assert taken.indices.tolist() == [*range(0, 41), 60]
    expected = np.ones((42, 1))
    expected[[0, 5]] = 2.0
    np.testing.assert_array_equal(taken.values, expected)


sparse_gradient = st.tuples(
    st.lists(st.integers(0, 11), max_size=9),  # indices: any order, duplicates
    st.integers(0, 2**31 - 1),  # seed for the values
    st.booleans(),  # values given as a strided view
)


@settings(max_examples=120, deadline=None)
@given(
    rounds=st.lists(
        st.tuples(st.lists(sparse_gradient, min_size=1, max_size=5), st.sampled_from([1, 3])),
        min_size=1,
        max_size=4,
    ),
    dtype=st.sampled_from([tfa.float32, tfa.int16, tfa.float16, tfa.complex64]),
    reduction=st.sampled_from(["MEAN", "SUM"]),
    growth=st.sampled_from([1.25, 1.0001]),
    map_min_fill=st.sampled_from([None, 0.0, 1.0, 1e9]),
    mark_limit=st.sampled_from([None, 12, 20]),
    path=st.sampled_from(SPARSE_PATHS),
)
def test_sparse_rounds_match_a_dense_reference(
    rounds, dtype, reduction, growth, map_min_fill, mark_limit, path
) -> None:
    """Several rounds on one accumulator (so buffers are recycled, grown and
    handed over), with row widths changing between rounds: each take equals the simple dense computation, whichever way
    rows are found (the sorted index searched, or, with the first dimension
    known, through a slot map from the start or from when the round
    has grown, its entries of earlier rounds left in it or, when the largest
    entry allowed is low, cleared), by numpy or by the compiled loops."""
    np_dtype = dtype.numpy_dtype
    with (
        small_thresholds(),
        mock.patch.object(sparse_round, "GROWTH", growth),
        sparse_row_loops(path),
    ):
        mock.patch.object(sparse_round, "MAP_MIN_FILL", map_min_fill or 1.0).start()
        if mark_limit is not None:
            mock.patch.object(sparse_round, "MARK_LIMIT", mark_limit).start()
        shape = None if map_min_fill is None else [12, None]
        try:
            h = raw.SparseConditionalAccumulator(dtype=dtype, shape=shape, reduction_type=reduction)
            for grads, width in rounds:
                total = np.zeros((12, width), np_dtype)
                counts = np.zeros(12, np.int64)
                applied = 0
                for indices, seed, strided in grads:
                    rng = np.random.default_rng(seed)
                    full = rng.integers(-20, 20, (len(indices), width * 2)).astype(np_dtype)
                    values = full[:, ::2] if strided else full[:, :width]
                    raw.SparseAccumulatorApplyGradient(
                        handle=h, local_step=2**40, gradient_indices=np.array(indices, np.int64),
                        gradient_values=values, gradient_shape=[], has_known_shape=False,
                    )  # fmt: skip
                    applied += 1
                    np.add.at(total, np.array(indices, np.intp), values)
                    counts[np.unique(np.array(indices, np.intp))] += 1
                got_indices, got_values, _ = raw.SparseAccumulatorTakeGradient(
                    handle=h, num_required=applied, dtype=dtype, timeout=WAIT
                )
                touched = np.flatnonzero(counts)
                expected = total[touched]
                if reduction == "MEAN":
                    divisor = counts[touched].reshape(-1, 1)
                    if np_dtype.kind in "iu":
                        expected = (np.sign(expected) * (np.abs(expected) // divisor)).astype(
                            np_dtype
                        )
                    else:
                        expected = (expected / divisor.astype(np_dtype)).astype(np_dtype)
                assert got_indices.tolist() == touched.tolist()
                assert got_values.dtype == np_dtype and got_values.shape == (touched.size, width)
                np.testing.assert_array_equal(got_values, expected)
        finally:
            mock.patch.stopall()
