"""The compiled scatter-add of the sparse accumulator
(tf_accum/accumulators/sparse_kernel.py) gives the bits of the numpy path it
replaces, and is optional.

The side-by-side tests run the same applies twice, with the compiled loops
and with numpy only, and compare the bits of the takes. They need numba (the
``fast`` extra) and skip without it; the fallback tests run either way.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Sequence
from typing import Any
from unittest import mock

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tf_accum as tfa
from tests import background
from tests.helpers import (
    WAIT,
    Background,
    BlockedCompile,
    Spy,
    assert_answers_while_compiling,
    fresh_kernels,
    in_forked_child,
    kernels_in_use,
    loaded_on_a_thread,
)
from tests.test_half_kernel import HAS_NUMBA, needs_numba
from tf_accum.accumulators import half_kernel, sparse_kernel, sparse_round
from tf_accum.resources import current_table

raw = tfa.raw_ops
Array = np.ndarray[Any, Any]


def compiled() -> sparse_kernel.Kernels:
    kernels = sparse_kernel.load()
    assert kernels is not None, "numba is installed but the loops did not compile"
    return kernels


def using(kernels: sparse_kernel.Kernels | None) -> Any:
    """Every sparse apply with ``kernels`` (None: numpy only, as without numba)."""
    return kernels_in_use(sparse_kernel, kernels)


# declared shape per way of finding rows (the width is appended): a slot map,
# the index searched (see apply_all), the index searched with no first dimension
LAYOUTS: dict[str, list[int | None]] = {
    "map": [64],
    "no map": [10**9],
    "first dimension unknown": [None],
}


def apply_all(
    layout: str,
    dtype: Any,
    reduction: str,
    width: tuple[int, ...],
    gradients: Sequence[tuple[list[int] | Array, Array]],
) -> Any:
    shape = [*LAYOUTS[layout], *width]
    known = layout != "first dimension unknown"
    h = raw.SparseConditionalAccumulator(dtype=dtype, shape=shape, reduction_type=reduction)
    # whether a round has a slot map depends on its rows (the map may take no
    # more memory than the row buffer): "map" allows one always, "no map" never
    fill = {"map": 0.0, "no map": math.inf}.get(layout, sparse_round.MAP_MIN_FILL)
    try:
        with mock.patch.object(sparse_round, "MAP_MIN_FILL", fill):
            for indices, values in gradients:
                raw.SparseAccumulatorApplyGradient(
                    handle=h,
                    local_step=0,
                    # arrays as they are (their layout is the test's)
                    gradient_indices=(
                        indices if isinstance(indices, np.ndarray) else np.array(indices, np.int64)
                    ),
                    gradient_values=values,
                    gradient_shape=shape if known else [],
                    has_known_shape=known,
                )
            return raw.SparseAccumulatorTakeGradient(
                handle=h, num_required=len(gradients), dtype=dtype
            )
    finally:
        raw.DestroyResourceOp(resource=h)


def bits(values: Array) -> Array:
    return values.view(np.uint32 if values.dtype == np.float32 else np.uint64)


DTYPES: dict[str, tuple[Any, Any]] = {
    "float32": (tfa.float32, np.float32),
    "float64": (tfa.float64, np.float64),
}


@st.composite
def rounds(draw: Any) -> tuple[tuple[int, ...], list[tuple[list[int], Array]], str]:
    width = draw(st.sampled_from([(), (0,), (1,), (3,), (2, 5), (17,)]))
    np_dtype = DTYPES[draw(st.sampled_from(sorted(DTYPES)))][1]
    pool = draw(st.sampled_from([4, 12, 64]))
    # finite, and small enough that normalize() summing up to 24 duplicates
    # stays finite (it warns on overflow); special values: see below
    bound = float(np_dtype(1e37 if np_dtype == np.float32 else 1e306))
    elements = st.floats(-bound, bound, width=32 if np_dtype == np.float32 else 64)
    gradients = []
    for _ in range(draw(st.integers(1, 6))):
        # duplicates and unsorted indices: summed by normalize() first
        indices = draw(st.lists(st.integers(0, pool - 1), min_size=0, max_size=24))
        values = np.array(
            draw(st.lists(elements, min_size=len(indices) * int(np.prod(width)),
                          max_size=len(indices) * int(np.prod(width)))),
            np_dtype,
        ).reshape((len(indices), *width))  # fmt: skip
        gradients.append((indices, values))
    return width, gradients, "float32" if np_dtype == np.float32 else "float64"


@needs_numba
@settings(max_examples=200, deadline=None)
@given(
    layout=st.sampled_from(sorted(LAYOUTS)),
    reduction=st.sampled_from(["MEAN", "SUM"]),
    case=rounds(),
)
def test_compiled_and_numpy_applies_give_the_same_bits(layout, reduction, case) -> None:
    width, gradients, kind = case
    dtype = DTYPES[kind][0]
    with using(compiled()):
        fast = apply_all(layout, dtype, reduction, width, gradients)
    with using(None):
        slow = apply_all(layout, dtype, reduction, width, gradients)
    np.testing.assert_array_equal(fast.indices, slow.indices)
    np.testing.assert_array_equal(fast.shape, slow.shape)
    assert fast.values.dtype == slow.values.dtype == DTYPES[kind][1]
    assert fast.values.shape == slow.values.shape
    np.testing.assert_array_equal(bits(fast.values), bits(slow.values))


@needs_numba
@pytest.mark.parametrize("kind", sorted(DTYPES))
def test_special_values_add_to_the_same_bits(kind: str) -> None:
    """Infinities, NaNs (with payloads), signed zeros, subnormals, overflow."""
    dtype, np_dtype = DTYPES[kind]
    special = np.concatenate((special_values(np_dtype), np.array([-np.nan, -1.0], np_dtype)))
    n = special.size
    held = special.repeat(n)  # every pair (held, added)
    added = np.tile(special, n)
    indices = list(range(n * n))
    for layout in ("map", "first dimension unknown"):
        results = []
        for kernels in (compiled(), None):
            with using(kernels), mock.patch.dict(LAYOUTS, {"map": [n * n]}):
                results.append(
                    apply_all(layout, dtype, "SUM", (), [(indices, held), (indices, added)])
                )
        fast, slow = results
        np.testing.assert_array_equal(bits(fast.values), bits(slow.values))
        # and what numpy's own add gives, NaNs as NaNs
        with np.errstate(over="ignore", invalid="ignore"):
            np.testing.assert_array_equal(fast.values, held + added)


@needs_numba
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize(
    "gradients",
    [
        # held rows only; mostly held (a new row among many held ones); a mix
        [[1, 2, 3, 4, 5], [5, 4, 3, 2, 1]],
        [[*range(9)], [*range(8), 63]],
        [[3, 9], [1, 3, 9, 12]],
    ],
)
def test_held_rows_take_the_loops(layout: str, gradients: list[list[int]]) -> None:
    spy = Spy(compiled())
    pairs = [(g, np.full((len(g), 4), float(n), np.float32)) for n, g in enumerate(gradients, 1)]
    with using(spy.kernels):
        fast = apply_all(layout, tfa.float32, "SUM", (4,), pairs)
    # without a slot map, numpy finds the rows and appends the new ones, and a
    # loop adds the held ones; with a map, one loop claims the rows, another
    # writes them all
    expected = ["claim_rows", "add_or_set_rows"] if layout == "map" else ["add_rows"]
    assert spy.calls == expected
    with using(None):
        slow = apply_all(layout, tfa.float32, "SUM", (4,), pairs)
    np.testing.assert_array_equal(bits(fast.values), bits(slow.values))


@needs_numba
@pytest.mark.parametrize(
    "dtype, np_dtype",
    [(tfa.float16, np.float16), (tfa.bfloat16, ml_dtypes.bfloat16), (tfa.int32, np.int32),
     (tfa.int64, np.int64), (tfa.complex64, np.complex64)],
)  # fmt: skip
def test_other_dtypes_stay_on_numpy(dtype: Any, np_dtype: Any) -> None:
    spy = Spy(compiled())
    gradients = [([1, 2], np.ones((2, 3), np_dtype)), ([2, 1], np.ones((2, 3), np_dtype))]
    with using(spy.kernels):
        taken = apply_all("map", dtype, "SUM", (3,), gradients)
    assert spy.calls == []
    assert taken.values.dtype == np_dtype
    np.testing.assert_array_equal(taken.values, np.full((2, 3), 2, np_dtype))


@needs_numba
@pytest.mark.parametrize("layout", ["strided", "transposed", "unaligned"])
def test_gradients_not_contiguous_and_aligned_stay_on_numpy(layout: str) -> None:
    spy = Spy(compiled())
    base = np.arange(12, dtype=np.float64).reshape(4, 3)
    values: Array
    if layout == "strided":
        values = np.repeat(base, 2, axis=1)[:, ::2]
    elif layout == "transposed":
        values = np.asfortranarray(base)
    else:
        values = np.frombuffer(bytes(1) + base.tobytes(), np.float64, 12, 1).reshape(4, 3)
    gradients = [([0, 1, 2, 3], base), ([0, 1, 2, 3], values)]
    with using(spy.kernels):
        taken = apply_all("map", tfa.float64, "SUM", (3,), gradients)
    assert spy.calls == []
    np.testing.assert_array_equal(taken.values, base * 2)


@needs_numba
@pytest.mark.parametrize("layout", ["map", "no map"])
def test_read_only_gradients_take_the_loops(layout: str) -> None:
    spy = Spy(compiled())
    base = np.arange(12, dtype=np.float32).reshape(4, 3)
    values = base.copy()
    values.flags.writeable = False
    indices = np.array([0, 1, 2, 3, 5], np.int64)
    indices.flags.writeable = False
    gradients: list[tuple[list[int] | Array, Array]] = [
        ([0, 1, 2, 3], base),
        (indices, np.concatenate((values, values[:1]))),
    ]
    with using(spy.kernels):
        taken = apply_all(layout, tfa.float32, "SUM", (3,), gradients)
    assert spy.calls == (["claim_rows", "add_or_set_rows"] if layout == "map" else ["add_rows"])
    assert taken.indices.tolist() == [0, 1, 2, 3, 5]
    np.testing.assert_array_equal(taken.values, np.concatenate((base * 2, base[:1])))


@needs_numba
@pytest.mark.parametrize("layout", ["strided", "unaligned"])
def test_indices_not_contiguous_and_aligned_are_not_claimed_by_the_loop(layout: str) -> None:
    """The claiming loop reads the gradient's index as a plain int64 array: any
    other layout finds its rows with numpy (the rows are still added by a loop)."""
    spy = Spy(compiled())
    wanted = np.array([1, 2, 4, 6], np.int64)
    if layout == "strided":
        indices = np.repeat(wanted, 2)[::2]
    else:
        indices = np.frombuffer(bytes(1) + wanted.tobytes(), np.int64, 4, 1)
    assert not (indices.flags.c_contiguous and indices.flags.aligned)
    ones = np.ones((4, 3), np.float32)
    with using(spy.kernels):
        taken = apply_all("map", tfa.float32, "SUM", (3,), [([1, 2], ones[:2]), (indices, ones)])
    assert "claim_rows" not in spy.calls and spy.calls
    assert taken.indices.tolist() == [1, 2, 4, 6]
    np.testing.assert_array_equal(taken.values, [[2] * 3, [2] * 3, [1] * 3, [1] * 3])


@needs_numba
@settings(max_examples=150, deadline=None)
@given(
    rows=st.integers(1, 3000),
    held_share=st.floats(0.0, 1.0),
    gradient_share=st.floats(0.0, 1.0),
    base=st.sampled_from([0, 5, 1000]),
    seed=st.integers(0, 2**32 - 1),
)
def test_the_claiming_loop_finds_slots_and_merges_the_index_as_numpy_does(
    rows: int, held_share: float, gradient_share: float, base: int, seed: int
) -> None:
    """claim_rows against the same steps in numpy, on rounds from empty to
    full and gradients from one row to every row (long runs of held rows
    between new ones, and none), with entries of an earlier round (``base``
    or less) left in the map."""
    rng = np.random.default_rng(seed)
    held = np.sort(rng.choice(rows, int(rows * held_share), replace=False))
    index = np.sort(rng.choice(rows, max(1, int(rows * gradient_share)), replace=False))
    slots_of_held = rng.permutation(held.size).astype(np.int64)
    places = rng.integers(0, base + 1, rows).astype(np.int32)  # stale: base or less
    places[held] = slots_of_held + base + 1
    used = held.size + 3
    k = index.size
    slots, fresh = np.empty(k, np.int64), np.empty(k, bool)
    new_index = np.empty(k, np.int64)
    merged_index = np.empty(held.size + k, np.int64)
    merged_slot = np.empty(held.size + k, np.int64)
    before = places.copy()
    added = compiled().claim_rows(
        places, base, index, used, held, slots_of_held,
        slots, fresh, new_index, merged_index, merged_slot,
    )  # fmt: skip
    expected_fresh = ~np.isin(index, held)
    assert added == np.count_nonzero(expected_fresh)
    np.testing.assert_array_equal(fresh, expected_fresh)
    expected_slots = places[index].astype(np.int64) - base - 1
    expected_slots[expected_fresh] = used + np.arange(added)
    np.testing.assert_array_equal(slots, expected_slots)
    np.testing.assert_array_equal(new_index[:added], index[expected_fresh])
    if added:
        all_index = np.concatenate((held, index[expected_fresh]))
        all_slots = np.concatenate((slots_of_held, expected_slots[expected_fresh]))
        order = np.argsort(all_index)
        np.testing.assert_array_equal(merged_index[: held.size + added], all_index[order])
        np.testing.assert_array_equal(merged_slot[: held.size + added], all_slots[order])
    np.testing.assert_array_equal(places, before)  # read only


@needs_numba
@pytest.mark.parametrize(
    "position, bad, message",
    [
        (0, -1, "which is negative"),
        (-1, 10**6 + 5, "exceeded limits of shape"),
        (-1, 5000, "changed while it was being applied"),  # in range, past the map
    ],
)
def test_an_index_changed_after_its_range_check_is_refused_and_changes_nothing(
    position: int, bad: int, message: str
) -> None:
    """The claiming loop reads the caller's own index array (no copy), after
    the range check and outside the GIL, and numba checks no bounds: an index
    another thread changed in between must not reach the slot map."""
    shape = [10**6, 3]
    h = raw.SparseConditionalAccumulator(dtype=tfa.float32, shape=shape, reduction_type="SUM")
    ones = np.ones((3, 3), np.float32)

    def apply(indices: Array) -> None:
        raw.SparseAccumulatorApplyGradient(
            handle=h, local_step=0, gradient_indices=indices, gradient_values=ones,
            gradient_shape=shape, has_known_shape=True,
        )  # fmt: skip

    changing = np.array([2, 5, 9], np.int64)
    cover = sparse_round.RowIndex.map_covering

    def changed_meanwhile(self: Any, state: Any, top: int) -> None:
        cover(self, state, top)  # the map now covers the gradient's rows
        changing[position] = bad  # as another thread might, just before the claim

    spy = Spy(compiled())
    with using(spy.kernels), mock.patch.object(sparse_round, "MAP_MIN_FILL", 0.0):
        apply(np.array([1, 2, 3], np.int64))
        state = current_table().lookup(h)._round  # type: ignore[attr-defined]
        places_before = state.places.copy()
        with (
            mock.patch.object(sparse_round.RowIndex, "map_covering", changed_meanwhile),
            pytest.raises(tfa.errors.InvalidArgumentError, match=message),
        ):
            apply(changing)
        assert spy.calls == ["claim_rows"]  # refused by the loop, before any write
        # the map may have been enlarged before the claim, with the same entries
        assert state.places[: places_before.shape[0]].tolist() == places_before.tolist()
        assert not state.places[places_before.shape[0] :].any()
        assert tfa.accumulator_stats(h)["num_accumulated"] == 1
        apply(np.array([2, 5, 9], np.int64))
        taken = raw.SparseAccumulatorTakeGradient(handle=h, num_required=2, dtype=tfa.float32)
    raw.DestroyResourceOp(resource=h)
    assert taken.indices.tolist() == [1, 2, 3, 5, 9]
    np.testing.assert_array_equal(taken.values[:, 0], [1, 2, 1, 1, 1])


# --- a MEAN take: the dividing gather ---------------------------------------------


def special_values(np_dtype: Any) -> Array:
    info = np.finfo(np_dtype)
    uint = np.uint32 if np_dtype == np.float32 else np.uint64
    nan_payload = (np.array([np.nan], np_dtype).view(uint) | uint(5)).view(np_dtype)[0]
    return np.array(
        [0.0, -0.0, np.inf, -np.inf, np.nan, nan_payload, info.max, -info.max,
         info.tiny, info.smallest_subnormal, -info.smallest_subnormal, 1.0, -3.0, 0.1],
        np_dtype,
    )  # fmt: skip


# rows 0-7 once, twice or three times, arriving out of index order
ROUND_OF_THREE = [[4, 5, 6, 7], [0, 5, 6, 2], [6, 1, 5, 3, 7]]


@needs_numba
@pytest.mark.parametrize("kind", sorted(DTYPES))
@pytest.mark.parametrize("width", [(14,), (2, 7)])
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_a_mean_take_divides_its_rows_as_it_gathers_them(
    kind: str, width: tuple[int, ...], layout: str
) -> None:
    """Rows out of index order, counted once, twice and three times, holding
    infinities, NaNs with payloads, signed zeros, subnormals and the largest
    values: the compiled gather gives the bits of numpy's path, and each row is
    its sum divided by its count in the rows' dtype."""
    dtype, np_dtype = DTYPES[kind]
    special = special_values(np_dtype).reshape(width)
    with np.errstate(over="ignore"):  # the largest values, doubled
        gradients = [
            (indices, np.stack([special * np_dtype(n + k + 1) for k in range(len(indices))]))
            for n, indices in enumerate(ROUND_OF_THREE)
        ]
    spy = Spy(compiled())
    with using(spy.kernels):
        fast = apply_all(layout, dtype, "MEAN", width, gradients)
    assert spy.calls.count("gather_rows_dividing") == 1
    with using(None):
        slow = apply_all(layout, dtype, "MEAN", width, gradients)
    assert fast.indices.tolist() == slow.indices.tolist() == list(range(8))
    assert fast.values.dtype == np_dtype and fast.values.shape == (8, *width)
    np.testing.assert_array_equal(bits(fast.values), bits(slow.values))
    # each row: its values summed in arrival order, divided by the count
    with np.errstate(all="ignore"):
        for row in range(8):
            parts = [v[list(i).index(row)] for i, v in gradients if row in i]
            total = parts[0].copy()
            for part in parts[1:]:
                total = total + part
            expected = total / np_dtype(len(parts)) if len(parts) > 1 else total
            np.testing.assert_array_equal(fast.values[row], expected)
            if len(parts) == 1:  # copied as they are: NaN payloads too
                np.testing.assert_array_equal(bits(fast.values[row]), bits(expected))


@needs_numba
def test_a_sum_take_and_rows_in_order_do_not_use_the_dividing_gather() -> None:
    spy = Spy(compiled())
    ones = np.ones((2, 3), np.float32)
    with using(spy.kernels):
        apply_all("map", tfa.float32, "SUM", (3,), [([4, 5], ones), ([1, 5], ones)])
        # in index order: copied (or handed over), no gather
        apply_all("map", tfa.float32, "MEAN", (3,), [([1, 5], ones), ([5, 9], ones)])
    assert "gather_rows_dividing" not in spy.calls


# --- optional, lazy, loaded before the lock ------------------------------------


def two_applies(size: int, rows: int = 4) -> None:
    """Two applies of ``rows`` rows of ``size // rows`` float32 onto the same rows."""
    width = size // rows
    gradients = [(list(range(rows)), np.ones((rows, width), np.float32))] * 2
    taken = apply_all("map", tfa.float32, "MEAN", (width,), gradients)
    np.testing.assert_array_equal(taken.values, np.ones((rows, width), np.float32))


@needs_numba
def test_only_a_large_gradient_loads_the_loops() -> None:
    kernels = compiled()
    compile_ = mock.Mock(return_value=kernels)
    with (
        fresh_kernels(sparse_kernel),
        mock.patch.object(sparse_kernel, "MIN_ELEMENTS", 40),
        mock.patch.object(sparse_kernel, "_compile", compile_),
    ):
        two_applies(36)
        assert compile_.call_count == 0 and sparse_kernel.loaded() is None
        two_applies(40)
        assert sparse_kernel.loaded() is kernels
        two_applies(8)
    assert compile_.call_count == 1


@pytest.mark.parametrize("failure", ["numba missing", "compiler error"])
def test_without_the_loops_numpy_does_the_adds(failure: str) -> None:
    failing = mock.Mock(side_effect=RuntimeError("no compiler"))
    patch = (
        mock.patch.dict(sys.modules, {"numba": None})  # import fails
        if failure == "numba missing"
        else mock.patch.object(sparse_kernel, "_compile", failing)
    )
    with fresh_kernels(sparse_kernel), patch, mock.patch.object(sparse_kernel, "MIN_ELEMENTS", 8):
        two_applies(8)
        two_applies(8)
        assert sparse_kernel.LOADER.tried and sparse_kernel.loaded() is None
    assert failing.call_count == (1 if failure == "compiler error" else 0)


_NUMBA_IMPORT_CODE = (
    "import sys, numpy as np, tf_accum as tfa\n"
    "from tf_accum.accumulators import sparse_kernel\n"
    "raw = tfa.raw_ops\n"
    "def round_of(size):\n"
    "    h = raw.SparseConditionalAccumulator(dtype=tfa.float32, shape=[4, size // 4])\n"
    "    for _ in range(2):\n"
    "        raw.SparseAccumulatorApplyGradient(handle=h, local_step=0,\n"
    "            gradient_indices=np.arange(4), gradient_values=np.ones((4, size // 4),\n"
    "            np.float32), gradient_shape=[4, size // 4], has_known_shape=True)\n"
    "    taken = raw.SparseAccumulatorTakeGradient(handle=h, num_required=2,\n"
    "                                              dtype=tfa.float32)\n"
    "    assert bool((taken.values == 1).all())\n"
    "round_of(sparse_kernel.MIN_ELEMENTS - 4)\n"
    "assert 'numba' not in sys.modules\n"
    "round_of(sparse_kernel.MIN_ELEMENTS)\n"
    "print('numba' in sys.modules, sparse_kernel.loaded() is not None)\n"
)
# run beside the other tests (tests/background.py)
_NUMBA_IMPORT_JOB = background.define(
    "sparse kernel: numba imported only by a large gradient",
    [sys.executable, "-c", _NUMBA_IMPORT_CODE],
    timeout=120,
)


@pytest.mark.background(_NUMBA_IMPORT_JOB)
def test_numba_is_imported_only_by_a_large_sparse_gradient() -> None:
    done = background.result(_NUMBA_IMPORT_JOB)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(HAS_NUMBA)] * 2


def test_the_accumulator_answers_while_its_first_large_sparse_gradient_compiles() -> None:
    shape = [4, sparse_kernel.MIN_ELEMENTS // 4]
    h = raw.SparseConditionalAccumulator(dtype=tfa.float32, shape=shape)
    values = np.ones(shape, np.float32)
    assert_answers_while_compiling(
        sparse_kernel,
        lambda: raw.SparseAccumulatorApplyGradient(
            handle=h,
            local_step=0,
            gradient_indices=np.arange(4),
            gradient_values=values,
            gradient_shape=shape,
            has_known_shape=True,
        ),  # fmt: skip
        lambda: raw.AccumulatorNumAccumulated(handle=h),
    )
    taken = raw.SparseAccumulatorTakeGradient(handle=h, num_required=1, dtype=tfa.float32)
    np.testing.assert_array_equal(taken.values, values)
    raw.DestroyResourceOp(resource=h)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.filterwarnings("ignore:.*fork.*:DeprecationWarning")
def test_a_child_forked_while_the_other_loops_compile_uses_numpy() -> None:
    """A child forked while half_kernel compiles does not compile the sparse
    loops either: numba's compiler lock, held by the compiling thread (not in
    the child), stays held there, and compiling would wait forever."""
    blocked = BlockedCompile()

    with (
        fresh_kernels(half_kernel, blocked),
        fresh_kernels(sparse_kernel, mock.Mock(return_value="compiled")),
    ):
        first = Background(half_kernel.load)
        try:
            assert blocked.compiling.wait(WAIT)
            assert in_forked_child(lambda: loaded_on_a_thread(sparse_kernel.load)) == "None"
        finally:
            blocked.finish.set()
            first.result(WAIT)
        assert not sparse_kernel.LOADER.tried  # the parent's loader is untouched
