"""tf.train.SyncReplicasOptimizer with worker threads sharing one Session.

Each worker has its own optimizer (its own local step) over the same
variables; the accumulators and the token queue are shared by their shared
names. The values are TensorFlow 2.21's for the same program
(tests/graph/sync_replicas_program.py, recorded in
tests/graph/sync_replicas_tensorflow.json by running it on TensorFlow) and
the hand-computed mean-of-gradients updates. Every wait is bounded.
"""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tf_accum.compat.v1 as tf
from tests.graph import sync_replicas_program as program
from tests.helpers import WAIT, wait_until
from tests.live_tensorflow import live_job, live_result
from tf_accum import errors
from tf_accum.compat.v1 import sync_replicas_optimizer as sync_module

RECORDED = json.loads(
    (Path(__file__).resolve().parent / "sync_replicas_tensorflow.json").read_text()
)
SHORT = tf.RunOptions(timeout_in_ms=1500)
# the program run on TensorFlow in a child process
_LIVE_JOB = live_job(
    "sync replicas: the program on TensorFlow", "tests.graph.sync_replicas_program"
)


@pytest.mark.background(_LIVE_JOB)
def test_tensorflow_still_gives_the_recorded_results() -> None:
    live = json.loads(live_result(_LIVE_JOB, "the recording covers it").stdout)
    assert sorted(live) == sorted(RECORDED)
    for scenario, found in live.items():
        assert found["global_step"] == RECORDED[scenario]["global_step"]
        for name in ("w", "b", "emb", "losses"):
            np.testing.assert_allclose(found[name], RECORDED[scenario][name], rtol=1e-6)


@pytest.mark.parametrize("scenario", sorted(program.SCENARIOS))
def test_training_matches_tensorflow_and_the_mean_of_the_gradients(scenario: str) -> None:
    found = program.run(tf, scenario, timeout=WAIT)
    tensorflow = RECORDED[scenario]
    assert found["global_step"] == tensorflow["global_step"] == program.STEPS
    for name in ("w", "b", "emb"):
        np.testing.assert_allclose(found[name], tensorflow[name], rtol=1e-6, atol=1e-6)
    if program.SCENARIOS[scenario][-1] == "GradientDescentOptimizer":
        by_hand = program.reference(scenario)
        for name in ("w", "b", "emb"):
            np.testing.assert_allclose(found[name], by_hand[name], rtol=1e-5, atol=1e-5)
    else:  # Adam: the sparse mean went through its sparse update (every row's moments decay)
        assert not np.allclose(found["emb"], program.initial_values()["emb"])
    np.testing.assert_allclose(found["losses"], tensorflow["losses"], rtol=1e-6, atol=1e-6)
    assert found["steps_aggregated"] == program.STEPS


def test_backup_workers_gradients_are_dropped_counted_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.INFO, logger="tf_accum"):
        backup = program.run(tf, "backup", timeout=WAIT)
        everyone = program.run(tf, "all", timeout=WAIT)
    # the lagging worker's gradient of every step is stale; the chief has seen
    # those of the steps before its last take
    assert backup["stale_gradients"] == program.STEPS - 1
    assert everyone["stale_gradients"] == 0
    dropped = [
        r.getMessage() for r in caplog.records if "stale gradient(s) dropped" in r.getMessage()
    ]
    assert len(dropped) == program.STEPS - 1
    assert "1 stale gradient(s) dropped before the update to step 2 (1 in all)" in dropped[0]


def _model(
    replicas: int, total: int | None = None, device: Any = None, **options: Any
) -> dict[str, Any]:
    """A one-variable model with a placeholder gradient and one SyncReplicasOptimizer."""
    global_step = tf.train.get_or_create_global_step()
    w = tf.Variable(np.array([1.0, 2.0], np.float32), name="w")
    grad = tf.placeholder(tf.float32, [2], name="grad")
    opt = tf.train.SyncReplicasOptimizer(
        tf.train.GradientDescentOptimizer(0.5),
        replicas_to_aggregate=replicas,
        total_num_replicas=total,
        **options,
    )
    train_op = opt.apply_gradients([(grad, w)], global_step=global_step)
    return {"opt": opt, "train_op": train_op, "w": w, "grad": grad, "global_step": global_step}


def test_what_apply_gradients_builds(graph: tf.Graph) -> None:
    with tf.device(tf.train.replica_device_setter(ps_tasks=2, worker_device="/job:worker/task:0")):
        global_step = tf.train.get_or_create_global_step()
        w = tf.Variable(np.zeros([3, 2], np.float32), name="w")
        emb = tf.Variable(np.zeros([5, 2], np.float32), name="emb")
        ids = tf.placeholder(tf.int64, [None])
        loss = tf.reduce_sum(tf.matmul(tf.ones([1, 3]), w)) + tf.reduce_sum(
            tf.nn.embedding_lookup(emb, ids)
        )
        opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.1), 2)
        train_op = opt.minimize(loss, global_step=global_step)
    assert isinstance(train_op, tf.Tensor) and train_op.dtype == tf.int64
    (local_step,) = tf.local_variables()
    assert local_step.op.name == "sync_rep_local_step"
    assert local_step.op.device == "/job:worker/task:0"
    dense, sparse = (accumulator for accumulator, _ in opt._accumulator_list)
    assert isinstance(dense, tf.ConditionalAccumulator)
    assert isinstance(sparse, tf.SparseConditionalAccumulator)
    ops = {op.name: op for op in graph.get_operations()}
    dense_op = ops["sync_replicas/conditional_accumulator"]
    assert dense_op.get_attr("shared_name") == "w:0/grad_accum"
    assert ops["sync_replicas/sparse_conditional_accumulator"].get_attr("shared_name") == (
        "emb:0/grad_accum"
    )
    # each accumulator on its variable's ps task, the token queue on the global step's
    assert dense_op.device == w.op.device
    assert ops["sync_replicas/sparse_conditional_accumulator"].device == emb.op.device
    assert ops["sync_token_q"].device == global_step.op.device
    assert ops["sync_token_q"].get_attr("shared_name") == "sync_token_q"
    assert opt.get_slot_names() == []
    assert opt.variables() == []
    assert tf.train.SyncReplicasOptimizerV2 is tf.train.SyncReplicasOptimizer


def test_bad_calls_are_refused_as_tensorflow_refuses_them(graph: tf.Graph) -> None:
    global_step = tf.train.get_or_create_global_step()
    w = tf.Variable([1.0], name="w")
    opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.1), 2, 1)
    with pytest.raises(ValueError, match="Should be called after apply_gradients"):
        opt.get_chief_queue_runner()
    with pytest.raises(ValueError, match="should be called after apply_gradients"):
        opt.get_init_tokens_op()
    with pytest.raises(ValueError, match="apply_gradient should be called before using the hook"):
        opt.make_session_run_hook(True).begin()
    with pytest.raises(ValueError, match="Must supply at least one variable"):
        opt.apply_gradients([], global_step=global_step)
    with pytest.raises(ValueError, match="Global step is required to check staleness"):
        opt.apply_gradients([(tf.constant([1.0]), w)])
    with pytest.raises(ValueError, match="Unknown grad type"):
        opt.apply_gradients([(np.ones(1, np.float32), w)], global_step=global_step)
    opt.apply_gradients([(tf.constant([1.0]), w)], global_step=global_step)
    with pytest.raises(
        ValueError, match=r"Too few tokens to finish the first step: 0 \(given\) vs 1"
    ):
        opt.get_init_tokens_op(num_tokens=0)
    assert opt.get_init_tokens_op(num_tokens=1).type == "QueueEnqueueManyV2"


def _stop(coord: tf.train.Coordinator, sess: tf.Session) -> None:
    """Stop the chief's queue runner: closing the session cancels its take."""
    coord.request_stop()
    sess.close()
    coord.join(stop_grace_period_secs=WAIT)
    # (bounded: a runner of an earlier test may still be ending on a loaded machine)
    wait_until(lambda: not _queue_runner_threads())


def _queue_runner_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("QueueRunnerThread-sync_token_q")]


def test_the_hook_initialises_adds_tokens_and_starts_the_chief(graph: tf.Graph) -> None:
    global_step = tf.train.get_or_create_global_step()
    w = tf.Variable(np.array([1.0, 2.0], np.float32), name="w")
    grad = tf.placeholder(tf.float32, [2], name="grad")
    ema = tf.train.ExponentialMovingAverage(0.5)
    opt = tf.train.SyncReplicasOptimizer(
        tf.train.GradientDescentOptimizer(0.5), 1, variable_averages=ema, variables_to_average=[w]
    )
    train_op = opt.apply_gradients([(grad, w)], global_step=global_step)
    # no initial tokens: every gradient is computed after the previous update
    chief_hook = opt.make_session_run_hook(is_chief=True, num_tokens=0)
    worker_hook = opt.make_session_run_hook(is_chief=False)
    chief_hook.begin()
    worker_hook.begin()
    average = ema.average(w)
    init = tf.global_variables_initializer()
    sess = tf.Session()
    coord = tf.train.Coordinator()
    with pytest.raises(RuntimeError, match="Variables not initialized: .*w"):
        worker_hook.after_create_session(sess, coord)
    sess.run(init)
    assert not _queue_runner_threads()
    chief_hook.after_create_session(sess, coord)
    assert len(_queue_runner_threads()) == 2  # the sync op's and close_on_stop
    for _ in range(3):
        sess.run(train_op, feed_dict={grad: [2.0, 4.0]}, options=SHORT)
    assert sess.run(global_step) == 3
    np.testing.assert_allclose(sess.run(w), [1.0 - 3 * 1.0, 2.0 - 3 * 2.0])
    # the chief averages after each update (the last one after the tokens went out)
    expected = np.array([1.0, 2.0])
    for value in ([0.0, 0.0], [-1.0, -2.0], [-2.0, -4.0]):
        expected = 0.5 * expected + 0.5 * np.array(value)
    wait_until(lambda: np.allclose(sess.run(average), expected))
    assert chief_hook.steps_aggregated == 3 and chief_hook.stale_gradients == 0
    _stop(coord, sess)


def test_a_forgotten_chief_queue_runner_is_reported(
    graph: tf.Graph, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(sync_module, "WAIT_REPORT_AFTER", 0.1)
    model = _model(2)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(model["opt"].chief_init_op)
        sess.run(model["opt"].get_init_tokens_op())
        feed = {model["grad"]: [1.0, 1.0]}
        # the initial tokens let two runs through; the third waits for the chief
        sess.run(model["train_op"], feed_dict=feed, options=SHORT)
        sess.run(model["train_op"], feed_dict=feed, options=SHORT)
        with (
            caplog.at_level(logging.WARNING, logger="tf_accum"),
            pytest.raises(errors.DeadlineExceededError),
        ):
            sess.run(model["train_op"], feed_dict=feed, options=SHORT)
        # the withdrawn dequeue took nothing and the run stopped at its deadline
        assert sess.run(model["opt"]._sync_token_queue.size()) == 0
    messages = [r.getMessage() for r in caplog.records]
    assert messages, "the wait was not reported"
    assert "waited 0 s for the chief's sync token (sync_token_q_Dequeue)" in messages[0]
    assert "nobody takes the gradients" in messages[0]
    assert "get_chief_queue_runner()" in messages[0]
    assert "3 gradient(s) waiting at step 0" in messages[0]
    # reported again after twice as long, not at every slice
    assert 2 <= len(messages) <= 5


def test_the_chief_and_the_replicas_say_which_gradients_are_missing(
    graph: tf.Graph, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(sync_module, "WAIT_REPORT_AFTER", 0.1)
    global_step = tf.train.get_or_create_global_step()
    w = tf.Variable(np.array([1.0, 2.0], np.float32), name="w")
    grad = tf.placeholder(tf.float32, [2], name="grad")
    optimizers = [
        tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.5), 2) for _ in range(2)
    ]
    train_ops = [opt.apply_gradients([(grad, w)], global_step=global_step) for opt in optimizers]
    sess = tf.Session()
    sess.run(tf.global_variables_initializer())
    sess.run(tf.local_variables_initializer())
    sess.run(optimizers[0].chief_init_op)
    coord = tf.train.Coordinator()
    optimizers[0].get_chief_queue_runner().create_threads(sess, coord=coord, start=True)
    feed = {grad: [1.0, 1.0]}
    # step 0: both replicas send, and each gets the token of step 1
    both = [
        threading.Thread(target=sess.run, args=(op,), kwargs={"feed_dict": feed, "options": SHORT})
        for op in train_ops
    ]
    for thread in both:
        thread.start()
    for thread in both:
        thread.join(WAIT)
    assert sess.run(global_step) == 1
    # step 1: only the first replica sends
    with (
        caplog.at_level(logging.WARNING, logger="tf_accum"),
        pytest.raises(errors.DeadlineExceededError),
    ):
        sess.run(train_ops[0], feed_dict=feed, options=SHORT)
    messages = [r.getMessage() for r in caplog.records]
    chief = [m for m in messages if "the chief's take" in m]
    replica = [m for m in messages if "a replica's training op" in m]
    assert chief and replica
    assert "for the gradients of step 1: 1 of replicas_to_aggregate=2 have arrived" in chief[0]
    missing = (
        "Replicas of this process: sent for step 1: sync_rep_local_step; "
        "not yet: sync_rep_local_step_1 (last at step 0)"
    )
    assert missing in chief[0]
    # the replica's first report may come before the chief's take waits (a loaded
    # machine): a later one says what the chief waits for
    chief_waits = [m for m in replica if "the chief waits for gradients of step 1" in m]
    assert chief_waits, replica
    assert "1 of replicas_to_aggregate=2" in chief_waits[0]
    assert missing in chief_waits[0]
    _stop(coord, sess)


def test_too_few_replicas_without_initial_tokens_is_reported(
    graph: tf.Graph, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(sync_module, "WAIT_REPORT_AFTER", 0.1)
    model = _model(2, total=1)
    opt = model["opt"]
    sess = tf.Session()
    sess.run(tf.global_variables_initializer())
    sess.run(opt.chief_init_op)
    coord = tf.train.Coordinator()
    opt.get_chief_queue_runner().create_threads(sess, coord=coord, start=True)
    with (
        caplog.at_level(logging.WARNING, logger="tf_accum"),
        pytest.raises(errors.DeadlineExceededError),
    ):
        sess.run(model["train_op"], feed_dict={model["grad"]: [1.0, 1.0]}, options=SHORT)
    assert "must run get_init_tokens_op()" in caplog.text
    _stop(coord, sess)
