"""An interrupt at any line of an apply leaves the round whole: the gradient
is in it and counted, or neither, never one without the other, whatever line
of tf_accum's accumulators it lands on, and when it lands on several lines in
a row (Ctrl-C pressed again while the first is handled). Exceptions are
injected by a trace function, at the start of each line in turn."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import tf_accum as tfa
from tests.helpers import line_injector, lock_is_free, run_traced
from tf_accum.accumulators import half_kernel
from tf_accum.accumulators.narrow_sum import NarrowSum
from tf_accum.accumulators.threads import run_uninterrupted
from tf_accum.resources import current_table

raw = tfa.raw_ops
FRESH = 2**40  # a local step no take catches up with
MOST_LINES = 2000  # an apply runs fewer lines than this: the walk really ends


class _Injected(KeyboardInterrupt):
    pass


def _inject(first: int, times: int, where: list[str] | None = None) -> Any:
    """A tracer raising _Injected at the ``first``-th line started in the
    accumulators and at the ``times - 1`` lines started after it (see
    tests.helpers.line_injector), noting in ``where`` the functions it raised in."""
    return line_injector(
        lambda name: name.startswith("tf_accum.accumulators"), first, _Injected, times, where
    )


class _Kind:
    """An accumulator (SUM) fed one gradient (ones, but for the patterns
    below): ``apply()`` adds it, ``take(n)`` returns how many times the
    round holds it (a SUM of ones: the value every element holds)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        if kind == "sparse":
            self.handle = raw.SparseConditionalAccumulator(
                dtype=tfa.float32, shape=[10, 2], reduction_type="SUM"
            )
            return
        dtype, size = {
            "dense": (tfa.float32, 4),
            "dense large": (tfa.float32, 1 << 18),
            "dense large, zeros in front": (tfa.float32, 1 << 18),
            "dense large, one element": (tfa.float32, 1 << 18),
            "int32 large": (tfa.int32, 1 << 18),
            "float16": (tfa.float16, 8192),
            "bfloat16": (tfa.bfloat16, 8192),
            "float16 numpy": (tfa.float16, 8192),
        }[kind]
        self.dtype = dtype
        self.gradient = np.ones(size, dtype.numpy_dtype)
        if kind == "dense large, zeros in front":  # the first element shows no add
            self.gradient[:1000] = 0
        elif kind == "dense large, one element":  # no element looked at shows one
            self.gradient[:] = 0
            self.gradient[1] = 1
        self.one = int(np.flatnonzero(self.gradient)[0])  # an element that is 1
        self.handle = raw.ResourceConditionalAccumulator(
            dtype=dtype, shape=[size], reduction_type="SUM"
        )

    @property
    def accumulator(self) -> Any:
        return current_table().lookup(self.handle)

    def apply(self) -> None:
        if self.kind == "sparse":
            raw.SparseAccumulatorApplyGradient(
                handle=self.handle, local_step=FRESH,
                gradient_indices=np.array([3, 7], np.int64),
                gradient_values=np.ones((2, 2), np.float32),
                gradient_shape=np.array([10, 2], np.int64), has_known_shape=True,
            )  # fmt: skip
        else:
            raw.ResourceAccumulatorApplyGradient(
                handle=self.handle, local_step=FRESH, gradient=self.gradient
            )

    def take(self, n: int) -> float:
        if self.kind == "sparse":
            result = raw.SparseAccumulatorTakeGradient(
                handle=self.handle, num_required=n, dtype=tfa.float32
            )
            assert list(result.indices) == [3, 7]
            values = result.values
        else:
            values = raw.ResourceAccumulatorTakeGradient(
                handle=self.handle, num_required=n, dtype=self.dtype
            )
            held = float(values.flat[self.one])
            assert np.array_equal(values, self.gradient * held), "a gradient only partly added"
            return held
        first = float(values.flat[0])
        assert (values == first).all(), "a gradient only partly added"
        return first

    def close(self) -> None:
        raw.DestroyResourceOp(resource=self.handle)


@pytest.fixture(
    params=[
        "dense",
        "dense large",
        "dense large, zeros in front",
        "dense large, one element",
        "int32 large",
        "float16",
        "bfloat16",
        "float16 numpy",
        "sparse",
    ]
)
def kind(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[_Kind]:
    """A small dense sum is added aside, a large one in place, once an
    element the add changes is found (the first, or one of a sample: "zeros
    in front"), else aside too ("one element"). float16 and bfloat16 sums add
    with one compiled loop (numba there) or with numpy's passes ("numpy": the
    loops left unused)."""
    if request.param in ("float16", "bfloat16") and half_kernel.load() is None:
        pytest.skip("needs numba (the fast extra)")
    if request.param == "float16 numpy":
        monkeypatch.setattr(half_kernel, "loaded", lambda: None)
    made = _Kind(request.param)
    yield made
    made.close()


def _walk(kind: _Kind, before: int, times: int, check: Callable[[int], None]) -> int:
    """Apply with exceptions injected from the 1st, 2nd, ... line on (``times``
    lines in a row) until an apply runs whole; after each, the round holds
    ``before`` or ``before + 1`` gradients, all counted (``check``). Returns
    the number of applies interrupted."""
    acc = kind.accumulator
    for _ in range(3):  # first uses (a thread's float error context, ...) out of the way
        kind.apply()
    kind.take(3)
    most = 0  # the most exceptions one apply met
    for first in range(1, MOST_LINES):
        for _ in range(before):
            kind.apply()
        where: list[str] = []
        finished, _ = run_traced(kind.apply, _inject(first, times, where), _Injected)
        # an apply of several calls from the main thread goes on on the helper
        # thread even when its wait was interrupted: let it end
        run_uninterrupted(lambda: None)
        assert lock_is_free(acc) and acc.num_waiting() == 0
        count = acc.num_accumulated()
        assert count in (before, before + 1), f"line {first}: {count} counted"
        check(count)
        most = max(most, len(where))
        if finished:
            assert count == before + 1
            assert times == 1 or most > 1, "no apply met a second exception"
            return first - 1
    raise AssertionError("the apply never ran whole")


@pytest.mark.parametrize("times", [1, 3, 40], ids=["once", "3 lines in a row", "40 lines in a row"])
@pytest.mark.parametrize("before", [0, 1, 2], ids=["first", "second", "third"])
def test_an_exception_at_any_line_of_an_apply_leaves_it_whole_or_undone(
    kind: _Kind, before: int, times: int
) -> None:
    """The round after the interrupted apply holds as many ones as it counts
    (a SUM of ones equals its count), and the next apply and take work."""

    def check(count: int) -> None:
        if count:
            assert kind.take(count) == count, f"{count} counted"

    interrupted = _walk(kind, before, times, check)
    assert interrupted > 3  # it really walked through the apply
    kind.apply()
    assert kind.take(1) == 1.0
    if kind.kind in ("float16", "bfloat16"):  # the walk went through the compiled add
        kind.apply()
        total = kind.accumulator._round
        assert isinstance(total, NarrowSum) and total.prepare_add(kind.gradient) is not None
        kind.take(1)


@pytest.mark.parametrize("before", [0, 1, 2], ids=["first", "second", "third"])
@pytest.mark.parametrize(
    "name", ["dense", "dense large", "dense large, zeros in front", "int32 large"]
)
def test_an_exception_in_the_finishing_of_an_interrupted_apply_leaves_it_to_the_next_use(
    name: str, before: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An exception at a line of a dense apply, then another at a line of the
    ``finally`` that finishes or drops what the first cut short: the round is
    left whole or undone all the same, finished by whatever uses it next (a
    take here). A trace function that raises is unset, so the second
    exception comes from a tracer set for the finishing alone."""
    kind = _Kind(name)
    acc = kind.accumulator
    finish = acc._settle_locked
    # whether the apply's own finishing ran (and was cut short) in this apply
    cut: list[bool] = []
    applying = [False]

    def finish_cut_at(line: int) -> Callable[[], None]:
        def cut_short() -> None:
            if cut or not applying[0]:  # the next use finishes it whole
                finish()
                return
            cut.append(False)
            whole, _ = run_traced(finish, _inject(line, 1), _Injected)
            if not whole:
                cut[0] = True
                raise _Injected(line)  # on, into the apply that called it

        return cut_short

    for _ in range(3):
        kind.apply()
    kind.take(3)
    walked, accepted = 0, 3
    for first in range(1, MOST_LINES):
        for line in range(1, MOST_LINES):
            for _ in range(before):
                kind.apply()
            cut.clear()
            monkeypatch.setattr(acc, "_settle_locked", finish_cut_at(line))
            applying[0] = True
            finished, _ = run_traced(kind.apply, _inject(first, 1), _Injected)
            applying[0] = False
            assert lock_is_free(acc) and acc.num_waiting() == 0
            count = acc.num_accumulated()
            assert count in (before, before + 1), f"lines {first}, {line}: {count} counted"
            if line % 2:  # stats() finishes it, else the take (or the next apply)
                assert acc.stats()["num_accumulated"] == count
            if count:
                assert kind.take(count) == count, f"lines {first}, {line}: {count} counted"
            accepted += count
            assert acc.stats()["accepted"] == accepted, f"lines {first}, {line}"
            monkeypatch.undo()
            if finished:
                assert count == before + 1
                assert walked > 3  # the finishing really was cut short, at several lines
                kind.close()
                return
            if not cut or not cut[0]:
                break  # nothing to finish, or finished whole: the next line of the apply
            walked += 1
    raise AssertionError("the apply never ran whole")
