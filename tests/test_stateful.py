"""Random sequences of every op against a small reference model of the spec.

Hypothesis drives creates, applies (fresh, stale, malformed, wrong dtype,
None), takes (ready or timing out), global-step changes, counts, stats and
destroys on dense and sparse accumulators; every result, error class and
counter is compared with the model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, invariant, precondition, rule

import tf_accum as tfa
from tf_accum import errors

raw = tfa.raw_ops
ROWS, WIDTH = 4, 2
small = st.integers(-9, 9)


@dataclass
class Model:
    """The spec for one accumulator: step, round, counters."""

    kind: str
    dtype: Any
    reduction: str
    handle: int
    alive: bool = True
    step: int = 0
    count: int = 0
    total: np.ndarray | None = None  # dense: the round's sum; sparse: per-row sums
    touched: np.ndarray = field(default_factory=lambda: np.zeros(ROWS, np.int64))
    stats: dict[str, int] = field(
        default_factory=lambda: dict.fromkeys(
            ("accepted", "stale", "rejected", "takes_served", "takes_timed_out"), 0
        )
    )


class AccumulatorMachine(RuleBasedStateMachine):
    accumulators = Bundle("accumulators")

    def __init__(self) -> None:
        super().__init__()
        self.models: list[Model] = []

    # --- create / destroy -------------------------------------------------------

    @rule(
        target=accumulators,
        kind=st.sampled_from(["dense", "sparse"]),
        dtype=st.sampled_from([tfa.float32, tfa.float64, tfa.int32]),
        reduction=st.sampled_from(["MEAN", "SUM"]),
    )
    def create(self, kind: str, dtype: Any, reduction: str) -> Model:
        if kind == "dense":
            # an unknown size: the round's first gradient fixes it
            h = raw.ResourceConditionalAccumulator(
                dtype=dtype, shape=[None], reduction_type=reduction
            )
        else:
            h = raw.SparseConditionalAccumulator(
                dtype=dtype, shape=[ROWS, WIDTH], reduction_type=reduction
            )
        model = Model(kind, dtype, reduction, h)
        self.models.append(model)
        return model

    @rule(model=accumulators)
    def destroy(self, model: Model) -> None:
        raw.DestroyResourceOp(resource=model.handle)
        model.alive = False

    def _expect_gone(self, model: Model, call: Any) -> bool:
        if model.alive:
            return False
        with pytest.raises(errors.NotFoundError):
            call()
        return True

    # --- applies ------------------------------------------------------------------

    @rule(model=accumulators, offset=st.integers(-2, 2), size=st.integers(1, 3), data=st.data())
    def apply(self, model: Model, offset: int, size: int, data: Any) -> None:
        step = model.step + offset
        np_dtype = model.dtype.numpy_dtype
        if model.kind == "dense":
            values = np.array(data.draw(st.lists(small, min_size=size, max_size=size)), np_dtype)

            def call() -> None:
                raw.ResourceAccumulatorApplyGradient(
                    handle=model.handle, local_step=step, gradient=values
                )

            if self._expect_gone(model, call):
                return
            if step < model.step:
                call()
                model.stats["stale"] += 1
                return
            if model.total is not None and model.total.shape != values.shape:
                with pytest.raises(errors.InvalidArgumentError, match="Shape mismatch"):
                    call()
                model.stats["rejected"] += 1
                return
            call()
            model.total = values.copy() if model.total is None else model.total + values
        else:
            rows = sorted(data.draw(st.sets(st.integers(0, ROWS - 1), max_size=ROWS)))
            values = np.array(
                [data.draw(st.lists(small, min_size=WIDTH, max_size=WIDTH)) for _ in rows], np_dtype
            ).reshape(len(rows), WIDTH)

            def call() -> None:
                raw.SparseAccumulatorApplyGradient(
                    handle=model.handle, local_step=step, gradient_indices=np.array(rows, np.int64),
                    gradient_values=values, gradient_shape=[ROWS, WIDTH], has_known_shape=True,
                )  # fmt: skip

            if self._expect_gone(model, call):
                return
            call()
            if step < model.step:
                model.stats["stale"] += 1
                return
            if model.total is None:
                model.total = np.zeros((ROWS, WIDTH), np_dtype)
            model.total[rows] += values
            model.touched[rows] += 1
        model.count += 1
        model.stats["accepted"] += 1

    @rule(model=accumulators, how=st.sampled_from(["dtype", "rank", "index", "none_step"]))
    def apply_bad(self, model: Model, how: str) -> None:
        np_dtype = model.dtype.numpy_dtype
        other = np.float16 if np_dtype != np.float16 else np.float32
        if model.kind == "dense":
            gradient = np.ones(
                (1, 1) if how == "rank" else 1, other if how == "dtype" else np_dtype
            )

            def call() -> None:
                raw.ResourceAccumulatorApplyGradient(
                    handle=model.handle, local_step=None if how == "none_step" else model.step,
                    gradient=gradient,
                )  # fmt: skip
        else:
            index: Any = {"index": [ROWS + 1], "rank": [[0]]}.get(how, [0])
            values = np.ones((1, WIDTH), other if how == "dtype" else np_dtype)

            def call() -> None:
                raw.SparseAccumulatorApplyGradient(
                    handle=model.handle, local_step=None if how == "none_step" else model.step,
                    gradient_indices=index, gradient_values=values, gradient_shape=[],
                    has_known_shape=False,
                )  # fmt: skip

        if self._expect_gone(model, call):
            return
        if how == "none_step":
            with pytest.raises(ValueError):
                call()
            return
        if model.kind == "dense" and how == "index":
            # a one-element gradient: fine unless the round holds another size
            if model.total is not None and model.total.shape != (1,):
                with pytest.raises(errors.InvalidArgumentError):
                    call()
                model.stats["rejected"] += 1
                return
            call()
            model.total = np.ones(1, np_dtype) if model.total is None else model.total + 1
            model.count += 1
            model.stats["accepted"] += 1
            return
        with pytest.raises(errors.InvalidArgumentError):
            call()
        if how != "dtype":  # a wrong dtype is refused by the op, before the accumulator
            model.stats["rejected"] += 1

    # --- takes and the step ---------------------------------------------------------

    @rule(model=accumulators, num_required=st.integers(1, 3))
    def take(self, model: Model, num_required: int) -> None:
        op = (
            raw.ResourceAccumulatorTakeGradient
            if model.kind == "dense"
            else raw.SparseAccumulatorTakeGradient
        )

        def call() -> Any:
            return op(handle=model.handle, num_required=num_required, dtype=model.dtype, timeout=0)

        if self._expect_gone(model, call):
            return
        if model.count < num_required:
            with pytest.raises(errors.DeadlineExceededError):
                call()
            model.stats["takes_timed_out"] += 1
            return
        result = call()
        assert model.total is not None
        if model.kind == "dense":
            expected = model.total.copy()
            if model.reduction == "MEAN":
                expected = _divide(expected, model.count)
            assert result.dtype == expected.dtype and result.shape == expected.shape
            np.testing.assert_array_equal(result, expected)
        else:
            rows = np.flatnonzero(model.touched)
            expected = model.total[rows]
            if model.reduction == "MEAN":
                expected = _divide(expected, model.touched[rows][:, None])
            assert result.indices.tolist() == rows.tolist()
            assert result.values.dtype == expected.dtype
            np.testing.assert_array_equal(result.values, expected)
            assert result.shape.tolist() == [ROWS, WIDTH]
        model.step += 1
        model.count = 0
        model.total = None
        model.touched = np.zeros(ROWS, np.int64)
        model.stats["takes_served"] += 1

    @rule(model=accumulators, step=st.integers(-3, 6))
    def set_step(self, model: Model, step: int) -> None:
        def call() -> None:
            raw.AccumulatorSetGlobalStep(handle=model.handle, new_global_step=step)

        if self._expect_gone(model, call):
            return
        call()
        model.step = step

    @precondition(lambda self: bool(self.models))
    @invariant()
    def counters_match(self) -> None:
        for model in self.models:
            if not model.alive:
                continue
            count = raw.AccumulatorNumAccumulated(handle=model.handle)
            assert count == model.count and count.dtype == np.int32
            stats = tfa.accumulator_stats(model.handle)
            assert {k: stats[k] for k in model.stats} == model.stats
            assert stats["global_step"] == model.step and stats["num_accumulated"] == model.count
            assert stats["waiting"] == 0 and stats["head_num_required"] is None

    def teardown(self) -> None:
        for model in self.models:
            if model.alive:
                raw.DestroyResourceOp(resource=model.handle)


def _divide(values: np.ndarray, count: Any) -> np.ndarray:
    """A MEAN in the accumulator's dtype: integers truncate toward zero."""
    if values.dtype.kind in "iu":
        return (np.trunc(values.astype(np.float64) / count)).astype(values.dtype)
    return (values / np.asarray(count, values.dtype)).astype(values.dtype)


AccumulatorMachine.TestCase.settings = settings(
    max_examples=100, stateful_step_count=30, deadline=None
)
TestAccumulatorMachine = AccumulatorMachine.TestCase
