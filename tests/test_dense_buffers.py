"""The dense accumulator's buffers: small sums added aside and buffers reused across rounds.

A small sum is added into a second buffer the round then switches to (see
dense.ASIDE_MAX_BYTES); a round's buffer from RECYCLE_MIN_BYTES up is the
buffer of an earlier round whose taker let it go. Neither may change a single
bit of any result, nor touch an array a taker still holds.
"""

from __future__ import annotations

import gc
import threading
import weakref
from collections.abc import Iterator
from typing import Any
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tf_accum as tfa
from tests.helpers import WAIT
from tf_accum.accumulators import dense, division
from tf_accum.dtypes import ACCUMULATOR_DTYPES
from tf_accum.resources import current_table

raw = tfa.raw_ops
SIZE = 64  # elements of the recycled buffers below (the threshold is lowered)


def _bits(dtype: np.dtype[Any], count: int, seed: int) -> list[np.ndarray[Any, Any]]:
    """``count`` one-element gradients of any bit pattern (NaNs, infinities, extremes)."""
    rng = np.random.default_rng(seed)
    raw_bytes = rng.integers(0, 256, (count, dtype.itemsize), dtype=np.uint8)
    return [row.view(dtype).copy() for row in raw_bytes]


def _mean(total: np.ndarray[Any, Any], count: int) -> np.ndarray[Any, Any]:
    return division.divide_in_place(total.copy(), count)


@settings(max_examples=150, deadline=None)
@given(
    dtype=st.sampled_from(ACCUMULATOR_DTYPES),
    shape=st.sampled_from([(), (1,), (1, 1), (1, 1, 1)]),
    count=st.integers(1, 5),
    seed=st.integers(0, 2**32 - 1),
    reduction=st.sampled_from(["MEAN", "SUM"]),
)
def test_one_element_sums_keep_every_bit(dtype, shape, count, seed, reduction) -> None:
    np_dtype = dtype.numpy_dtype
    gradients = [g.reshape(shape) for g in _bits(np_dtype, count, seed)]
    h = raw.ResourceConditionalAccumulator(dtype=dtype, shape=list(shape), reduction_type=reduction)
    for gradient in gradients:
        raw.ResourceAccumulatorApplyGradient(handle=h, local_step=0, gradient=gradient)
    taken = raw.ResourceAccumulatorTakeGradient(handle=h, num_required=count, dtype=dtype)
    raw.DestroyResourceOp(resource=h)
    expected = np.array(gradients[0], copy=True)  # the simple path: one numpy add each
    with np.errstate(all="ignore"):
        for gradient in gradients[1:]:
            np.add(expected, gradient, out=expected)
    if reduction == "MEAN":
        expected = _mean(expected, count)
    assert taken.dtype == np_dtype and taken.shape == shape and taken.nbytes == np_dtype.itemsize
    np.testing.assert_array_equal(
        taken.reshape(-1).view(np.uint8), expected.reshape(-1).view(np.uint8)
    )


@pytest.fixture
def small_recycling() -> Iterator[None]:
    with mock.patch.object(dense, "RECYCLE_MIN_BYTES", 16):
        yield


def _accumulator(shape: list[int | None] | None = None, reduction: str = "MEAN") -> int:
    handle: int = raw.ResourceConditionalAccumulator(
        dtype=tfa.float32, shape=[SIZE] if shape is None else shape, reduction_type=reduction
    )
    return handle


def _round(h: int, values: list[float], size: int = SIZE) -> np.ndarray[Any, Any]:
    for value in values:
        gradient = np.full(size, value, np.float32)
        raw.ResourceAccumulatorApplyGradient(handle=h, local_step=2**40, gradient=gradient)
    taken: np.ndarray[Any, Any] = raw.ResourceAccumulatorTakeGradient(
        handle=h, num_required=len(values), dtype=tfa.float32
    )
    return taken


def _address(array: np.ndarray[Any, Any]) -> int:
    address: int = array.__array_interface__["data"][0]
    return address


def test_a_dropped_result_becomes_the_next_rounds_buffer(small_recycling: None) -> None:
    h = _accumulator()
    first = _round(h, [1.0, 3.0])
    np.testing.assert_array_equal(first, np.full(SIZE, 2.0, np.float32))
    address = _address(first)
    del first
    second = _round(h, [5.0, 7.0, 9.0])
    assert _address(second) == address  # warm memory, no new buffer
    np.testing.assert_array_equal(second, np.full(SIZE, 7.0, np.float32))
    assert second.flags.owndata and second.flags.writeable and second.dtype == np.float32
    raw.DestroyResourceOp(resource=h)


@pytest.mark.parametrize("keep", ["array", "view", "weakref", "read-only", "reshaped"])
def test_a_result_still_held_is_never_written(small_recycling: None, keep: str) -> None:
    h = _accumulator([None])
    first = _round(h, [2.0])
    held: Any
    if keep == "array":
        held = first
    elif keep == "view":
        held = first[3:10]
    elif keep == "weakref":
        held = weakref.ref(first)
    elif keep == "read-only":
        first.flags.writeable = False
    else:
        first.shape = (SIZE // 2, 2)  # no longer the round's shape
    address = _address(first)
    del first
    for value in (4.0, 6.0, 8.0):
        taken = _round(h, [value, value])
        np.testing.assert_array_equal(taken, np.full(SIZE, value, np.float32))
        if keep in ("array", "view"):
            assert _address(taken) != address
    if keep == "weakref":
        assert held() is None  # let go, as any dropped array, never reused
    elif keep in ("array", "view"):
        np.testing.assert_array_equal(held, np.full(held.shape, 2.0, np.float32))
    raw.DestroyResourceOp(resource=h)


def test_rounds_of_other_shapes_get_their_own_buffers(small_recycling: None) -> None:
    h = _accumulator([None])
    for size, value in [(SIZE, 1.0), (SIZE + 8, 2.0), (SIZE, 3.0), (8, 4.0), (SIZE + 8, 5.0)]:
        taken = _round(h, [value, value + 2], size)
        np.testing.assert_array_equal(taken, np.full(size, value + 1, np.float32))
    raw.DestroyResourceOp(resource=h)


def test_a_failed_take_puts_the_recycled_buffer_back(small_recycling: None) -> None:
    h = _accumulator()
    _round(h, [1.0])  # dropped: recycled by the next round
    gradient = np.full(SIZE, 3.0, np.float32)
    raw.ResourceAccumulatorApplyGradient(handle=h, local_step=2**40, gradient=gradient)
    with (
        mock.patch.object(dense, "divide_in_place", side_effect=RuntimeError("boom")),
        pytest.raises(RuntimeError, match="boom"),
    ):
        raw.ResourceAccumulatorTakeGradient(handle=h, num_required=1, dtype=tfa.float32)
    acc = current_table().lookup(h)
    assert acc.num_accumulated() == 1  # the round is back, with its sum
    raw.ResourceAccumulatorApplyGradient(handle=h, local_step=2**40, gradient=gradient * 3)
    taken = raw.ResourceAccumulatorTakeGradient(handle=h, num_required=2, dtype=tfa.float32)
    np.testing.assert_array_equal(taken, np.full(SIZE, 6.0, np.float32))
    del taken
    np.testing.assert_array_equal(_round(h, [2.0, 4.0]), np.full(SIZE, 3.0, np.float32))
    raw.DestroyResourceOp(resource=h)


def test_memory_kept_between_rounds_is_at_most_one_dropped_buffer(small_recycling: None) -> None:
    h = _accumulator()
    acc = current_table().lookup(h)
    results = [_round(h, [1.0]) for _ in range(4)]  # all held: nothing to reuse
    assert [id(a) for a in acc._watched] == [id(a) for a in results[-2:]]  # type: ignore[attr-defined]
    address = _address(results[-2])
    results.clear()  # the taker drops them all: two idle buffers until the next round
    raw.ResourceAccumulatorApplyGradient(
        handle=h, local_step=2**40, gradient=np.ones(SIZE, np.float32)
    )
    # the round took the older one and let the other go
    assert acc._watched == []  # type: ignore[attr-defined]
    taken = raw.ResourceAccumulatorTakeGradient(handle=h, num_required=1, dtype=tfa.float32)
    assert _address(taken) == address
    assert len(acc._watched) == 1  # type: ignore[attr-defined]
    raw.DestroyResourceOp(resource=h)
    assert acc._watched == []  # type: ignore[attr-defined]


def test_threads_never_see_a_held_result_change(small_recycling: None) -> None:
    """Appliers add ones while a taker takes MEAN rounds, holding every third
    result and dropping the rest: every held result stays all ones."""
    h = _accumulator()
    ones = np.ones(SIZE, np.float32)
    stop = threading.Event()
    errors: list[BaseException] = []
    held: list[np.ndarray[Any, Any]] = []

    def apply() -> None:
        try:
            while not stop.is_set():
                raw.ResourceAccumulatorApplyGradient(handle=h, local_step=2**40, gradient=ones)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    appliers = [threading.Thread(target=apply) for _ in range(2)]
    for t in appliers:
        t.start()
    try:
        for i in range(300):
            taken = raw.ResourceAccumulatorTakeGradient(
                handle=h, num_required=3, dtype=tfa.float32, timeout=WAIT
            )
            if i % 3 == 0:
                held.append(taken)
            else:
                np.testing.assert_array_equal(taken, ones)
            del taken
            if i % 50 == 0:
                gc.collect()
    finally:
        stop.set()
        for t in appliers:
            t.join(WAIT)
    assert not errors
    for array in held:
        np.testing.assert_array_equal(array, ones)
    raw.DestroyResourceOp(resource=h)


@pytest.mark.parametrize("kind", ["array.array", "memoryview"])
def test_a_gradient_in_the_callers_own_buffer_is_never_written(
    small_recycling: None, kind: str
) -> None:
    """The compat class reads buffer objects without a copy: they stay the
    caller's, in the round that added them and in every later round."""
    import array

    import tf_accum.compat.v1 as tf

    ones = np.ones(SIZE, np.float32)
    mine: Any
    if kind == "array.array":
        mine = array.array("f", ones.tobytes())
    else:  # the user's bytearray, as a typed view
        mine = memoryview(bytearray(ones.tobytes())).cast("f")
    acc = tf.ConditionalAccumulator(tf.float32, shape=[SIZE])
    acc.apply_grad(mine, local_step=0)
    acc.apply_grad(np.full(SIZE, 3.0, np.float32), local_step=0)  # added in the same round
    np.testing.assert_array_equal(acc.take_grad(2), np.full(SIZE, 2.0, np.float32))
    acc.apply_grad(mine, local_step=1)  # a round of one gradient, its result dropped
    acc.take_grad(1)
    for step in (2, 3):
        acc.apply_grad(np.full(SIZE, 7.0, np.float32), local_step=step)
        acc.apply_grad(np.full(SIZE, 7.0, np.float32), local_step=step)
        np.testing.assert_array_equal(acc.take_grad(2), np.full(SIZE, 7.0, np.float32))
    assert list(memoryview(mine).cast("B").cast("f")) == [1.0] * SIZE
    sparse = tf.SparseConditionalAccumulator(tf.float32, shape=[SIZE, 1])
    rows = memoryview(bytearray(np.ones((3, 1), np.float32).tobytes())).cast("f", (3, 1))
    sparse.apply_grad(grad_indices=[0, 1, 2], grad_values=rows, local_step=0)
    sparse.apply_grad(
        grad_indices=[0, 1, 2], grad_values=np.full((3, 1), 5.0, np.float32), local_step=0
    )
    assert np.asarray(rows).tolist() == [[1.0], [1.0], [1.0]]
    acc.close()
    sparse.close()


def test_dropped_results_are_let_go_when_the_next_round_cannot_use_them(
    small_recycling: None,
) -> None:
    """Rounds that start without a copy into a dropped buffer (a small
    gradient; a converted one, which is kept as it is) keep no earlier round's
    buffer alive."""
    import tf_accum.compat.v1 as tf

    h = _accumulator([None])
    acc = current_table().lookup(h)
    results = [_round(h, [1.0]) for _ in range(2)]
    results.clear()  # both dropped: idle until the next round starts
    assert len(acc._watched) == 2  # type: ignore[attr-defined]
    small = np.ones(2, np.float32)
    raw.ResourceAccumulatorApplyGradient(handle=h, local_step=2**40, gradient=small)
    assert acc._watched == []  # type: ignore[attr-defined]
    raw.DestroyResourceOp(resource=h)

    compat = tf.ConditionalAccumulator(tf.float32, shape=[SIZE])
    kept = current_table().lookup(compat.accumulator_ref)
    for step in range(2):
        compat.apply_grad(np.ones(SIZE, np.float32), local_step=step)  # copied: recyclable
        results.append(compat.take_grad(1))
    results.clear()
    assert len(kept._watched) == 2  # type: ignore[attr-defined]
    compat.apply_grad(np.ones(SIZE), local_step=2)  # float64: converted, kept as it is
    assert kept._watched == []  # type: ignore[attr-defined]
    compat.close()


def test_a_one_element_result_is_an_array_of_its_own() -> None:
    h = _accumulator([1])
    taken = _round(h, [2.0, 4.0], size=1)
    assert taken.flags.owndata and taken.base is None
    taken.resize((3,), refcheck=False)  # as for any array of its own
    np.testing.assert_array_equal(taken, [3.0, 0.0, 0.0])
    raw.DestroyResourceOp(resource=h)


def test_without_reliable_reference_counts_a_result_is_never_reused(
    small_recycling: None,
) -> None:
    """Where reference counts cannot tell that a taker dropped its result
    (free-threaded CPython, PyPy), a taken buffer stays the taker's: the
    accumulator keeps no reference to it, and every round gets its own."""
    h = _accumulator()
    acc: Any = current_table().lookup(h)
    with mock.patch.object(dense, "RECYCLING", False):
        first = _round(h, [1.0])
        watcher = weakref.ref(first)
        assert acc._watched == []
        del first
        gc.collect()
        assert watcher() is None  # the accumulator held no reference to it
        second = _round(h, [2.0, 4.0])
        assert acc._watched == []
        assert second.flags.owndata and np.all(second == 3.0)


def _pattern(name: str, np_dtype: np.dtype[Any], size: int, step: int) -> np.ndarray[Any, Any]:
    """The ``step``-th gradient of a pattern that steers a large add: in place
    where the first element changes, or a sampled one, else made aside."""
    gradient = np.ones(size, np_dtype)
    if name == "nan first":  # the sum's first element is NaN: passed over
        gradient[0] = np.nan if step == 0 else 1
    elif name == "absorbed":  # too small to change a sum of 1e8 (float32)
        gradient[:] = 1e8 if step == 0 else 1
    elif name == "zeros in front":
        gradient[:100] = 0
    elif name == "signed zeros":  # -0.0 + 0.0 is 0.0: no element changes for sure
        gradient[:] = -0.0 if step == 0 else 0.0
    elif name == "zero but one":
        gradient[:] = 0
        gradient[size // 3] = 3
    return gradient


_PATTERNS = ["ones", "nan first", "absorbed", "zeros in front", "signed zeros", "zero but one"]


@pytest.mark.parametrize(
    ("dtype", "name"),
    [(d, n) for d in (tfa.float32, tfa.float64, tfa.complex64) for n in _PATTERNS]
    + [(tfa.int32, n) for n in ("ones", "absorbed", "zeros in front", "zero but one")],
)
def test_large_sums_keep_every_bit_however_they_are_added(dtype: Any, name: str) -> None:
    np_dtype = dtype.numpy_dtype
    size = 2 * dense.ASIDE_MAX_BYTES // np_dtype.itemsize  # added in place when it can
    gradients = [_pattern(name, np_dtype, size, step) for step in range(4)]
    h = raw.ResourceConditionalAccumulator(dtype=dtype, shape=[size], reduction_type="SUM")
    for gradient in gradients:
        raw.ResourceAccumulatorApplyGradient(handle=h, local_step=0, gradient=gradient)
    taken = raw.ResourceAccumulatorTakeGradient(handle=h, num_required=4, dtype=dtype)
    raw.DestroyResourceOp(resource=h)
    expected = gradients[0].copy()
    with np.errstate(all="ignore"):
        for gradient in gradients[1:]:
            np.add(expected, gradient, out=expected)
    assert taken.dtype == np_dtype
    np.testing.assert_array_equal(taken.view(np.uint8), expected.view(np.uint8))


def test_rounds_of_other_shapes_each_add_into_a_buffer_of_their_own() -> None:
    """No declared shape: each round's shape is its first gradient's, and a
    small round's adds (made aside) never land in a buffer of an earlier round,
    nor in a result a taker holds."""
    h = _accumulator([None], reduction="SUM")
    results = []
    for size in (3, 5, 5, 3, 1, 1, 7):
        for step in range(3):
            gradient = np.arange(size, dtype=np.float32) + step
            raw.ResourceAccumulatorApplyGradient(handle=h, local_step=2**40, gradient=gradient)
        taken = raw.ResourceAccumulatorTakeGradient(handle=h, num_required=3, dtype=tfa.float32)
        results.append(taken)
    for taken in results:
        np.testing.assert_array_equal(taken, 3 * np.arange(taken.size, dtype=np.float32) + 3)
    raw.DestroyResourceOp(resource=h)
