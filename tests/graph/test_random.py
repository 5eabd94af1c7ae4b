"""Random ops against TensorFlow 2.21, bit for bit: the recorded values of the
table's random and initializer cases (tests/graph/nn_table.py) in graph
mode and eagerly, Philox-4x32-10's published test vectors, and TensorFlow's
seed rules."""

from __future__ import annotations

import numpy as np
import pytest

import tf_accum.compat.v1 as tf
from tests.graph.nn_record import RECORDED, cases_of, check_case
from tests.graph.nn_table import differences, eager_outcomes
from tf_accum import errors
from tf_accum.graph import philox
from tf_accum.graph.random_seed import DEFAULT_GRAPH_SEED


@pytest.mark.parametrize("name", cases_of("random"))
def test_random_case_gives_what_tensorflow_gives(name: str) -> None:
    check_case(name)


def test_eager_sequences_are_tensorflows() -> None:
    # one sequence: the eager global seed, op seeds drawn from it, cached kernels continuing
    try:
        found = eager_outcomes(tf, np.asarray)
    finally:
        tf.set_random_seed(None)
    assert not differences(found, RECORDED["eager"], exact=True)


def _counter(words: tuple[int, int, int, int]) -> int:
    return sum(word << (32 * i) for i, word in enumerate(words))


@pytest.mark.parametrize(
    ("counter", "key", "expected"),
    [
        ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
        (
            (0xFFFFFFFF,) * 4,
            (0xFFFFFFFF, 0xFFFFFFFF),
            (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD),
        ),
        (
            (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344),
            (0xA4093822, 0x299F31D0),
            (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1),
        ),
    ],
)
def test_philox_gives_the_published_test_vectors(
    counter: tuple[int, int, int, int], key: tuple[int, int], expected: tuple[int, ...]
) -> None:
    words = philox.philox_words(key[0] | key[1] << 32, _counter(counter), np.zeros(1, np.uint64))
    assert tuple(int(w) for w in words[0]) == expected


def test_a_random_op_continues_per_session_and_restarts_in_a_new_one(graph: tf.Graph) -> None:
    values = tf.random_normal([3], seed=11)
    with tf.Session() as session:
        first, second = session.run(values), session.run(values)
    with tf.Session() as session:
        again = session.run(values)
    assert not np.array_equal(first, second)
    np.testing.assert_array_equal(first, again)


def test_seed_rules(graph: tf.Graph) -> None:
    no_graph_seed = tf.random_uniform([2], seed=5)
    assert no_graph_seed.op.get_attr("seed") == DEFAULT_GRAPH_SEED
    assert no_graph_seed.op.get_attr("seed2") == 5
    unseeded = tf.random_uniform([2])
    assert (unseeded.op.get_attr("seed"), unseeded.op.get_attr("seed2")) == (0, 0)
    tf.set_random_seed(7)
    counted = [tf.random_uniform([2]).op for _ in range(3)]
    assert [(op.get_attr("seed"), op.get_attr("seed2")) for op in counted] == [
        (7, 0),
        (7, 1),
        (7, 2),
    ]
    tf.set_random_seed(0)
    zero = tf.random_uniform([2], seed=0).op
    assert (zero.get_attr("seed"), zero.get_attr("seed2")) == (0, 2**31 - 1)


def test_unseeded_ops_differ_between_sessions(graph: tf.Graph) -> None:
    values = tf.random_uniform([8])
    with tf.Session() as session:
        first = session.run(values)
    with tf.Session() as session:
        second = session.run(values)
    assert not np.array_equal(first, second)


def test_random_op_errors(graph: tf.Graph) -> None:
    with pytest.raises(ValueError, match="maxval"):
        tf.random_uniform([2], dtype=tf.int64)
    with pytest.raises(TypeError):
        tf.random_normal([2], dtype=tf.int32)
    with pytest.raises(TypeError):
        tf.truncated_normal([2.5])
    bad = tf.random_uniform([2], 4, 1, dtype=tf.int32)
    with tf.Session() as session, pytest.raises(errors.InvalidArgumentError, match="minval"):
        session.run(bad)


def test_a_fed_shape_is_read_when_run(graph: tf.Graph) -> None:
    shape = tf.placeholder(tf.int32, [2])
    values = tf.truncated_normal(shape, seed=1)
    assert values.shape.as_list() == [None, None]
    with tf.Session() as session:
        assert session.run(values, {shape: [2, 5]}).shape == (2, 5)


def test_truncated_normal_stays_within_two_deviations() -> None:
    values = tf.truncated_normal([20000], mean=1.0, stddev=0.5, seed=3)
    assert np.all(np.abs(values - 1.0) < 1.0)
    assert abs(float(np.mean(values)) - 1.0) < 0.02
