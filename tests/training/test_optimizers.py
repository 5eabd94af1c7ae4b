"""The TF1 optimizers against TensorFlow 2.21's recorded outcomes
(optimizer_tensorflow.json): three steps of each, dense and sparse, float16/32/64,
with the names of their slots and variables; where slots are placed; the
learning-rate schedules; ExponentialMovingAverage; minimize (once tf.gradients
exists); the errors of their arguments; the record against live TensorFlow."""

from __future__ import annotations

import importlib.util
import json
from typing import Any

import numpy as np
import pytest

import tf_accum.compat.v1 as tf
from tests.live_tensorflow import last_json_line, live_job, live_result
from tests.training import optimizer_cases
from tests.training.optimizer_cases import RECORD, cases, run_case
from tests.training.rounding import within_rounding

RECORDED: dict[str, Any] = json.loads(RECORD.read_text())
CASES = cases()


def _assert_steps_close(ours: list[Any], theirs: list[Any], dtype: str) -> None:
    assert len(ours) == len(theirs)
    for mine, recorded in zip(ours, theirs, strict=True):
        if isinstance(mine, dict):
            assert mine.keys() == recorded.keys()
            for name in mine:
                kind = "int64" if name == "global_step:0" else dtype
                assert within_rounding(mine[name], recorded[name], kind), name
        else:
            assert within_rounding(mine, recorded, dtype)


@pytest.mark.parametrize("case_id", sorted(CASES))
def test_steps_slots_and_names_are_tensorflows(case_id: str) -> None:
    ours = run_case(tf, CASES[case_id])
    theirs = RECORDED["cases"][case_id]
    assert ours["train_op"] == theirs["train_op"]
    assert ours["optimizer_variables"] == theirs["optimizer_variables"]
    assert ours["slots"] == theirs["slots"]
    _assert_steps_close(ours["steps"], theirs["steps"], CASES[case_id]["dtype"])


def test_the_record_holds_every_case() -> None:
    assert set(RECORDED["cases"]) == set(CASES)
    assert {CASES[k]["sparse"] for k in CASES} == {False, True}


def test_slots_live_on_their_variables_ps_task() -> None:
    assert optimizer_cases.placement(tf) == RECORDED["placement"]


def test_schedules_are_tensorflows() -> None:
    ours = optimizer_cases.schedules(tf)
    assert ours.keys() == RECORDED["schedules"].keys()
    for key, found in ours.items():
        theirs = RECORDED["schedules"][key]
        assert found["dtype"] == theirs["dtype"], key
        assert within_rounding(found["values"], theirs["values"], found["dtype"]), key


def test_moving_averages_are_tensorflows() -> None:
    ours = optimizer_cases.moving_averages(tf)
    for key, found in ours.items():
        theirs = RECORDED["moving_averages"][key]
        assert found["names"] == theirs["names"]
        assert found["update"] == theirs["update"]
        assert found["restore"] == theirs["restore"]
        for mine, recorded in zip(found["steps"], theirs["steps"], strict=True):
            assert within_rounding(mine[0], recorded[0], "float32")
            assert within_rounding(mine[1], recorded[1], "float64")


def test_minimize_is_tensorflows_once_gradients_exist() -> None:
    if importlib.util.find_spec("tf_accum.graph.gradients") is None:
        pytest.skip("tf.gradients (tf_accum/graph/gradients.py) is not in this tree yet")
    ours = optimizer_cases.minimize(tf)
    for key, found in ours.items():
        theirs = RECORDED["minimize"][key]
        assert found["train_op"] == theirs["train_op"]
        _assert_steps_close(found["steps"], theirs["steps"], "float32")


def test_eager_steps_are_the_graphs() -> None:
    for key in ("adam-dense-float32", "adam-sparse-float32", "momentum-sparse-float32"):
        case = CASES[key]
        w = tf.Variable(np.asarray(case["w"], np.float32), name="w")
        b = tf.Variable(np.asarray(case["b"], np.float32), name="b")
        step = tf.Variable(np.int64(0), name="global_step")
        optimizer = eval(case["optimizer"], {"tf": tf})
        for given in case["steps"]:
            grad_w: Any = np.asarray(given["w"], np.float32)
            if case["sparse"]:
                grad_w = tf.IndexedSlices(grad_w, np.asarray(given["indices"]))
            optimizer.apply_gradients(
                [(grad_w, w), (np.asarray(given["b"], np.float32), b)], global_step=step
            )
        last = RECORDED["cases"][key]["steps"][-1]
        assert within_rounding(w.numpy(), last["w:0"], "float32"), key
        assert within_rounding(b.numpy(), last["b:0"], "float32"), key
        assert int(step.numpy()) == 3


@pytest.mark.usefixtures("graph")
def test_apply_gradients_refuses_what_tensorflow_refuses() -> None:
    w = tf.Variable([1.0, 2.0], name="w")
    optimizer = tf.train.GradientDescentOptimizer(0.1)
    with pytest.raises(ValueError, match=r"^No variables provided\.$"):
        optimizer.apply_gradients([])
    with pytest.raises(ValueError, match=r"^No gradients provided for any variable: "):
        optimizer.apply_gradients([(None, w)])
    with pytest.raises(NotImplementedError, match="Trying to update a Tensor"):
        optimizer.apply_gradients([(tf.constant([1.0, 1.0]), tf.constant([1.0, 2.0]))])
    with pytest.raises(TypeError, match="Gradient must be convertible to a Tensor"):
        optimizer.apply_gradients([(object(), w)])
    with pytest.raises(TypeError, match="Input 'delta' of 'ResourceApplyGradientDescent' Op has"):
        optimizer.apply_gradients([("not a number", w)])
    with pytest.raises(ValueError, match=r"^gate_gradients must be one of"):
        optimizer.compute_gradients(tf.reduce_sum(w), gate_gradients=7)
    with pytest.raises(ValueError, match=r"^Invalid type tf_accum.int32 for"):
        optimizer.compute_gradients(tf.constant(1))
    with pytest.raises(ValueError, match=r"^No variables to optimize\.$"):
        optimizer.compute_gradients(tf.reduce_sum(w), var_list=[])
    assert tf.get_collection(tf.GraphKeys.TRAIN_OP) == []


def test_names_in_name_scopes_are_tensorflows() -> None:
    assert optimizer_cases.name_scopes(tf) == RECORDED["name_scopes"]


def test_arguments_and_defaults_are_tensorflows() -> None:
    assert optimizer_cases.signatures(tf) == RECORDED["signatures"]


def test_compute_gradients_needs_a_graph() -> None:
    optimizer = tf.train.GradientDescentOptimizer(0.1)
    w = tf.Variable([1.0, 2.0])
    with pytest.raises(NotImplementedError, match="need graph mode in tf_accum"):
        optimizer.minimize(lambda: w.numpy().sum(), var_list=[w])


def test_constructors_refuse_what_tensorflow_refuses() -> None:
    with pytest.raises(ValueError, match=r"^initial_accumulator_value must be positive: 0\.0$"):
        tf.train.AdagradOptimizer(0.1, initial_accumulator_value=0.0)
    with pytest.raises(ValueError, match=r"^learning_rate_power 0\.500000 needs to be negative"):
        tf.train.FtrlOptimizer(0.1, learning_rate_power=0.5)
    with pytest.raises(ValueError, match=r"^l1_regularization_strength -1\.000000 needs"):
        tf.train.FtrlOptimizer(0.1, l1_regularization_strength=-1.0)
    with pytest.raises(ValueError, match="global_step is required for exponential_decay"):
        tf.train.exponential_decay(0.1, None, 10, 0.9)
    with pytest.raises(ValueError, match="length of boundaries should be 1 less"):
        tf.train.piecewise_constant(1, [1, 2], [1.0, 2.0])
    with pytest.raises(NotImplementedError, match="zero_debias"):
        tf.train.ExponentialMovingAverage(0.9, zero_debias=True)


@pytest.mark.usefixtures("graph")
def test_slots_variables_and_the_train_op_collection() -> None:
    w = tf.Variable(np.zeros((2, 2), np.float32), name="w")
    optimizer = tf.train.MomentumOptimizer(0.1, 0.9)
    assert optimizer.get_slot(w, "momentum") is None and optimizer.get_slot_names() == []
    train = optimizer.apply_gradients([(np.ones((2, 2), np.float32), w)])
    slot = optimizer.get_slot(w, "momentum")
    assert slot is not None and slot.name == "w/Momentum:0" and not slot.trainable
    assert optimizer.get_slot_names() == ["momentum"]
    assert optimizer.variables() == [slot]
    assert slot in tf.global_variables() and slot not in tf.trainable_variables()
    assert tf.get_collection(tf.GraphKeys.TRAIN_OP) == [train]
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(train)
        sess.run(train)
        assert sess.run(slot).tolist() == [[np.float32(1.9)] * 2] * 2


# TensorFlow's outcomes today, found in a child process
_LIVE_JOB = live_job(
    "optimizers: TensorFlow's outcomes", "tests.training.optimizer_cases", timeout=900
)


@pytest.mark.background(_LIVE_JOB)
def test_the_record_is_what_tensorflow_gives_today() -> None:
    assert last_json_line(live_result(_LIVE_JOB)) == RECORDED


def test_repeated_rows_are_summed_as_tensorflow_sums_them() -> None:
    # Unique, then UnsortedSegmentSum over shape(unique)[0], before the sparse update
    from tf_accum.graph.array_ops import unique

    with tf.Graph().as_default() as graph:
        table = tf.Variable(np.zeros((4, 2), np.float32))
        rows = tf.constant([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
        grad = tf.IndexedSlices(rows, tf.constant([2, 0, 2]), tf.constant([4, 2]))
        train = tf.train.AdagradOptimizer(1.0).apply_gradients([(grad, table)])
        types = {op.type for op in graph.get_operations()}
        assert {"Unique", "UnsortedSegmentSum", "Shape", "StridedSlice"} <= types
        distinct, positions = unique(tf.constant([7, 7, 2, 9, 2], tf.int64))
        assert (distinct.dtype, positions.dtype) == (tf.int64, tf.int32)
        assert (distinct.shape.as_list(), positions.shape.as_list()) == ([None], [5])
        with pytest.raises(ValueError, match="must be rank 1"):
            unique(tf.constant([[1, 2]]))
        with tf.Session() as session:
            session.run(tf.global_variables_initializer())
            session.run(train)
            found = session.run(table)
            assert session.run(distinct).tolist() == [7, 2, 9]
            assert session.run(positions).tolist() == [0, 0, 1, 2, 1]
    # Adagrad's first step from an accumulator of 0.1: -g / sqrt(0.1 + g * g) of the sum g
    summed = np.array([[3.0, 4.0], [0.0, 0.0], [6.0, 8.0], [0.0, 0.0]])
    np.testing.assert_allclose(found, -summed / np.sqrt(0.1 + summed * summed), rtol=1e-6)


# op types of each schedule's graph, and its result's (type, name), as TensorFlow 2.21 builds them
SCHEDULE_GRAPHS = {
    "tf.train.exponential_decay(0.1, step, 3, 0.5, staircase=True)": (
        ("Mul", "ExponentialDecay"),
        {"Cast", "Const", "Floor", "Mul", "Pow", "RealDiv"},
    ),
    "tf.train.polynomial_decay(0.1, step, 3, cycle=True)": (
        ("AddV2", "PolynomialDecay"),
        {"AddV2", "Cast", "Ceil", "Const", "Equal", "Mul", "Pow", "RealDiv", "SelectV2", "Sub"},
    ),
    "tf.train.polynomial_decay(0.1, step, 4, end_learning_rate=0.01, power=2.0)": (
        ("AddV2", "PolynomialDecay"),
        {"AddV2", "Cast", "Const", "Minimum", "Mul", "Pow", "RealDiv", "Sub"},
    ),
    # TensorFlow: a case of conditionals (departure T31); the comparisons are its
    "tf.train.piecewise_constant(step, [2, 4], [1.0, 0.5, 0.25])": (
        ("SelectV2", "PiecewiseConstant"),
        {"Cast", "Const", "Greater", "LessEqual", "LogicalAnd", "SelectV2"},
    ),
}


@pytest.mark.parametrize("expression", sorted(SCHEDULE_GRAPHS))
def test_schedules_are_built_from_tensorflows_math_ops(expression: str) -> None:
    result, types = SCHEDULE_GRAPHS[expression]
    with tf.Graph().as_default() as graph:
        step = tf.train.get_or_create_global_step()
        before = {op.type for op in graph.get_operations()}
        rate = eval(expression, {"tf": tf, "step": step})
        made = {op.type for op in graph.get_operations()} - before
    assert (rate.op.type, rate.op.name) == result
    assert made | {"Const"} == types | {"Const"}


def test_eager_schedules_follow_the_step() -> None:
    step = tf.Variable(np.int64(0))
    exponential = tf.train.exponential_decay(0.1, step, 3, 0.5, staircase=True)
    piecewise = tf.train.piecewise_constant(step, [2, 4], [1.0, 0.5, 0.25])
    polynomial = tf.train.polynomial_decay(0.1, step, 3, cycle=True)
    found = []
    for value in (0, 3, 5):
        step.assign(np.int64(value))
        found.append((float(exponential()), float(piecewise()), float(polynomial())))
        assert np.asarray(exponential()).dtype == np.float32
    expected = [(0.1, 1.0, 0.1), (0.05, 0.5, 0.0001), (0.05, 0.25, 0.0001 + 0.0999 / 6)]
    np.testing.assert_allclose(found, expected, rtol=1e-6)
