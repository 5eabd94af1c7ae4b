"""Contracts at the edges (issue 9, items 2, 3, 8, 10, 11): what is refused at
creation, argument types, timeouts, counter limits, and error classes."""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Iterator
from typing import Any
from unittest import mock

import numpy as np
import pytest

import tf_accum as tfa
from tests.helpers import Background, Spy, kernels_in_use, wait_for_waiting
from tests.test_half_kernel import needs_numba
from tf_accum import errors
from tf_accum.accumulators import sparse, sparse_kernel, sparse_round
from tf_accum.resources import current_table

# the modules of a sparse round, whose numpy calls the tests below make fail
SPARSE_MODULES = (sparse, sparse_round)

raw = tfa.raw_ops
compat = tfa.compat.v1
F32 = tfa.float32
CONSTRUCTORS = [
    raw.ConditionalAccumulator,
    raw.ResourceConditionalAccumulator,
    raw.SparseConditionalAccumulator,
]


# --- item 2: what cannot work is refused at creation -----------------------------


@pytest.mark.parametrize("constructor", CONSTRUCTORS)
def test_a_dimension_of_2_63_or_more_is_refused_at_creation(constructor: Any) -> None:
    before = current_table().live_handles()
    with pytest.raises(OverflowError, match="at most 2\\*\\*63 - 1"):
        constructor(dtype=F32, shape=[2**63, 2])
    if constructor is not raw.SparseConditionalAccumulator:
        with pytest.raises(errors.InvalidArgumentError, match="is too large"):
            constructor(dtype=F32, shape=[2**62, 2**62])
    assert current_table().live_handles() == before
    h = constructor(dtype=F32, shape=[2**63 - 1])  # the largest dimension there is
    raw.DestroyResourceOp(resource=h)


@pytest.mark.parametrize(
    "cls", [compat.ConditionalAccumulator, compat.SparseConditionalAccumulator]
)
def test_compat_classes_refuse_out_of_range_dimensions_as_tensor_shape_does(cls: Any) -> None:
    with pytest.raises(TypeError, match="Value out of range: 9223372036854775808"):
        cls(F32, shape=[2**63])


def test_the_largest_sparse_dimension_takes_work() -> None:
    h = raw.SparseConditionalAccumulator(dtype=F32, shape=[2**63 - 1, 2])
    raw.SparseAccumulatorApplyGradient(
        handle=h,
        local_step=0,
        gradient_indices=[2**63 - 2],
        gradient_values=np.ones((1, 2), np.float32),
        gradient_shape=[],
        has_known_shape=False,
    )
    indices, values, shape = raw.SparseAccumulatorTakeGradient(handle=h, num_required=1, dtype=F32)
    assert indices.tolist() == [2**63 - 2] and shape.tolist() == [2**63 - 1, 2]
    raw.DestroyResourceOp(resource=h)


@pytest.mark.parametrize("kind", ["dense", "sparse"])
def test_a_take_whose_result_fails_leaves_its_round(kind: str, monkeypatch: Any) -> None:
    if kind == "dense":
        h = raw.ResourceConditionalAccumulator(dtype=F32, shape=[2], reduction_type="SUM")
        raw.ResourceAccumulatorApplyGradient(handle=h, local_step=0, gradient=[1.0, 2.0])

        def take() -> Any:
            return raw.ResourceAccumulatorTakeGradient(handle=h, num_required=1, dtype=F32)
    else:
        h = raw.SparseConditionalAccumulator(dtype=F32, shape=[4, 2], reduction_type="SUM")
        raw.SparseAccumulatorApplyGradient(
            handle=h,
            local_step=0,
            gradient_indices=[1],
            gradient_values=np.ones((1, 2), np.float32),
            gradient_shape=[],
            has_known_shape=False,
        )

        def take() -> Any:
            return raw.SparseAccumulatorTakeGradient(handle=h, num_required=1, dtype=F32)

    acc = current_table().lookup(h)

    def fail(state: Any, count: int, serial: int) -> Any:
        raise MemoryError("no room for the result")

    monkeypatch.setattr(acc, "_finish_round", fail)
    with pytest.raises(MemoryError):
        take()
    stats = tfa.accumulator_stats(h)
    assert stats["num_accumulated"] == 1 and stats["global_step"] == 0
    assert stats["takes_served"] == 0
    monkeypatch.undo()
    result = take()
    values = result if kind == "dense" else result.values
    assert float(np.sum(values)) == (3.0 if kind == "dense" else 2.0)
    raw.DestroyResourceOp(resource=h)


# a MEAN take gathers rows with the compiled loop (dividing them as it goes) or
# with numpy (rows counted twice divided first): both must fail cleanly
_TAKE_PATHS = ["numpy", pytest.param("compiled", marks=needs_numba)]


@contextlib.contextmanager
def _take_path(path: str) -> Iterator[list[str]]:
    """Sparse takes on ``path``; yields the names of the compiled loops called."""
    spy = Spy(sparse_kernel.load()) if path == "compiled" else None
    assert path == "numpy" or spy is not None
    with kernels_in_use(sparse_kernel, spy and spy.kernels):
        yield spy.calls if spy is not None else []


@pytest.mark.parametrize("path", _TAKE_PATHS)
def test_a_sparse_mean_take_failing_at_its_result_puts_back_the_rows_undivided(
    monkeypatch, path: str
) -> None:
    h = raw.SparseConditionalAccumulator(dtype=F32, shape=[8, 2], reduction_type="MEAN")
    # row 6 twice; row 1 arrives after rows 5 and 6 (the take reorders)
    for indices, value in (([5, 6], 2.0), ([1, 6], 4.0)):
        raw.SparseAccumulatorApplyGradient(
            handle=h,
            local_step=0,
            gradient_indices=indices,
            gradient_values=np.full((2, 2), value, np.float32),
            gradient_shape=[],
            has_known_shape=False,
        )

    def no_room(rows: Any, order: Any, dividing: Any = None) -> Any:
        raise MemoryError("no room for the result")

    monkeypatch.setattr(sparse, "gather", no_room)
    with _take_path(path), pytest.raises(MemoryError):
        raw.SparseAccumulatorTakeGradient(handle=h, num_required=2, dtype=F32)
    monkeypatch.undo()
    with _take_path(path) as loops:
        result = raw.SparseAccumulatorTakeGradient(handle=h, num_required=2, dtype=F32)
    assert loops == (["gather_rows_dividing"] if path == "compiled" else [])
    assert result.indices.tolist() == [1, 5, 6]
    # row 6 is the mean of its two gradients, divided once, not twice
    assert result.values.tolist() == [[4.0, 4.0], [2.0, 2.0], [3.0, 3.0]]
    raw.DestroyResourceOp(resource=h)


class _NumpyFailingAt:
    """numpy as a module sees it, except that its ``fail_at``-th call raises
    MemoryError (``fail_at=None``: calls are only counted)."""

    def __init__(self, fail_at: int | None) -> None:
        self.fail_at = fail_at
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        found = getattr(np, name)
        if isinstance(found, type) or not callable(found):
            return found

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            if self.calls == self.fail_at:
                raise MemoryError(f"no room (numpy.{name})")
            return found(*args, **kwargs)

        return call


def _sparse_apply(h: Any, indices: list[int], width: int, value: float) -> None:
    raw.SparseAccumulatorApplyGradient(
        handle=h,
        local_step=0,
        gradient_indices=indices,
        gradient_values=np.full((len(indices), width), value, np.float64),
        gradient_shape=[],
        has_known_shape=False,
    )


def _assert_took_means(h: Any, earlier: list[list[int]], last: list[int], width: int) -> None:
    """A take (then destroy) of ``h`` gives each row the mean of the values
    ``_sparse_apply`` gave it: 1, 2, ... for the gradients ``earlier``, then ``last``."""
    result = raw.SparseAccumulatorTakeGradient(
        handle=h, num_required=len(earlier) + 1, dtype=tfa.float64
    )
    raw.DestroyResourceOp(resource=h)
    expected: dict[int, list[float]] = {}
    for value, indices in enumerate([*earlier, last], start=1):
        for i in indices:
            expected.setdefault(i, []).append(float(value))
    assert result.indices.tolist() == sorted(expected)
    means = [sum(v) / len(v) for _, v in sorted(expected.items())]
    np.testing.assert_array_equal(result.values, np.repeat([means], width, axis=0).T)


# (declared shape, earlier gradients' indices, the failing gradient's indices):
# with and without a declared first dimension, with and without a slot map
# (wide rows vs a huge first dimension; none without a first dimension), new rows
# only (in order and not), mostly held rows, a mix (these grow the row
# buffer), and held rows only.
_MERGES: dict[str, tuple[list[Any], list[list[int]], list[int]]] = {
    "map, new rows after": ([64, 16], [[3, 9], [1, 9]], [20, 30]),
    "map, new rows between": ([64, 16], [[3, 40]], [2, 7, 50]),
    "map, mostly held": ([64, 16], [list(range(9))], [*range(8), 63]),
    "map, mixed": ([64, 16], [[3, 9], [4]], [1, 3, 9, 12]),
    "map, mostly new": ([64, 16], [[3, 9], [4]], [*range(1, 9), 10]),
    # no map until this apply, which makes one from the round's index
    "map made from the index": ([2000, 16], [[1500], [*range(100)]], [0, 1, 1600]),
    "no map, mostly new": ([10**9, 2], [[3, 9]], [*range(1, 9), 10]),
    "no map, mixed": ([10**9, 2], [[3, 9], [4]], [1, 3, 9, 12]),
    "no map, held only": ([10**9, 2], [[3, 9]], [9, 3]),
    "index array, mixed": ([None, 3], [[3, 9], [4]], [1, 3, 9, 12]),
    "index array, new rows after": ([None, 3], [[3, 9]], [10, 11]),
    "index array, held only": ([None, 3], [[3, 9]], [3]),
}


@pytest.mark.parametrize("case", list(_MERGES))
def test_a_sparse_apply_failing_anywhere_for_want_of_memory_changes_nothing(
    case: str, monkeypatch: Any, row_adds: str
) -> None:
    """A MemoryError at any numpy function call of an apply leaves the round
    exactly as it was: the same gradient applied again afterwards is counted
    once. (The round is written last by in-place array methods, which allocate
    nothing.)"""
    shape, earlier, failing = _MERGES[case]
    width = shape[1]
    expected: dict[int, list[float]] = {}
    for value, indices in enumerate([*earlier, failing], start=1):
        for i in indices:
            expected.setdefault(i, []).append(float(value))

    def attempt(fail_at: int | None) -> int:
        h = raw.SparseConditionalAccumulator(dtype=tfa.float64, shape=shape)
        for value, indices in enumerate(earlier, start=1):
            _sparse_apply(h, indices, width, value)
        numpy = _NumpyFailingAt(fail_at)
        for module in SPARSE_MODULES:
            monkeypatch.setattr(module, "np", numpy)
        try:
            _sparse_apply(h, failing, width, len(earlier) + 1)
            assert fail_at is None, f"call {fail_at} did not fail"
        except MemoryError:
            assert numpy.calls == fail_at
        finally:
            monkeypatch.undo()
        if fail_at is not None:
            assert tfa.accumulator_stats(h)["num_accumulated"] == len(earlier)
            _sparse_apply(h, failing, width, len(earlier) + 1)
        result = raw.SparseAccumulatorTakeGradient(
            handle=h, num_required=len(earlier) + 1, dtype=tfa.float64
        )
        raw.DestroyResourceOp(resource=h)
        assert result.indices.tolist() == sorted(expected)
        means = [sum(v) / len(v) for _, v in sorted(expected.items())]
        np.testing.assert_array_equal(result.values, np.repeat([means], width, axis=0).T)
        return numpy.calls

    calls = attempt(None)
    assert row_adds
    assert calls >= 3  # the apply does reach numpy
    for fail_at in range(1, calls + 1):
        attempt(fail_at)


# (declared shape, earlier gradients' indices, the last gradient's indices) for
# MEAN takes: a few rows touched twice (picked out and divided), mostly rows
# touched twice (all divided, the others put back), and a buffer handed over
# whole (in index order and exactly full).
_TAKES: dict[str, tuple[list[Any], list[list[int]], list[int]]] = {
    "few twice, gathered": ([64, 4], [[1, 5, 9], [20, 30]], [5, 2]),
    "few twice, copied in order": ([64, 4], [[1, 5, 9], [20, 30]], [5, 40]),
    "mostly twice, gathered": ([64, 4], [[3, 9, 12]], [1, 3, 9, 12]),
    "handed over": ([64, 4], [[1, 2, 3]], [2]),
    "handed over, all twice": ([64, 4], [[1, 2, 3]], [1, 2, 3]),
    "index array, few twice": ([None, 3], [[3, 9, 11], [4]], [1, 9]),
}
_GATHERED = {  # the cases whose rows arrive out of index order
    "few twice, gathered",
    "mostly twice, gathered",
    "index array, few twice",
}


@pytest.mark.parametrize("path", _TAKE_PATHS)
@pytest.mark.parametrize("case", list(_TAKES))
def test_a_sparse_mean_take_failing_anywhere_puts_the_round_back_undivided(
    case: str, path: str, monkeypatch: Any
) -> None:
    """A MemoryError at any numpy function call of a MEAN take leaves the round
    as it was, rows undivided: the next take gives each row its mean."""
    shape, earlier, last = _TAKES[case]
    width = shape[1]

    def attempt(fail_at: int | None) -> int:
        h = raw.SparseConditionalAccumulator(dtype=tfa.float64, shape=shape)
        for value, indices in enumerate([*earlier, last], start=1):
            _sparse_apply(h, indices, width, value)
        numpy = _NumpyFailingAt(fail_at)
        for module in SPARSE_MODULES:
            monkeypatch.setattr(module, "np", numpy)
        try:
            with _take_path(path) as loops:
                result = raw.SparseAccumulatorTakeGradient(
                    handle=h, num_required=len(earlier) + 1, dtype=tfa.float64
                )
            assert fail_at is None, f"call {fail_at} did not fail"
            # rows out of index order are gathered, by the dividing loop when compiled
            gathered = path == "compiled" and case in _GATHERED
            assert loops == (["gather_rows_dividing"] if gathered else [])
        except MemoryError:
            assert numpy.calls == fail_at
        finally:
            monkeypatch.undo()
        if fail_at is None:
            raw.DestroyResourceOp(resource=h)
            assert len(result.indices) == len({*sum(earlier, []), *last})
            return numpy.calls
        stats = tfa.accumulator_stats(h)
        assert stats["num_accumulated"] == len(earlier) + 1 and stats["global_step"] == 0
        _assert_took_means(h, earlier, last, width)
        return numpy.calls

    calls = attempt(None)
    assert calls >= 2  # the take does reach numpy (its result, its dense shape)
    for fail_at in range(1, calls + 1):
        attempt(fail_at)


@pytest.mark.parametrize("case", list(_TAKES))
def test_a_sparse_take_hands_its_buffers_on_only_once_it_cannot_fail(
    case: str, monkeypatch: Any
) -> None:
    """While a take can still fail (here: making its dense shape), the round's
    buffers are not yet the next round's to reuse: an apply starting a round
    meanwhile cannot write into a round that is then put back."""
    shape, earlier, last = _TAKES[case]
    h = raw.SparseConditionalAccumulator(dtype=tfa.float64, shape=shape)
    for value, indices in enumerate([*earlier, last], start=1):
        _sparse_apply(h, indices, shape[1], value)
    acc: Any = current_table().lookup(h)  # the in-process accumulator
    kept_buffers_seen: list[Any] = []

    def no_memory(self: Any, values_shape: Any) -> Any:
        kept_buffers_seen.append(acc._kept_buffers)
        raise MemoryError("no memory for the dense shape")

    monkeypatch.setattr(sparse.SparseAccumulator, "_dense_shape", no_memory)
    with pytest.raises(MemoryError):
        raw.SparseAccumulatorTakeGradient(
            handle=h, num_required=len(earlier) + 1, dtype=tfa.float64
        )
    monkeypatch.undo()
    assert kept_buffers_seen == [None]
    _assert_took_means(h, earlier, last, shape[1])


@needs_numba
@pytest.mark.parametrize(
    "case",  # with a slot map, every gradient; without, those with held rows
    [
        name
        for name, (_, earlier, last) in _MERGES.items()
        if name.startswith("map") or set(last) & set(sum(earlier, []))
    ],
)
def test_a_compiled_row_add_failing_for_want_of_memory_changes_nothing(case: str) -> None:
    """The compiled loop is the apply's last write to the rows: if calling it
    fails (numba converting its arguments, say), the round is as it was, slot
    map included (with a map, the claiming loop has run before it)."""
    shape, earlier, failing = _MERGES[case]
    width = shape[1]
    h = raw.SparseConditionalAccumulator(dtype=tfa.float64, shape=shape)
    for value, indices in enumerate(earlier, start=1):
        _sparse_apply(h, indices, width, value)
    no_room = mock.Mock(side_effect=MemoryError("no room to call the loop"))
    spy = Spy(sparse_kernel.load())
    broken = spy.kernels._replace(add_rows=no_room, add_or_set_rows=no_room)
    with kernels_in_use(sparse_kernel, broken), pytest.raises(MemoryError):
        _sparse_apply(h, failing, width, len(earlier) + 1)
    assert no_room.call_count == 1
    assert spy.calls == (["claim_rows"] if case.startswith("map") else [])
    assert tfa.accumulator_stats(h)["num_accumulated"] == len(earlier)
    _sparse_apply(h, failing, width, len(earlier) + 1)
    _assert_took_means(h, earlier, failing, width)


@needs_numba
@pytest.mark.parametrize(
    "case",  # every merge whose rows a compiled loop writes
    [
        name
        for name, (_, earlier, last) in _MERGES.items()
        if name.startswith("map") or set(last) & set(sum(earlier, []))
    ],
)
def test_an_interrupt_right_after_a_compiled_row_write_leaves_the_gradient_in_once(
    case: str,
) -> None:
    """Ctrl-C landing just after the loop that writes a gradient's rows has
    returned (here raised by the loop itself), before the round's index and
    count are set: the apply finishes its writes without running the loop
    again (the loop stamped itself done), counts the gradient once, and
    raises the interrupt."""
    shape, earlier, last = _MERGES[case]
    width = shape[1]
    h = raw.SparseConditionalAccumulator(dtype=tfa.float64, shape=shape)
    for value, indices in enumerate(earlier, start=1):
        _sparse_apply(h, indices, width, value)
    real = sparse_kernel.load()
    assert real is not None
    ran: list[str] = []

    def interrupted(name: str) -> Any:
        def run(*args: Any) -> None:
            getattr(real, name)(*args)
            ran.append(name)
            raise KeyboardInterrupt  # as if Ctrl-C landed once it returned

        return run

    broken = real._replace(
        add_rows=interrupted("add_rows"), add_or_set_rows=interrupted("add_or_set_rows")
    )
    with kernels_in_use(sparse_kernel, broken), pytest.raises(KeyboardInterrupt):
        _sparse_apply(h, last, width, len(earlier) + 1)
    assert len(ran) == 1  # written once: running the writes again found the stamp
    assert tfa.accumulator_stats(h)["num_accumulated"] == len(earlier) + 1
    _assert_took_means(h, earlier, last, width)


class _ConvertingPutFails(np.ndarray):
    """A slot map whose ``put`` fails for want of memory whenever numpy would
    first convert the indices or values into a new array (as it does for any
    other dtype than the map's and intp); once only."""

    failed = False

    def put(self, indices: Any, values: Any, mode: Any = "raise") -> None:
        converts = np.asarray(values).dtype != self.dtype or np.asarray(indices).dtype != np.intp
        if converts and not _ConvertingPutFails.failed:
            _ConvertingPutFails.failed = True
            raise MemoryError("no room to convert what is put")
        np.asarray(self).put(indices, values, mode)


# (earlier gradients' indices, the applied gradient's): row 60 makes the slot
# map cover every row of the 64 (the apply does not replace the map)
_MAPPED_MERGES = {
    "new rows after": ([[3, 9, 60]], [61, 63]),
    "new rows between": ([[3, 60]], [2, 7, 50]),
    "mostly held": ([[*range(9), 60]], [*range(9), 63]),
    "mixed": ([[3, 9, 60], [4]], [1, 3, 9, 12]),
    "mostly new": ([[3, 9, 60], [4]], [*range(1, 9), 10]),
}


@pytest.mark.parametrize("case", list(_MAPPED_MERGES))
def test_a_sparse_apply_writes_the_slot_map_without_converting(case: str, row_adds: str) -> None:
    """The slot map is written after the rows: a put that had to convert its
    operands (allocating) could fail there and leave rows added but not
    indexed; if it fails anyway, the round is as it was."""
    earlier, failing = _MAPPED_MERGES[case]
    shape, width = [64, 16], 16
    h = raw.SparseConditionalAccumulator(dtype=tfa.float64, shape=shape)
    for value, indices in enumerate(earlier, start=1):
        _sparse_apply(h, indices, width, value)
    state = current_table().lookup(h)._round  # type: ignore[attr-defined]
    assert state.places is not None and max(failing) < state.places.shape[0]
    state.places = state.places.view(_ConvertingPutFails)
    _ConvertingPutFails.failed = False
    try:
        _sparse_apply(h, failing, width, len(earlier) + 1)
    except MemoryError:
        assert tfa.accumulator_stats(h)["num_accumulated"] == len(earlier)
        _sparse_apply(h, failing, width, len(earlier) + 1)
    _assert_took_means(h, earlier, failing, width)


# --- item 3: string attributes ----------------------------------------------------


@pytest.mark.parametrize("constructor", CONSTRUCTORS)
def test_none_shared_name_and_container_are_private(constructor: Any) -> None:
    a = constructor(dtype=F32, shape=[2], shared_name=None, container=None)
    b = constructor(dtype=F32, shape=[2], shared_name=None, container=None)
    assert a != b
    label = current_table().lookup(a).label
    assert label.startswith("localhost/_") and "None" not in label
    raw.DestroyResourceOp(resource=a)
    raw.DestroyResourceOp(resource=b)


@pytest.mark.parametrize("attr", ["shared_name", "container", "reduction_type"])
@pytest.mark.parametrize("value", [5, np.array(["MEAN", "SUM"])])
def test_non_string_attributes_are_a_type_error(attr: str, value: Any) -> None:
    before = current_table().live_handles()
    with pytest.raises(TypeError, match=f"Expected string for argument '{attr}'"):
        raw.ResourceConditionalAccumulator(dtype=F32, shape=[2], **{attr: value})
    assert current_table().live_handles() == before


def test_bytes_attributes_name_the_same_accumulator_as_their_text() -> None:
    # TensorFlow takes bytes for its string attributes (A06-A08)
    a = raw.ResourceConditionalAccumulator(
        dtype=F32, shape=[2], container=b"c-bytes", shared_name=b"bytes", reduction_type=b"SUM"
    )
    b = raw.ResourceConditionalAccumulator(
        dtype=F32, shape=[2], container="c-bytes", shared_name="bytes", reduction_type="SUM"
    )
    assert a == b
    raw.DestroyResourceOp(resource=a)


def test_none_reduction_type_means_mean() -> None:
    for acc in (
        compat.ConditionalAccumulator(F32, shape=[1], reduction_type=None),
        compat.ConditionalAccumulator(F32, shape=[1]),
    ):
        acc.apply_grad([1.0])
        acc.apply_grad([3.0])
        assert acc.take_grad(2).tolist() == [2.0]
    h = raw.ResourceConditionalAccumulator(dtype=F32, shape=[1], reduction_type=None)
    assert current_table().lookup(h).spec.reduction_type == "MEAN"
    raw.DestroyResourceOp(resource=h)
    with pytest.raises(TypeError, match="Expected string for argument 'reduction_type'"):
        compat.ConditionalAccumulator(F32, shape=[1], reduction_type=np.array(["MEAN"]))  # type: ignore[arg-type]


# --- item 8: timeouts -------------------------------------------------------------


def _dense_with_one() -> int:
    h = raw.ResourceConditionalAccumulator(dtype=F32, shape=[1])
    return h


@pytest.mark.parametrize("timeout", [math.inf, 1e10, 1e300, 2**70])
def test_huge_and_infinite_timeouts_wait_until_served(timeout: float) -> None:
    h = _dense_with_one()
    taker = Background(
        raw.ResourceAccumulatorTakeGradient, handle=h, num_required=1, dtype=F32, timeout=timeout
    )
    wait_for_waiting(h, 1)
    assert not taker.done()
    raw.ResourceAccumulatorApplyGradient(handle=h, local_step=0, gradient=[4.0])
    assert taker.result().tolist() == [4.0]
    raw.DestroyResourceOp(resource=h)


@pytest.mark.parametrize(
    "timeout", ["0.1", True, False, np.bool_(True), [0.1], np.array([0.1]), 1j]
)
def test_a_timeout_that_is_not_a_number_is_a_type_error(timeout: Any) -> None:
    h = _dense_with_one()
    with pytest.raises(TypeError, match="timeout must be a number"):
        raw.ResourceAccumulatorTakeGradient(handle=h, num_required=1, dtype=F32, timeout=timeout)
    assert tfa.accumulator_stats(h)["waiting"] == 0
    raw.DestroyResourceOp(resource=h)


@pytest.mark.parametrize("timeout", [np.float32(0.01), np.int64(0), 0, 0.01])
def test_numpy_and_python_numbers_are_timeouts(timeout: Any) -> None:
    h = _dense_with_one()
    with pytest.raises(errors.DeadlineExceededError):
        raw.ResourceAccumulatorTakeGradient(handle=h, num_required=1, dtype=F32, timeout=timeout)
    assert tfa.accumulator_stats(h)["takes_timed_out"] == 1
    raw.DestroyResourceOp(resource=h)


@pytest.mark.parametrize("timeout", [-1, -math.inf, math.nan])
def test_negative_or_nan_timeouts_are_a_value_error(timeout: float) -> None:
    h = _dense_with_one()
    with pytest.raises(ValueError, match="non-negative"):
        raw.ResourceAccumulatorTakeGradient(handle=h, num_required=1, dtype=F32, timeout=timeout)
    raw.DestroyResourceOp(resource=h)


# --- item 10: counters at their limits --------------------------------------------


def test_num_accumulated_saturates_at_int32_max_and_mean_uses_the_exact_count() -> None:
    h = raw.ResourceConditionalAccumulator(dtype=tfa.float64, shape=[1])
    raw.ResourceAccumulatorApplyGradient(handle=h, local_step=0, gradient=np.array([2.0**32]))
    acc = current_table().lookup(h)
    with acc._lock:  # type: ignore[attr-defined]
        # as if 2**32 gradients had come in
        acc._count = 2**32  # type: ignore[attr-defined]
    count = raw.ResourceAccumulatorNumAccumulated(handle=h)
    assert count == 2**31 - 1 and count.dtype == np.int32
    assert tfa.accumulator_stats(h)["num_accumulated"] == 2**32
    result = raw.ResourceAccumulatorTakeGradient(
        handle=h, num_required=2**31 - 1, dtype=tfa.float64
    )
    assert result.tolist() == [1.0]
    raw.DestroyResourceOp(resource=h)


def test_the_global_step_wraps_at_int64_and_stats_counters_are_unbounded() -> None:
    h = raw.ResourceConditionalAccumulator(dtype=F32, shape=[1])
    raw.ResourceAccumulatorSetGlobalStep(handle=h, new_global_step=2**63 - 1)
    raw.ResourceAccumulatorApplyGradient(handle=h, local_step=2**63 - 1, gradient=[1.0])
    raw.ResourceAccumulatorTakeGradient(handle=h, num_required=1, dtype=F32)
    assert tfa.accumulator_stats(h)["global_step"] == -(2**63)
    acc = current_table().lookup(h)
    with acc._lock:  # type: ignore[attr-defined]
        acc._n_accepted = 2**64  # type: ignore[attr-defined]
    raw.ResourceAccumulatorApplyGradient(handle=h, local_step=-(2**63), gradient=[1.0])
    assert tfa.accumulator_stats(h)["accepted"] == 2**64 + 1
    raw.DestroyResourceOp(resource=h)


def test_num_required_above_int32_is_refused_before_queueing() -> None:
    h = _dense_with_one()
    with pytest.raises(ValueError, match="out of range for int32"):
        raw.ResourceAccumulatorTakeGradient(handle=h, num_required=2**31, dtype=F32)
    assert tfa.accumulator_stats(h)["waiting"] == 0
    raw.DestroyResourceOp(resource=h)


# --- item 11: classes and messages ------------------------------------------------


def test_compat_none_gradient_and_steps_are_value_errors() -> None:
    acc = compat.ConditionalAccumulator(F32, shape=[2])
    sparse = compat.SparseConditionalAccumulator(F32, shape=[4, 2])
    for call in (
        lambda: acc.apply_grad(None),
        lambda: acc.apply_grad([1.0, 2.0], local_step=None),
        lambda: acc.set_global_step(None),
        lambda: sparse.apply_grad(None, [[1.0, 2.0]]),
    ):
        with pytest.raises(ValueError, match="None values not supported"):
            call()
    assert acc.stats()["accepted"] == 0 and sparse.stats()["accepted"] == 0


def test_raw_none_steps_and_indices_are_value_errors() -> None:
    h = raw.ResourceConditionalAccumulator(dtype=F32, shape=[2])
    s = raw.SparseConditionalAccumulator(dtype=F32, shape=[4, 2])
    none = "Attempt to convert a value \\(None\\)"
    with pytest.raises(ValueError, match=none):
        raw.ResourceAccumulatorApplyGradient(handle=h, local_step=None, gradient=[1.0, 1.0])
    with pytest.raises(ValueError, match=none):
        raw.ResourceAccumulatorSetGlobalStep(handle=h, new_global_step=None)
    with pytest.raises(ValueError, match=none):
        raw.SparseAccumulatorApplyGradient(
            handle=s,
            local_step=0,
            gradient_indices=None,
            gradient_values=np.ones((1, 2), np.float32),
            gradient_shape=[],
            has_known_shape=False,
        )
    raw.DestroyResourceOp(resource=h)
    raw.DestroyResourceOp(resource=s)


def test_object_arrays_of_numbers_convert_and_others_name_the_bad_element() -> None:
    acc = compat.ConditionalAccumulator(F32, shape=[2])
    acc.apply_grad(np.array([1.0, 2], dtype=object))
    with pytest.raises(TypeError, match="got None of type 'NoneType'"):
        acc.apply_grad(np.array([1.0, None], dtype=object))
    assert acc.take_grad(1).tolist() == [1.0, 2.0]


def test_an_unsigned_index_beyond_int64_is_reported_as_such() -> None:
    sparse = compat.SparseConditionalAccumulator(F32, shape=[4, 2])
    with pytest.raises(errors.InvalidArgumentError, match="18446744073709551615"):
        sparse.apply_grad(np.array([2**64 - 1], np.uint64), [[1.0, 2.0]])
    s = raw.SparseConditionalAccumulator(dtype=F32, shape=None)
    with pytest.raises(errors.InvalidArgumentError, match="18446744073709551615"):
        raw.SparseAccumulatorApplyGradient(
            handle=s,
            local_step=0,
            gradient_indices=np.array([2**64 - 1], np.uint64),
            gradient_values=np.ones((1, 2), np.float32),
            gradient_shape=[],
            has_known_shape=False,
        )
    assert sparse.stats()["accepted"] == 0 and tfa.accumulator_stats(s)["accepted"] == 0
    raw.DestroyResourceOp(resource=s)


def test_infinity_into_an_integer_accumulator_is_a_type_error() -> None:
    acc = compat.ConditionalAccumulator(tfa.int32, shape=[])
    with pytest.raises(TypeError, match="Expected int32, but got inf"):
        acc.apply_grad(float("inf"))
    assert int(acc.num_accumulated()) == 0


def test_python_floats_beyond_float32_become_infinity_in_the_compat_class() -> None:
    acc = compat.ConditionalAccumulator(F32, shape=[2], reduction_type="SUM")
    acc.apply_grad([1e39, 1.0])
    assert acc.take_grad(1).tolist() == [math.inf, 1.0]


@pytest.mark.parametrize("step", [np.float64(3.0), np.float32(3.0), np.int16(3)])
def test_numpy_whole_number_steps_are_accepted(step: Any) -> None:
    h = raw.ResourceConditionalAccumulator(dtype=F32, shape=[1])
    raw.ResourceAccumulatorApplyGradient(handle=h, local_step=step, gradient=[1.0])
    assert int(raw.ResourceAccumulatorNumAccumulated(handle=h)) == 1
    with pytest.raises(TypeError):
        raw.ResourceAccumulatorApplyGradient(handle=h, local_step=3.0, gradient=[1.0])
    raw.DestroyResourceOp(resource=h)


@pytest.mark.parametrize("order", [">", "<"])
def test_arrays_in_either_byte_order_are_accepted(order: str) -> None:
    h = raw.ResourceConditionalAccumulator(dtype=F32, shape=[2], reduction_type="SUM")
    s = raw.SparseConditionalAccumulator(dtype=tfa.float64, shape=[4, 2], reduction_type="SUM")
    raw.ResourceAccumulatorApplyGradient(
        handle=h, local_step=0, gradient=np.array([1.5, 2.5], f"{order}f4")
    )
    raw.SparseAccumulatorApplyGradient(
        handle=s,
        local_step=0,
        gradient_indices=[1],
        gradient_values=np.array([[1.5, 2.5]], f"{order}f8"),
        gradient_shape=[],
        has_known_shape=False,
    )
    dense = raw.ResourceAccumulatorTakeGradient(handle=h, num_required=1, dtype=F32)
    assert dense.dtype == np.float32 and dense.dtype.isnative and dense.tolist() == [1.5, 2.5]
    taken = raw.SparseAccumulatorTakeGradient(handle=s, num_required=1, dtype=tfa.float64)
    assert taken.values.dtype.isnative and taken.values.tolist() == [[1.5, 2.5]]
    with pytest.raises(errors.InvalidArgumentError, match="Signature mismatch"):
        raw.ResourceAccumulatorApplyGradient(
            handle=h, local_step=0, gradient=np.array([1.5, 2.5], f"{order}f8")
        )
    raw.DestroyResourceOp(resource=h)
    raw.DestroyResourceOp(resource=s)


@pytest.mark.parametrize("handle", [True, False, np.bool_(True)])
def test_a_bool_is_not_a_handle(handle: Any) -> None:
    with pytest.raises(TypeError, match="to EagerTensor of dtype resource"):
        raw.ResourceAccumulatorNumAccumulated(handle=handle)


def test_rejections_before_the_lock_and_under_it_are_both_counted() -> None:
    s = raw.SparseConditionalAccumulator(dtype=F32, shape=[4, 2])
    good = np.ones((1, 2), np.float32)
    apply = raw.SparseAccumulatorApplyGradient
    apply(handle=s, local_step=0, gradient_indices=[0], gradient_values=good,
          gradient_shape=[], has_known_shape=False)  # fmt: skip
    with pytest.raises(errors.InvalidArgumentError):  # out of range: found before the lock
        apply(handle=s, local_step=0, gradient_indices=[9], gradient_values=good,
              gradient_shape=[], has_known_shape=False)  # fmt: skip
    with pytest.raises(errors.InvalidArgumentError):  # rank differs from the round's: under it
        apply(handle=s, local_step=0, gradient_indices=[1], gradient_values=np.ones((1, 2, 1), np.float32),
              gradient_shape=[], has_known_shape=False)  # fmt: skip
    with pytest.raises(errors.InvalidArgumentError):  # wrong dtype: refused by the op, not counted
        apply(handle=s, local_step=0, gradient_indices=[1], gradient_values=good.astype(np.float64),
              gradient_shape=[], has_known_shape=False)  # fmt: skip
    apply(handle=s, local_step=-1, gradient_indices=[1], gradient_values=good,
          gradient_shape=[], has_known_shape=False)  # fmt: skip
    stats = tfa.accumulator_stats(s)
    assert (stats["accepted"], stats["stale"], stats["rejected"]) == (1, 1, 2)
    raw.AccumulatorSetGlobalStep(handle=s, new_global_step=1)
    apply(handle=s, local_step=0, gradient_indices=[1], gradient_values=good,
          gradient_shape=[], has_known_shape=False)  # fmt: skip
    assert tfa.accumulator_stats(s)["stale"] == 2
    raw.DestroyResourceOp(resource=s)


def test_hostile_input_from_many_threads_leaves_every_accumulator_whole() -> None:
    """Good and bad gradients interleaved from threads: every good one is counted once."""
    h = raw.ResourceConditionalAccumulator(dtype=F32, shape=[3], reduction_type="SUM")
    bad_inputs: list[Any] = [None, [1.0], "x", np.ones(3, np.float64), np.ones((3, 1), np.float32)]
    refused = [0]
    lock = threading.Lock()

    def worker() -> None:
        for i in range(200):
            try:
                gradient = np.ones(3, np.float32) if i % 2 else bad_inputs[i // 2 % len(bad_inputs)]
                raw.ResourceAccumulatorApplyGradient(handle=h, local_step=0, gradient=gradient)
            except (errors.InvalidArgumentError, TypeError, ValueError):
                with lock:
                    refused[0] += 1

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not any(thread.is_alive() for thread in threads)
    assert refused[0] == 400
    total = raw.ResourceAccumulatorTakeGradient(handle=h, num_required=1, dtype=F32)
    assert total.tolist() == [400.0] * 3
    stats = tfa.accumulator_stats(h)
    # the shapes [1] and [3, 1] reach the accumulator and are refused there
    assert stats["accepted"] == 400 and stats["rejected"] == 160
    raw.DestroyResourceOp(resource=h)
