"""MonitoredTrainingSession, MonitoredSession, Scaffold and SessionManager, as TensorFlow's.

The expected values were recorded by running the same programs on
TensorFlow 2.21 (``tensorflow.compat.v1``): losses, the order hooks are
called in, the steps checkpoints and summaries are written at.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tf_accum.compat.v1 as tf
from tests.graph.tensorflow_monitored import record
from tests.graph.test_hooks import events_in
from tests.live_tensorflow import last_json_line, live_job, live_result
from tf_accum import errors

# TensorFlow 2.21, the program of _regression below: five steps, then three more
# after a restart from the checkpoint
TF_LOSSES = [0.5299999713897705, 0.13220000267028809, 0.03535298630595207]
TF_LOSSES += [0.011742954142391682, 0.005955583415925503]
TF_WEIGHTS_AFTER_8 = [[0.1992863118648529], [0.3611907660961151]]
TF_CALLS = ["c.begin", "a.begin", "c.create", "a.create"]
for _loss in ["0.5300", "0.1322", "0.0354", "0.0117", "0.0060"]:
    TF_CALLS += ["c.before", "a.before", f"c.after:{_loss}", f"a.after:{_loss}"]
TF_CALLS += ["c.end", "a.end"]


class Recorder(tf.train.SessionRunHook):
    """Records each call, and fetches the loss."""

    def __init__(self, name: str, calls: list[str], loss: Any) -> None:
        self.name, self.calls, self.loss = name, calls, loss

    def begin(self) -> None:
        self.calls.append(f"{self.name}.begin")

    def after_create_session(self, session: Any, coord: Any) -> None:
        self.calls.append(f"{self.name}.create")

    def before_run(self, run_context: Any) -> Any:
        self.calls.append(f"{self.name}.before")
        return tf.train.SessionRunArgs(self.loss)

    def after_run(self, run_context: Any, run_values: Any) -> None:
        self.calls.append(f"{self.name}.after:{run_values.results:.4f}")

    def end(self, session: Any) -> None:
        self.calls.append(f"{self.name}.end")


def _regression() -> tuple[Any, Any, Any, Any, Any]:
    g = tf.Graph()
    with g.as_default():
        step = tf.train.get_or_create_global_step()
        x = tf.constant([[1.0, 2.0], [3.0, 4.0]])
        y = tf.constant([[1.0], [2.0]])
        w = tf.Variable([[0.1], [0.2]], name="w")
        loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y))
        tf.summary.scalar("loss", loss)
        train = tf.train.GradientDescentOptimizer(0.05).minimize(loss, global_step=step)
    return g, step, w, loss, train


def test_training_stops_at_the_step_checkpoints_and_resumes_as_tensorflow(tmp_path: Path) -> None:
    g, step, w, loss, train = _regression()
    calls: list[str] = []
    losses = []
    with g.as_default():
        with tf.train.MonitoredTrainingSession(
            checkpoint_dir=str(tmp_path),
            hooks=[tf.train.StopAtStepHook(last_step=5), Recorder("a", calls, loss)],
            chief_only_hooks=[Recorder("c", calls, loss)],
            save_summaries_steps=2,
        ) as sess:
            assert g.finalized
            while not sess.should_stop():
                _, value = sess.run([train, loss])
                losses.append(float(value))
        assert not g.finalized  # as it was before the session
    assert losses == pytest.approx(TF_LOSSES, rel=1e-6)
    assert calls == TF_CALLS
    assert tf.train.latest_checkpoint(str(tmp_path)) == str(tmp_path / "model.ckpt-5")

    # a new program on the same directory restores the chief's checkpoint
    g, step, w, loss, train = _regression()
    with (
        g.as_default(),
        tf.train.MonitoredTrainingSession(
            checkpoint_dir=str(tmp_path), hooks=[tf.train.StopAtStepHook(num_steps=3)]
        ) as sess,
    ):
        assert sess.run(step) == 5
        while not sess.should_stop():
            _, weights = sess.run([train, w])
    np.testing.assert_allclose(weights, TF_WEIGHTS_AFTER_8, rtol=1e-6)
    assert tf.train.latest_checkpoint(str(tmp_path)) == str(tmp_path / "model.ckpt-8")
    assert tf.train.load_variable(str(tmp_path), "global_step") == 8


def test_summaries_and_checkpoints_are_written_at_tensorflows_steps(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")

    g = tf.Graph()
    with g.as_default():
        step = tf.train.get_or_create_global_step()
        w = tf.Variable(1.0, name="w")
        loss = w * w
        tf.summary.scalar("loss", loss)
        train = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step)
        with tf.train.MonitoredTrainingSession(
            checkpoint_dir=str(tmp_path),
            hooks=[tf.train.StopAtStepHook(num_steps=5)],
            save_summaries_steps=2,
            log_step_count_steps=None,
            save_checkpoint_steps=3,
        ) as sess:
            while not sess.should_stop():
                sess.run(train)
    # TensorFlow 2.21's files once its program has ended (status 1 is START, 3
    # CHECKPOINT); tf_accum has written them all when the session closes
    assert events_in(tmp_path) == [
        [0, ["__run_graph__"]],
        [0, ["__run_graph__"]],
        [0, 3],
        [1, 1],
        [1, ["loss"]],
        [3, ["loss"]],
        [3, 3],
        [5, ["loss"]],
        [5, 3],
    ]
    indexes = sorted(p.name for p in tmp_path.glob("model.ckpt-*.index"))
    assert indexes == ["model.ckpt-0.index", "model.ckpt-3.index", "model.ckpt-5.index"]


def test_default_scaffold_ops_and_finalize(graph: Any) -> None:
    step = tf.train.get_or_create_global_step()
    local = tf.Variable(3, name="local", collections=[tf.GraphKeys.LOCAL_VARIABLES])
    scaffold = tf.train.Scaffold()
    assert scaffold.init_op is None and scaffold.saver is None
    assert scaffold.finalize() is scaffold
    assert graph.finalized
    for op, key in [
        (scaffold.init_op, "init_op"),
        (scaffold.ready_op, "ready_op"),
        (scaffold.ready_for_local_init_op, "ready_for_local_init_op"),
        (scaffold.local_init_op, "local_init_op"),
        (scaffold.saver, "savers"),
    ]:
        assert graph.get_collection(key) == [op]
    assert scaffold.summary_op is None  # no summaries: merge_all gives None
    with tf.Session() as sess:
        assert sess.run(scaffold.ready_op).tolist() == [b"global_step", b"local"]
        assert sess.run(scaffold.ready_for_local_init_op).tolist() == [b"global_step"]
        sess.run(scaffold.init_op)
        assert sess.run(scaffold.ready_op).tolist() == [b"local"]
        sess.run(scaffold.local_init_op)
        assert sess.run(scaffold.ready_op).size == 0
        assert sess.run([step, local]) == [0, 3]


def test_scaffold_init_fn_gets_the_scaffold_and_feeds_are_used(graph: Any) -> None:
    tf.train.get_or_create_global_step()
    start = tf.placeholder(tf.float32, [])
    v = tf.Variable(start, name="v")
    seen = []
    scaffold = tf.train.Scaffold(
        init_feed_dict={start: 2.5}, init_fn=lambda sc, sess: seen.append((sc, sess.run(v)))
    )
    with tf.train.SingularMonitoredSession(scaffold=scaffold) as sess:
        assert sess.run(v) == 2.5
        assert seen == [(scaffold, 2.5)]
        assert sess.raw_session().run(v) == 2.5


def test_two_items_in_a_collection_are_refused(graph: Any) -> None:
    tf.train.get_or_create_global_step()
    graph.add_to_collection("init_op", tf.no_op())
    graph.add_to_collection("init_op", tf.no_op())
    with pytest.raises(RuntimeError, match='More than one item in the collection "init_op"'):
        tf.train.Scaffold().finalize()


def test_hook_errors_and_messages_are_tensorflows(graph: Any) -> None:
    cases = [
        (lambda: tf.train.StopAtStepHook(), "One of num_steps or last_step must be specified."),
        (lambda: tf.train.StopAtStepHook(1, 2), "Only one of num_steps or last_step can be"),
        (
            lambda: tf.train.LoggingTensorHook([], every_n_iter=1, every_n_secs=1),
            "either at_end and/or exactly one of every_n_iter and every_n_secs must be provided.",
        ),
        (lambda: tf.train.LoggingTensorHook([], every_n_iter=0), "invalid every_n_iter=0."),
        (
            lambda: tf.train.StepCounterHook(every_n_steps=None),
            "exactly one of every_n_steps and every_n_secs should be provided.",
        ),
        (
            lambda: tf.train.SummarySaverHook(save_steps=1),
            "Exactly one of scaffold or summary_op must be provided.",
        ),
        (
            lambda: tf.train.CheckpointSaverHook("x"),
            "Either every_secs or every_steps should be provided.",
        ),
        (
            lambda: tf.train.SessionManager(ready_for_local_init_op=1),
            "If you pass a ready_for_local_init_op you must also pass a local_init_op",
        ),
    ]
    for make, message in cases:
        with pytest.raises(ValueError) as raised:
            make()
        assert str(raised.value).startswith(message)
    with pytest.raises(RuntimeError, match="Global step should be created to use StopAtStepHook."):
        tf.train.MonitoredSession(hooks=[tf.train.StopAtStepHook(2)])


def test_closing_twice_and_running_after_close(graph: Any) -> None:
    step = tf.train.get_or_create_global_step()
    sess = tf.train.MonitoredSession()
    assert graph.finalized and not sess.should_stop()
    sess.close()
    assert not graph.finalized and sess.should_stop()
    with pytest.raises(RuntimeError, match="Session is already closed."):
        sess.close()
    with pytest.raises(RuntimeError):
        sess.run(step)


def _nan_program(fail: bool) -> tuple[list[float], Any]:
    g = tf.Graph()
    with g.as_default():
        step = tf.train.get_or_create_global_step()
        x = tf.placeholder(tf.float32, [])
        inc = tf.assign_add(step, 1)
        ran: list[float] = []
        hook = tf.train.NanTensorHook(x, fail_on_nan_loss=fail)
        try:
            with tf.train.MonitoredSession(hooks=[hook]) as sess:
                for value in [1.0, float("nan"), 2.0]:
                    if sess.should_stop():
                        break
                    sess.run(inc, {x: value})
                    ran.append(value)
        except tf.train.NanLossDuringTrainingError as e:
            return ran, e
    return ran, None


def test_nan_tensor_hook_raises_or_stops_as_tensorflow(caplog: Any) -> None:
    with caplog.at_level(logging.INFO, logger="tf_accum"):
        ran, raised = _nan_program(fail=True)
    assert len(ran) == 1 and str(raised) == "NaN loss during training."
    assert isinstance(raised, RuntimeError)
    assert [(r.levelname, r.message) for r in caplog.records if "NaN" in r.message] == [
        ("ERROR", "Model diverged with loss = NaN.")
    ]
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="tf_accum"):
        ran, raised = _nan_program(fail=False)
    assert raised is None and len(ran) == 2  # the NaN run, then the loop stops
    assert [(r.levelname, r.message) for r in caplog.records if "NaN" in r.message] == [
        ("WARNING", "Model diverged with loss = NaN.")
    ]


def test_logging_tensor_hook_logs_as_tensorflow(graph: Any, caplog: Any) -> None:
    step = tf.train.get_or_create_global_step()
    inc = tf.assign_add(step, 1)
    v = tf.constant([1.5, 2.25], name="v")
    n = tf.constant(7, name="n")
    hooks = [
        tf.train.LoggingTensorHook({"v": v, "n": "n", "step": step}, every_n_iter=2),
        tf.train.LoggingTensorHook([v.name], at_end=True),
        tf.train.LoggingTensorHook({"n": n}, every_n_iter=3, formatter=lambda d: f"F{d['n']}"),
    ]
    with (
        caplog.at_level(logging.INFO, logger="tf_accum"),
        tf.train.SingularMonitoredSession(hooks=hooks) as sess,
    ):
        for _ in range(5):
            sess.run(inc)
    lines = [r.getMessage().split(" (")[0] for r in caplog.records]
    lines = [line for line in lines if "=" in line or line.startswith("F")]
    # TensorFlow 2.21's lines (tags sorted for a dict, in order for a list). The
    # step read in the same run as the increment is the value before it, as
    # TensorFlow usually shows it (its executor may also run the increment first).
    assert lines == [
        "n = 7, step = 0, v = [1.5  2.25]",
        "F7",
        "n = 7, step = 2, v = [1.5  2.25]",
        "F7",
        "n = 7, step = 4, v = [1.5  2.25]",
        "v:0 = [1.5  2.25]",
    ]


def test_hooks_feed_and_conflicting_feeds_are_refused(graph: Any) -> None:
    tf.train.get_or_create_global_step()
    x = tf.placeholder(tf.float32, [])
    doubled = x * 2
    feeds = iter([1.0, 2.0])
    with tf.train.MonitoredSession(hooks=[tf.train.FeedFnHook(lambda: {x: next(feeds)})]) as sess:
        assert sess.run(doubled) == 2.0
        with pytest.raises(RuntimeError, match="Same tensor is fed by a SessionRunHook and user"):
            sess.run(doubled, {x: 5.0})
    two = [tf.train.FeedFnHook(lambda: {x: 1.0}), tf.train.FeedFnHook(lambda: {x: 1.0})]
    with (
        tf.train.MonitoredSession(hooks=two) as sess,
        pytest.raises(RuntimeError, match="Same tensor is fed by two hooks."),
    ):
        sess.run(doubled)


def test_final_ops_hook_runs_at_the_end(graph: Any) -> None:
    step = tf.train.get_or_create_global_step()
    inc = tf.assign_add(step, 1)
    hook = tf.train.FinalOpsHook({"step": step})
    with tf.train.MonitoredSession(hooks=[hook]) as sess:
        sess.run(inc)
        sess.run(inc)
        assert hook.final_ops_values is None
    assert hook.final_ops_values == {"step": 2}


class Ends(tf.train.SessionRunHook):
    def __init__(self) -> None:
        self.ended = 0

    def end(self, session: Any) -> None:
        self.ended += 1


def test_out_of_range_ends_the_loop_and_other_errors_propagate(graph: Any) -> None:
    tf.train.get_or_create_global_step()
    queue = tf.FIFOQueue(10, tf.int32, shapes=[])
    fill = queue.enqueue_many([[1, 2]])
    close = queue.close()
    take = queue.dequeue()
    hook = Ends()
    taken = []
    with tf.train.MonitoredSession(hooks=[hook]) as sess:
        sess.run(fill)
        sess.run(close)
        while not sess.should_stop():
            taken.append(int(sess.run(take)))
    assert taken == [1, 2] and hook.ended == 1  # ended normally

    x = tf.placeholder(tf.int32, [])
    doubled = x * 2
    hook = Ends()
    with pytest.raises(ValueError), tf.train.MonitoredSession(hooks=[hook]) as sess:
        sess.run(doubled, {x: [1, 2]})  # a feed of the wrong shape
    assert hook.ended == 0  # end() is for a session that ends without an error


def test_run_step_fn(graph: Any) -> None:
    step = tf.train.get_or_create_global_step()
    inc = tf.assign_add(step, 1)

    def step_fn(step_context: Any) -> Any:
        value = step_context.run_with_hooks(inc)
        if value >= 3:
            step_context.request_stop()
        return value

    with tf.train.MonitoredSession(hooks=[tf.train.StopAtStepHook(last_step=10)]) as sess:
        seen = [sess.run_step_fn(step_fn) for _ in range(2)]
        assert seen == [1, 2]
        sess.run_step_fn(step_fn)  # raises StopIteration, which the with block swallows
        pytest.fail("request_stop did not end the loop")
    with tf.train.MonitoredSession() as sess, pytest.raises(ValueError, match="`step_fn` may"):
        sess.run_step_fn(lambda other: other)


def test_queue_runners_start_and_stop_without_blocking_exit(graph: Any) -> None:
    tf.train.get_or_create_global_step()
    queue = tf.FIFOQueue(2, tf.int32, shapes=[])
    tf.train.add_queue_runner(tf.train.QueueRunner(queue, [queue.enqueue(1)]))
    take = queue.dequeue()
    before = threading.active_count()
    started = time.monotonic()
    with tf.train.MonitoredSession(stop_grace_period_secs=5) as sess:
        assert [int(sess.run(take)) for _ in range(3)] == [1, 1, 1]
        assert threading.active_count() > before
    assert time.monotonic() - started < 5  # the enqueue blocked on a full queue was cancelled
    deadline = time.monotonic() + 5
    while threading.active_count() > before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert threading.active_count() == before


def test_a_session_that_never_gets_ready_logs_what_it_waits_for_then_gives_up(
    graph: Any, caplog: Any
) -> None:
    tf.train.get_or_create_global_step()
    tf.Variable(np.float32(1.0), name="weights")
    scaffold = tf.train.Scaffold().finalize()
    manager = tf.train.SessionManager(
        ready_op=scaffold.ready_op,
        ready_for_local_init_op=scaffold.ready_for_local_init_op,
        local_init_op=scaffold.local_init_op,
        recovery_wait_secs=0.1,
    )
    started = time.monotonic()
    with (
        caplog.at_level(logging.INFO, logger="tf_accum"),
        pytest.raises(errors.DeadlineExceededError, match="not ready after waiting"),
    ):
        manager.wait_for_session("", max_wait_secs=0.5)
    assert time.monotonic() - started < 5
    waits = [r.getMessage() for r in caplog.records if "Waiting for model" in r.getMessage()]
    assert waits, "the wait was silent"
    assert "Variables not initialized: global_step, weights" in waits[0]
    assert "since" in waits[0]


def test_prepare_session_initializes_and_recover_session_restores(tmp_path: Path) -> None:
    g = tf.Graph()
    with g.as_default():
        v = tf.Variable(4.0, name="v")
        bump = v.assign_add(1.0)
        saver = tf.train.Saver()
        ready = tf.report_uninitialized_variables()
        init = tf.global_variables_initializer()
    manager = tf.train.SessionManager(ready_op=ready, graph=g)
    with pytest.raises(RuntimeError, match="Model is not initialized and no init_op"):
        manager.prepare_session("")
    sess = manager.prepare_session("", init_op=init)
    sess.run(bump)
    saver.save(sess, str(tmp_path / "m"), global_step=1)
    sess.close()
    sess, initialized = manager.recover_session("", saver=saver, checkpoint_dir=str(tmp_path))
    assert initialized and sess.run(v) == 5.0
    sess.close()
    sess, initialized = manager.recover_session("", saver=saver, checkpoint_dir=str(tmp_path / "x"))
    assert not initialized
    sess.close()
    sess = manager.prepare_session("", init_op=init, saver=saver, checkpoint_dir=str(tmp_path))
    assert sess.run(v) == 5.0  # restored, not initialized
    sess.close()


class AbortsOnce(tf.train.SessionRunHook):
    """Counts the sessions made; the first run fails as when a ps task restarts."""

    def __init__(self) -> None:
        self.sessions = 0
        self.aborted = False

    def after_create_session(self, session: Any, coord: Any) -> None:
        self.sessions += 1

    def before_run(self, run_context: Any) -> None:
        if not self.aborted:
            self.aborted = True
            raise errors.AbortedError(None, None, "the ps task restarted")


def test_monitored_session_makes_a_new_session_after_an_aborted_run(graph: Any) -> None:
    step = tf.train.get_or_create_global_step()
    inc = tf.assign_add(step, 1)
    hook = AbortsOnce()
    with tf.train.MonitoredSession(hooks=[hook]) as sess:
        assert sess.run(inc) == 1
    assert hook.sessions == 2

    hook = AbortsOnce()
    with (
        pytest.raises(errors.AbortedError),
        tf.train.SingularMonitoredSession(hooks=[hook]) as sess,
    ):
        sess.run(inc)
    assert hook.sessions == 1


UNCLOSED = """
import tf_accum.compat.v1 as tf
tf.disable_eager_execution()
step = tf.train.get_or_create_global_step()
queue = tf.FIFOQueue(1, tf.int32, shapes=[])
tf.train.add_queue_runner(tf.train.QueueRunner(queue, [queue.enqueue(1)]))
take = queue.dequeue()
sess = tf.train.MonitoredTrainingSession(checkpoint_dir={logdir!r})
sess.run(take)
print("leaving without close", flush=True)
"""


def test_exit_does_not_wait_for_an_unclosed_sessions_queue_runners(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parent.parent.parent
    done = subprocess.run(
        [sys.executable, "-c", UNCLOSED.format(logdir=str(tmp_path))],
        env=dict(os.environ, PYTHONPATH=str(root)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "leaving without close" in done.stdout


RECORDED = json.loads((Path(__file__).parent / "data" / "tensorflow_monitored.json").read_text())
# tests/graph/tensorflow_monitored.py run with TensorFlow, in a child process
_LIVE_JOB = live_job(
    "monitored sessions: TensorFlow's training loops today", "tests.graph.tensorflow_monitored"
)


def test_training_loops_give_what_tensorflow_gave(graph: Any) -> None:
    # Adam and Momentum steps, hooks' order and logs, checkpoints, restarts
    assert record(tf, "tf_accum") == RECORDED


@pytest.mark.background(_LIVE_JOB)
def test_the_record_is_what_tensorflow_gives_today() -> None:
    assert last_json_line(live_result(_LIVE_JOB, "the record stands for it")) == RECORDED


class StubbornThread(tf.train.SessionRunHook):
    """Registers a thread with the session's coordinator that ignores the stop."""

    def after_create_session(self, session: Any, coord: Any) -> None:
        self.release = threading.Event()
        thread = threading.Thread(target=self.release.wait, args=(30,), daemon=True)
        coord.register_thread(thread)
        thread.start()


def test_close_waits_for_threads_at_most_the_grace_period(graph: Any) -> None:
    tf.train.get_or_create_global_step()
    hook = StubbornThread()
    sess = tf.train.MonitoredSession(hooks=[hook], stop_grace_period_secs=0.3)
    started = time.monotonic()
    sess.close()
    assert time.monotonic() - started < 5
    hook.release.set()


def test_copy_from_scaffold_takes_what_is_not_given(graph: Any) -> None:
    tf.train.get_or_create_global_step()
    init = tf.no_op(name="my_init")
    base = tf.train.Scaffold(init_op=init, init_feed_dict={"a": 1})
    copy = tf.train.Scaffold(copy_from_scaffold=base, local_init_op=tf.no_op(name="mine"))
    assert copy.init_op is init and copy.init_feed_dict == {"a": 1}
    assert copy.local_init_op.name == "mine"
    with pytest.raises(TypeError, match="copy_from_scaffold is not a Scaffold instance."):
        tf.train.Scaffold(copy_from_scaffold=object())  # type: ignore[arg-type]


def test_a_non_chief_alone_waits_at_most_max_wait_secs_with_its_own_hooks_only(
    graph: Any, tmp_path: Path, monkeypatch: Any, caplog: Any
) -> None:
    from tf_accum.graph import monitored_session

    monkeypatch.setattr(monitored_session, "WORKER_RECOVERY_WAIT_SECS", 0.1)
    tf.train.get_or_create_global_step()
    calls: list[str] = []
    loss = tf.constant(1.0)
    started = time.monotonic()
    with (
        caplog.at_level(logging.INFO, logger="tf_accum"),
        pytest.raises(errors.DeadlineExceededError, match="global_step"),
    ):
        tf.train.MonitoredTrainingSession(
            is_chief=False,
            checkpoint_dir=str(tmp_path),
            hooks=[Recorder("a", calls, loss)],
            chief_only_hooks=[Recorder("c", calls, loss)],
            max_wait_secs=0.5,
        )
    assert time.monotonic() - started < 5
    assert calls == ["a.begin"]  # no chief-only hooks, no session made
    assert not list(tmp_path.iterdir())  # a non-chief writes no checkpoint or summary
    assert any("Waiting for model" in r.getMessage() for r in caplog.records)


class Options(tf.train.SessionRunHook):
    def __init__(self, timeout_in_ms: int) -> None:
        self.timeout_in_ms = timeout_in_ms
        self.seen: list[Any] = []

    def before_run(self, run_context: Any) -> Any:
        return tf.train.SessionRunArgs(
            None, options=tf.RunOptions(timeout_in_ms=self.timeout_in_ms)
        )

    def after_run(self, run_context: Any, run_values: Any) -> None:
        self.seen.append(run_values.options.timeout_in_ms)


def test_hooks_run_options_merge_and_bound_the_run(graph: Any) -> None:
    tf.train.get_or_create_global_step()
    queue = tf.FIFOQueue(1, tf.int32, shapes=[])
    take = queue.dequeue()
    size = queue.size()
    hooks = [Options(200), Options(100)]
    started = time.monotonic()
    with tf.train.MonitoredSession(hooks=hooks) as sess:
        assert sess.run(size) == 0
        assert hooks[0].seen == [200]  # the larger timeout, as TensorFlow merges them
        with pytest.raises(errors.DeadlineExceededError):
            sess.run(take)  # an empty queue: the hooks' timeout ends the wait
    assert time.monotonic() - started < 10


def test_checkpoints_are_saved_without_tensorboard(tmp_path: Path, monkeypatch: Any) -> None:
    from tf_accum.graph import summary_writer

    monkeypatch.setattr(summary_writer, "_tensorboard", lambda: None)  # as if not installed
    g, step, w, loss, train = _regression()
    folder = tmp_path / "not yet made"
    with (
        g.as_default(),
        tf.train.MonitoredTrainingSession(
            checkpoint_dir=str(folder), hooks=[tf.train.StopAtStepHook(last_step=2)]
        ) as sess,
    ):
        while not sess.should_stop():
            sess.run(train)
    assert tf.train.latest_checkpoint(str(folder)) == str(folder / "model.ckpt-2")
    assert not list(folder.glob("events*"))
