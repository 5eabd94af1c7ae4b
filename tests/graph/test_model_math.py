"""Model math in graph mode and eagerly (matmul, elementwise ops, reductions,
array ops, indexing), with each op's gradient, against TensorFlow 2.21.

The table (tests/graph/model_table.py) holds the cases; model_tensorflow.json
holds TensorFlow's outcomes of each (values, dtypes, static shapes, op types,
error classes and the gradients with respect to every float input); a test
checks that record against a live TensorFlow when one is installed.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

import tf_accum.compat.v1 as tf
from tests.graph.model_table import (
    CASES,
    EAGER_CASES,
    RECORD,
    eager_outcome,
    outcome,
    same_outcome,
)
from tests.live_tensorflow import live_job, live_result
from tf_accum import errors

RECORDED: dict[str, dict[str, Any]] = json.loads(RECORD.read_text())
MATH_CASES = [case for case in CASES if not case.startswith("G(")]


@pytest.mark.parametrize("case", MATH_CASES)
def test_graph_case_gives_what_tensorflow_gives(case: str) -> None:
    found = outcome(tf, case)
    assert same_outcome(RECORDED["graph"][case], found), (RECORDED["graph"][case], found)


@pytest.mark.parametrize("case", EAGER_CASES)
def test_eager_case_gives_what_tensorflow_gives(case: str) -> None:
    found = eager_outcome(tf, case)
    assert same_outcome(RECORDED["eager"][case], found), (RECORDED["eager"][case], found)


def test_the_record_holds_every_case_and_checks_gradients_and_errors() -> None:
    assert set(RECORDED["graph"]) == set(CASES)
    assert set(RECORDED["eager"]) == set(EAGER_CASES)
    outcomes = list(RECORDED["graph"].values())
    with_gradients = [o for o in outcomes if o.get("grads")]
    assert len(with_gradients) > 250
    assert sum("error" in o for o in outcomes) >= 20
    assert sum("run_error" in o for o in outcomes) >= 10
    sparse = [g for o in with_gradients for g in o["grads"] if g and "indices" in g]
    assert len(sparse) >= 5
    dtypes = {g["dtype"] for o in with_gradients for g in o["grads"] if g}
    assert {"float16", "float32", "float64"} <= dtypes


def test_the_comparison_tells_a_wrong_value_or_gradient_apart() -> None:
    case = (
        "tf.multiply(P('float32', [[1.5, -2.0, 0.5], [3.0, 0.25, -1.0]]), "
        "P('float32', [2.0, -1.0, 0.5]))"
    )
    want = RECORDED["graph"][case]
    found = outcome(tf, case)
    assert same_outcome(want, found)
    off_by_a_bit = json.loads(json.dumps(found))
    off_by_a_bit["grads"][1]["value"][0] += 1e-3
    assert not same_outcome(want, off_by_a_bit)
    off_by_a_bit = json.loads(json.dumps(found))
    off_by_a_bit["value"][2] *= 1.001
    assert not same_outcome(want, off_by_a_bit)


# TensorFlow's outcomes today compared with the record, in a child process
_LIVE_JOB = live_job("model table: TensorFlow's outcomes", "tests.graph.model_table")


@pytest.mark.background(_LIVE_JOB)
def test_the_record_is_what_tensorflow_gives_today() -> None:
    live_result(_LIVE_JOB)


# --- behaviour beyond the table -------------------------------------------------


def test_model_math_acts_at_once_eagerly() -> None:
    assert tf.executing_eagerly()
    product = tf.matmul(np.eye(2, dtype=np.float32), np.array([[1.0], [2.0]], np.float32))
    assert isinstance(product, np.ndarray) and product.dtype == np.float32
    assert product.tolist() == [[1.0], [2.0]]
    row = np.arange(6.0).reshape(2, 3)
    assert tf.reduce_max(row, axis=1).tolist() == [2.0, 5.0]
    assert tf.argmax(row, 1).dtype == np.int64
    assert tf.concat([row, row], 0).shape == (4, 3)


def test_a_list_holding_tensors_is_packed(graph: tf.Graph) -> None:
    first = tf.placeholder(tf.float32, [2])
    mean = tf.reduce_mean([first, first * 3.0], axis=0)
    assert mean.op.inputs[0].op.type == "Pack" and mean.shape.as_list() == [2]
    total = tf.add([first, first], 1.0)
    with tf.Session() as sess:
        assert sess.run(mean, {first: [1.0, 2.0]}).tolist() == [2.0, 4.0]
        assert sess.run(total, {first: [1.0, 2.0]}).tolist() == [[2.0, 3.0], [2.0, 3.0]]


def test_indexing_builds_a_strided_slice_and_iterates_a_known_first_dimension(
    graph: tf.Graph,
) -> None:
    matrix = tf.placeholder(tf.float32, [2, 3])
    assert matrix[1].op.type == "StridedSlice"
    rows = list(matrix)
    assert len(rows) == 2 and rows[0].shape.as_list() == [3]
    unknown = tf.placeholder(tf.float32, [None, 3])
    with pytest.raises(TypeError, match="only iterable"):
        list(unknown)
    with pytest.raises(TypeError, match="valid indices"):
        matrix["a"]
    with tf.Session() as sess:
        value = np.arange(6.0, dtype=np.float32).reshape(2, 3)
        assert sess.run(matrix[:, 1:], {matrix: value}).tolist() == [[1.0, 2.0], [4.0, 5.0]]
        with pytest.raises(errors.InvalidArgumentError, match="out of bounds"):
            sess.run(unknown[5], {unknown: value})


def test_a_variable_can_be_indexed_and_multiplied(graph: tf.Graph) -> None:
    weights = tf.Variable(np.arange(6.0, dtype=np.float32).reshape(2, 3))
    picked = weights[1, ::2]
    product = tf.matmul(weights, weights, transpose_b=True)
    with tf.Session() as sess:
        sess.run(weights.initializer)
        assert sess.run(picked).tolist() == [3.0, 5.0]
        assert sess.run(product).tolist() == [[5.0, 14.0], [14.0, 50.0]]


def test_gather_from_a_variable_reads_only_its_rows(graph: tf.Graph) -> None:
    table = tf.Variable(np.arange(8.0, dtype=np.float32).reshape(4, 2))
    rows = tf.gather(table, [3, 1])
    assert rows.op.type == "ResourceGather"
    with tf.Session() as sess:
        sess.run(table.initializer)
        assert sess.run(rows).tolist() == [[6.0, 7.0], [2.0, 3.0]]
        with pytest.raises(errors.InvalidArgumentError, match=r"indices\[0\] = 4 is not in"):
            sess.run(tf.gather(table, [4]))
