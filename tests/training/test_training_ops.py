"""TensorFlow's training ops (``ResourceApplyAdam``, ``ResourceSparseApplyAdagrad``, ...):
three steps of each, dense and sparse, float16/32/64, eagerly and in graph mode,
against TensorFlow 2.21's recorded outcomes (op_tensorflow.json); their errors;
the ref forms; and the record against live TensorFlow when it is installed."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

import tf_accum as tfa
import tf_accum.compat.v1 as tf
from tests.live_tensorflow import last_json_line, live_job, live_result
from tests.training.op_cases import ERROR_CASES, RECORD, cases, run_case, run_error_case
from tests.training.rounding import numpy_dtype, within_rounding
from tf_accum import errors
from tf_accum.raw_ops.training import TRAINING_OPS

RECORDED: dict[str, Any] = json.loads(RECORD.read_text())
CASES = cases()


def _assert_close(ours: list[dict[str, Any]], case_id: str) -> None:
    dtype = numpy_dtype(CASES[case_id]["dtype"])
    theirs = RECORDED["cases"][case_id]
    assert len(ours) == len(theirs)
    for step, (mine, recorded) in enumerate(zip(ours, theirs, strict=True)):
        assert mine.keys() == recorded.keys()
        for name in mine:
            assert within_rounding(mine[name], recorded[name], dtype), (step, name)


@pytest.mark.parametrize("case_id", sorted(CASES))
def test_eager_steps_give_what_tensorflow_gives(case_id: str) -> None:
    _assert_close(run_case(tf, tfa.raw_ops, CASES[case_id]), case_id)


def _run_in_graph(case: dict[str, Any]) -> list[dict[str, Any]]:
    """The case in graph mode: the op built once, each step a Session.run feeding grad."""
    spec = TRAINING_OPS[case["op"]]
    dtype = numpy_dtype(case["dtype"])
    with tf.Graph().as_default():
        variables = {
            name: tf.Variable(np.asarray(value, dtype)) for name, value in case["initial"].items()
        }
        grad = tf.placeholder(case["dtype"], name="grad")
        indices = tf.placeholder(tf.int64, [None], name="indices")
        kwargs: dict[str, Any] = {name: variables[name].handle for name in spec.variables}
        kwargs.update({k: np.asarray(v, dtype) for k, v in case["scalars"].items()})
        kwargs[spec.gradient] = grad
        if spec.sparse:
            kwargs["indices"] = indices
        op = getattr(tfa.raw_ops, case["op"])(**kwargs, **case["attrs"])
        assert isinstance(op, tf.Operation) and op.type == case["op"]
        outcome = []
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            for step in case["steps"]:
                feed = {grad: np.asarray(step["grad"], dtype)}
                if spec.sparse:
                    feed[indices] = step["indices"]
                sess.run(op, feed)
                values = sess.run(variables)
                outcome.append({k: v.astype(np.float64).tolist() for k, v in values.items()})
    return outcome


@pytest.mark.parametrize("case_id", sorted(k for k in CASES if k.endswith("float32")))
def test_graph_steps_give_what_tensorflow_gives(case_id: str) -> None:
    _assert_close(_run_in_graph(CASES[case_id]), case_id)


@pytest.mark.parametrize("case_id", sorted(ERROR_CASES))
def test_errors_are_tensorflows_and_change_nothing(case_id: str) -> None:
    outcome = run_error_case(tf, tfa.raw_ops, ERROR_CASES[case_id])
    assert outcome == RECORDED["errors"][case_id]
    assert outcome["error"] == "InvalidArgumentError" and outcome["unchanged"]


def test_the_record_holds_every_case() -> None:
    assert set(RECORDED["cases"]) == set(CASES)
    assert set(RECORDED["errors"]) == set(ERROR_CASES)
    # every dense and sparse op of the optimizers is covered, in three dtypes
    covered = {CASES[k]["op"] for k in CASES}
    assert covered == {name for name in TRAINING_OPS if name.startswith("Resource")}


def test_sparse_ops_update_a_repeated_row_twice_and_no_other_row() -> None:
    var = tf.Variable(np.zeros((3, 2), np.float32))
    accum = tf.Variable(np.full((3, 2), 0.1, np.float32))
    tfa.raw_ops.ResourceSparseApplyMomentum(
        var=var.handle,
        accum=accum.handle,
        lr=np.float32(0.5),
        grad=np.ones((2, 2), np.float32),
        indices=[1, 1],
        momentum=np.float32(0.9),
    )
    first = np.float32(0.1) * np.float32(0.9) + np.float32(1)
    second = first * np.float32(0.9) + np.float32(1)
    assert accum.numpy()[1].tolist() == [second, second]
    assert accum.numpy()[[0, 2]].tolist() == [[np.float32(0.1)] * 2] * 2
    assert var.numpy()[1, 0] == -(first * np.float32(0.5)) - second * np.float32(0.5)
    assert var.numpy()[[0, 2]].tolist() == [[0, 0], [0, 0]]


def test_ref_forms_build_only_and_give_the_new_value() -> None:
    v = tf.Variable([1.0, 2.0])
    with pytest.raises(
        RuntimeError,
        match=r"^apply_gradient_descent op does not support eager execution\. Arg 'out' is a ref\.$",
    ):
        tfa.raw_ops.ApplyGradientDescent(var=v, alpha=0.1, delta=[1.0, 1.0])
    assert v.numpy().tolist() == [1, 2]
    with tf.Graph().as_default():
        w = tf.Variable([1.0, 2.0])
        out = tfa.raw_ops.ApplyGradientDescent(var=w, alpha=0.5, delta=[1.0, 2.0])
        assert out.dtype == tf.float32 and out.shape.as_list() == [2]
        with tf.Session() as sess:
            sess.run(w.initializer)
            assert sess.run(out).tolist() == [0.5, 1.0]
            assert sess.run(out).tolist() == [0.0, 0.0]


def test_positional_calls_and_other_dtypes_are_refused() -> None:
    v = tf.Variable([1.0, 2.0])
    with pytest.raises(TypeError, match=r"^resource_apply_gradient_descent only takes keyword"):
        tfa.raw_ops.ResourceApplyGradientDescent(v.handle, 0.1, [1.0, 1.0])  # type: ignore[call-arg]
    with pytest.raises(errors.InvalidArgumentError, match="type double that does not match"):
        tfa.raw_ops.ResourceApplyGradientDescent(
            var=v.handle, alpha=0.1, delta=np.array([1.0, 1.0])
        )
    with pytest.raises(errors.InvalidArgumentError, match="No OpKernel was registered"):
        tfa.raw_ops.ResourceApplyGradientDescent(
            var=tf.Variable([1, 2]).handle, alpha=1, delta=[1, 1]
        )
    with pytest.raises(
        errors.InvalidArgumentError,
        match="No OpKernel was registered to support Op 'ResourceSparseApplyRMSProp'",
    ):
        rows = tf.Variable(np.ones((2, 2), tfa.bfloat16.numpy_dtype))
        tfa.raw_ops.ResourceSparseApplyRMSProp(
            var=rows.handle,
            ms=rows.handle,
            mom=rows.handle,
            lr=1,
            rho=1,
            momentum=1,
            epsilon=1,
            grad=[[1, 1]],
            indices=[0],
        )
    with pytest.raises(ValueError, match="must be a variable's handle"):
        tfa.raw_ops.ResourceApplyGradientDescent(var=[1.0, 2.0], alpha=0.1, delta=[1.0, 1.0])
    assert v.numpy().tolist() == [1, 2]


def test_graph_build_checks_dtypes_and_static_shapes() -> None:
    with tf.Graph().as_default():
        v = tf.Variable([1.0, 2.0])
        with pytest.raises(TypeError, match="has type float64 that does not match type float32"):
            tfa.raw_ops.ResourceApplyGradientDescent(
                var=v.handle, alpha=0.1, delta=tf.constant([1.0, 1.0], tf.float64)
            )
        with pytest.raises(ValueError, match="^Shape must be rank 0 but is rank 1 for"):
            tfa.raw_ops.ResourceApplyGradientDescent(var=v.handle, alpha=[0.1], delta=[1.0, 1.0])
        with pytest.raises(ValueError, match="Dimension 0 in both shapes must be equal"):
            tfa.raw_ops.ResourceApplyGradientDescent(var=v.handle, alpha=0.1, delta=[1.0])
        with pytest.raises(TypeError, match="must be a variable's handle"):
            tfa.raw_ops.ResourceApplyGradientDescent(
                var=tf.constant([1.0, 2.0]), alpha=0.1, delta=[1.0, 1.0]
            )
        grad = tf.placeholder(tf.float32)
        op = tfa.raw_ops.ResourceApplyGradientDescent(var=v.handle, alpha=0.1, delta=grad)
        with tf.Session() as sess:
            with pytest.raises(errors.FailedPreconditionError):
                sess.run(op, {grad: [1.0, 1.0]})
            sess.run(v.initializer)
            with pytest.raises(
                errors.InvalidArgumentError, match=r"var and delta do not have the same shape"
            ):
                sess.run(op, {grad: [1.0, 1.0, 1.0]})
            assert sess.run(v).tolist() == [1, 2]


# TensorFlow's outcomes today, found in a child process
_LIVE_JOB = live_job("training ops: TensorFlow's outcomes", "tests.training.op_cases")


@pytest.mark.background(_LIVE_JOB)
def test_the_record_is_what_tensorflow_gives_today() -> None:
    assert last_json_line(live_result(_LIVE_JOB)) == RECORDED
