"""Queues on a ps task of a TF1 cluster on Ray, and SyncReplicasOptimizer across sessions.

A FIFOQueue placed on a ps task lives on that task's host: one queue for
every session of the cluster, as an accumulator is. The worker tasks here are
servers of this process, each with its own session; the ps task is a Ray
actor. Every wait is bounded.
"""

from __future__ import annotations

import logging
import threading
import uuid
from typing import Any

import numpy as np
import pytest

import tf_accum.compat.v1 as tf
from tests.helpers import Background, wait_until
from tf_accum import errors

WAIT = 90.0  # seconds: a loaded machine starts the ps host slowly
RUN_BOUND = tf.RunOptions(timeout_in_ms=60_000)


def cluster_of(ps: int, workers: int) -> dict[str, list[str]]:
    tag = uuid.uuid4().hex[:8]
    return {
        "ps": [f"ps{i}-{tag}:2222" for i in range(ps)],
        "worker": [f"worker{i}-{tag}:2222" for i in range(workers)],
    }


def test_a_queue_on_a_ps_task_is_one_queue_for_every_session(task: Any) -> None:
    spec = cluster_of(ps=1, workers=2)
    graph = tf.Graph()
    with graph.as_default(), tf.device("/job:ps/task:0"):
        queue = tf.FIFOQueue(-1, tf.int64, shapes=(), shared_name="tokens", name="tokens")
        values = tf.placeholder(tf.int64, [None])
        enqueue_many = queue.enqueue_many((values,))
        dequeue = queue.dequeue()
        dequeue_two = queue.dequeue_many(2)
        dequeue_three = queue.dequeue_many(3)
        size = queue.size()
        close = queue.close()
    server, first = task(spec, 0, graph)
    _, second = task(spec, 1, graph)
    # a dequeue of one session waits for an enqueue of the other
    waiting = Background(second.run, dequeue, options=RUN_BOUND)
    wait_until(lambda: server.runtime.counts("ps", 0)["waiting"] == 1, timeout=WAIT)
    assert not waiting.done()
    first.run(enqueue_many, {values: [7, 8, 9]})
    assert waiting.result(WAIT) == 7
    assert first.run(size) == second.run(size) == 2
    # a dequeue that runs out of time consumes nothing
    with pytest.raises(errors.DeadlineExceededError):
        first.run(dequeue_three, options=tf.RunOptions(timeout_in_ms=300))
    assert second.run(size) == 2
    assert second.run(dequeue_two).tolist() == [8, 9]
    # a closed, empty queue: OutOfRangeError, in every session
    first.run(close)
    with pytest.raises(errors.OutOfRangeError, match="is closed and has insufficient elements"):
        second.run(dequeue, options=RUN_BOUND)


def test_a_waiting_dequeue_is_withdrawn_when_its_session_closes(task: Any) -> None:
    spec = cluster_of(ps=1, workers=2)
    graph = tf.Graph()
    with graph.as_default(), tf.device("/job:ps/task:0"):
        queue = tf.FIFOQueue(-1, tf.int64, shapes=(), shared_name="tokens", name="tokens")
        enqueue = queue.enqueue(tf.constant(5, tf.int64))
        dequeue = queue.dequeue()
    server, first = task(spec, 0, graph)
    _, second = task(spec, 1, graph)
    waiting = Background(second.run, dequeue, options=RUN_BOUND)
    wait_until(lambda: server.runtime.counts("ps", 0)["waiting"] == 1, timeout=WAIT)
    second.close()
    assert isinstance(waiting.error(WAIT), errors.CancelledError)
    first.run(enqueue)
    assert first.run(dequeue, options=RUN_BOUND) == 5  # the withdrawn dequeue took nothing


def test_an_enqueue_many_larger_than_a_bounded_ps_queue_adds_as_room_appears(
    task: Any,
) -> None:
    # TensorFlow 2.21, in one process: enqueue_many([1, 2, 3]) into a queue of capacity
    # 2 adds two and waits; a dequeue (1) lets the third in; out of time, what it added stays
    spec = cluster_of(ps=1, workers=2)
    graph = tf.Graph()
    with graph.as_default(), tf.device("/job:ps/task:0"):
        queue = tf.FIFOQueue(2, tf.int64, shapes=(), shared_name="small", name="small")
        enqueue_many = queue.enqueue_many((tf.constant([1, 2, 3], tf.int64),))
        dequeue = queue.dequeue()
        dequeue_two = queue.dequeue_many(2)
        size = queue.size()
    server, first = task(spec, 0, graph)
    _, second = task(spec, 1, graph)
    adding = Background(first.run, enqueue_many, options=RUN_BOUND)
    wait_until(lambda: second.run(size) == 2, timeout=WAIT)
    wait_until(lambda: server.runtime.counts("ps", 0)["waiting"] == 1, timeout=WAIT)
    assert not adding.done()
    assert second.run(dequeue, options=RUN_BOUND) == 1
    adding.result(WAIT)
    assert second.run(dequeue_two, options=RUN_BOUND).tolist() == [2, 3]
    # the run's deadline: the two that fit stay, the run fails, nothing waits after it
    with pytest.raises(errors.DeadlineExceededError):
        first.run(enqueue_many, options=tf.RunOptions(timeout_in_ms=300))
    assert second.run(size) == 2
    assert server.runtime.counts("ps", 0)["waiting"] == 0
    assert second.run(dequeue_two, options=RUN_BOUND).tolist() == [1, 2]


def test_an_enqueue_many_waiting_for_room_on_a_ps_task_fails_when_the_queue_closes(
    task: Any,
) -> None:
    spec = cluster_of(ps=1, workers=2)
    graph = tf.Graph()
    with graph.as_default(), tf.device("/job:ps/task:0"):
        queue = tf.FIFOQueue(2, tf.int64, shapes=(), shared_name="closing", name="closing")
        enqueue_many = queue.enqueue_many((tf.constant([1, 2, 3], tf.int64),))
        cancel = queue.close(cancel_pending_enqueues=True)
        dequeue_two = queue.dequeue_many(2)
    server, first = task(spec, 0, graph)
    _, second = task(spec, 1, graph)
    adding = Background(first.run, enqueue_many, options=RUN_BOUND)
    wait_until(lambda: server.runtime.counts("ps", 0)["waiting"] == 1, timeout=WAIT)
    second.run(cancel)
    assert isinstance(adding.error(WAIT), errors.CancelledError)
    assert second.run(dequeue_two, options=RUN_BOUND).tolist() == [1, 2]


def _replica_graph(index: int, replicas: int) -> dict[str, Any]:
    """Worker ``index``'s graph: the variables and the token queue on the ps task."""
    graph = tf.Graph()
    device = tf.train.replica_device_setter(ps_tasks=1, worker_device=f"/job:worker/task:{index}")
    with graph.as_default(), tf.device(device):
        global_step = tf.train.get_or_create_global_step()
        w = tf.Variable(np.array([1.0, -1.0], np.float32), name="w")
        grad = tf.placeholder(tf.float32, [2], name="grad")
        opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.5), replicas)
        train_op = opt.apply_gradients([(grad, w)], global_step=global_step)
        init = tf.global_variables_initializer()
        local_init = tf.local_variables_initializer()
        init_tokens = opt.get_init_tokens_op(num_tokens=0)
    return {
        "graph": graph,
        "opt": opt,
        "train_op": train_op,
        "grad": grad,
        "w": w,
        "global_step": global_step,
        "init": init,
        "local_init": local_init,
        "init_tokens": init_tokens,
    }


def test_sync_replicas_trains_across_the_sessions_of_a_cluster(task: Any) -> None:
    replicas, steps = 2, 3
    spec = cluster_of(ps=1, workers=replicas)
    models = [_replica_graph(i, replicas) for i in range(replicas)]
    sessions = [task(spec, i, m["graph"])[1] for i, m in enumerate(models)]
    chief, chief_sess = models[0], sessions[0]
    chief_sess.run(chief["init"])
    for m, sess in zip(models, sessions, strict=True):
        sess.run(m["local_init"])
    chief_sess.run(chief["opt"].chief_init_op)
    for m, sess in zip(models[1:], sessions[1:], strict=True):
        sess.run(m["opt"].local_step_init_op)
    chief_sess.run(chief["init_tokens"])
    coord = tf.train.Coordinator()
    chief["opt"].get_chief_queue_runner().create_threads(chief_sess, coord=coord, start=True)
    gradients = np.arange(replicas * steps * 2, dtype=np.float32).reshape(replicas, steps, 2) / 4
    barrier = threading.Barrier(replicas, timeout=WAIT)
    failures: list[BaseException] = []

    def work(index: int) -> None:
        try:
            for step in range(steps):
                feed = {models[index]["grad"]: gradients[index, step]}
                sessions[index].run(models[index]["train_op"], feed, options=RUN_BOUND)
                barrier.wait()
        except BaseException as error:  # reported below
            failures.append(error)
            barrier.abort()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(replicas)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)
    assert not failures, failures
    assert not any(thread.is_alive() for thread in threads)
    expected = np.array([1.0, -1.0]) - 0.5 * gradients.mean(axis=0).sum(axis=0)
    for m, sess in zip(models, sessions, strict=True):
        assert sess.run(m["global_step"]) == steps
        np.testing.assert_allclose(sess.run(m["w"]), expected, rtol=1e-6)
    coord.request_stop()
    chief_sess.close()  # cancels the chief's take of a step nobody sends
    coord.join(stop_grace_period_secs=WAIT)


def test_a_chief_counts_and_logs_the_stale_gradients_its_ps_task_dropped(
    task: Any, caplog: pytest.LogCaptureFixture
) -> None:
    spec = cluster_of(ps=1, workers=2)
    models = [_replica_graph(i, 1) for i in range(2)]  # one gradient makes a step
    sessions = [task(spec, i, m["graph"])[1] for i, m in enumerate(models)]
    chief, chief_sess = models[0], sessions[0]
    chief_sess.run(chief["init"])
    for m, sess in zip(models, sessions, strict=True):
        sess.run(m["local_init"])
    chief_sess.run([chief["opt"].chief_init_op, chief["init_tokens"]])
    sessions[1].run(models[1]["opt"].local_step_init_op)  # worker 1 computes at step 0
    coord = tf.train.Coordinator()
    chief["opt"].get_chief_queue_runner().create_threads(chief_sess, coord=coord, start=True)
    with caplog.at_level(logging.INFO, logger="tf_accum"):
        chief_sess.run(chief["train_op"], {chief["grad"]: [1.0, 1.0]}, options=RUN_BOUND)
        assert chief_sess.run(chief["global_step"]) == 1
        # worker 1's gradient of step 0 arrives at step 1: dropped (its token wait
        # then ends at the run's deadline: the one token went to the chief)
        with pytest.raises(errors.DeadlineExceededError):
            sessions[1].run(
                models[1]["train_op"],
                {models[1]["grad"]: [100.0, 100.0]},
                options=tf.RunOptions(timeout_in_ms=1500),
            )
        chief_sess.run(chief["train_op"], {chief["grad"]: [1.0, 1.0]}, options=RUN_BOUND)
        assert chief_sess.run(chief["global_step"]) == 2
        # counted in the chief's process, from the ps task's accumulator
        assert chief["opt"].stale_gradients == 1
        assert chief["opt"].steps_aggregated == 2
    np.testing.assert_allclose(chief_sess.run(chief["w"]), [0.0, -2.0])  # the stale one left out
    dropped = [r.getMessage() for r in caplog.records if "stale gradient(s)" in r.getMessage()]
    assert len(dropped) == 1
    assert "1 stale gradient(s) dropped before the update to step" in dropped[0]
    assert "(1 in all)" in dropped[0]
    # worker 1's process has no counts (it is not the chief)
    assert models[1]["opt"].stale_gradients == 0
    coord.request_stop()
    chief_sess.close()  # cancels the chief's take of a step nobody sends
    coord.join(stop_grace_period_secs=WAIT)


def test_a_replica_waiting_on_a_ps_task_says_what_it_waits_for(
    task: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from tf_accum.graph import remote_run

    monkeypatch.setattr(remote_run, "REPORT_AFTER", 0.2)
    spec = cluster_of(ps=1, workers=1)
    m = _replica_graph(0, 2)
    _, sess = task(spec, 0, m["graph"])
    sess.run([m["init"], m["local_init"]])
    sess.run(m["opt"].chief_init_op)
    # the chief's queue runner never started: nothing takes the gradients
    with (
        caplog.at_level(logging.WARNING, logger="tf_accum"),
        pytest.raises(errors.DeadlineExceededError),
    ):
        sess.run(
            m["train_op"],
            {m["grad"]: [1.0, 1.0]},
            options=tf.RunOptions(timeout_in_ms=1500),
        )
    messages = [r.getMessage() for r in caplog.records if "A run has waited" in r.getMessage()]
    assert messages, "the wait was not reported"
    assert "for sync_token_q_Dequeue on task /job:ps/task:0" in messages[0]
    # what the ps task's host holds: the replica's gradient, and no take waiting for it
    assert "nobody takes the gradients: the chief has not started the queue runner" in (messages[0])
    assert "get_chief_queue_runner()" in messages[0]
    assert "Accumulators: 1 gradient(s) waiting at step 0" in messages[0]
    # reported again after twice as long, not at every poll
    assert 2 <= len(messages) <= 4


def test_a_sync_replicas_job_of_processes_trains_as_the_gradient_steps_say(
    task: Any, spawn: Any
) -> None:
    from tests.distributed import sync_replicas_roles as roles

    steps, run_ms = 5, 3000
    spec = cluster_of(ps=1, workers=2)
    m = roles.model(spec, 0, replicas=2)
    _, sess = task(spec, 0, m["graph"])
    sess.run([m["init"], m["local_init"]])
    other = spawn(
        "worker",
        module="tests.distributed.sync_replicas_roles",
        spec=spec,
        task=1,
        replicas=2,
        steps=steps,
        run_ms=run_ms,
    )
    coord = tf.train.Coordinator()
    m["hook"].after_create_session(sess, coord)  # the chief's init ops and queue runner
    chief_runs = roles.train(m, sess, steps, run_ms)
    outcome = other.outcome(WAIT)
    w, emb = roles.reference(steps)
    assert sess.run(m["global_step"]) == steps
    np.testing.assert_allclose(sess.run(m["w"]), w, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(sess.run(m["emb"]), emb, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(outcome["w"], w, rtol=1e-5, atol=1e-6)
    assert chief_runs >= 1 and outcome["runs"] >= 1
    coord.request_stop()
    sess.close()  # cancels the chief's take of a step nobody sends
    coord.join(stop_grace_period_secs=WAIT)


def test_a_replicas_step_is_one_request_to_the_ps_task(task: Any) -> None:
    spec = cluster_of(ps=1, workers=1)
    m = _replica_graph(0, 1)
    with m["graph"].as_default():
        tokens = m["opt"].get_init_tokens_op(num_tokens=2)
        size = m["opt"]._sync_token_queue.size()
    server, sess = task(spec, 0, m["graph"])
    sess.run([m["init"], m["local_init"]])
    sess.run([m["opt"].chief_init_op, tokens])
    requests = []
    for _ in range(2):  # two initial tokens: no chief needed
        before = server.runtime.counts("ps", 0)["requests"]
        sess.run(m["train_op"], {m["grad"]: [1.0, 1.0]}, options=RUN_BOUND)
        requests.append(server.runtime.counts("ps", 0)["requests"] - before)
    # the gradient's apply and the token's dequeue travel together
    assert requests == [1, 1]
    assert sess.run(size) == 0


def _backup_graph(index: int, replicas: int, total: int) -> dict[str, Any]:
    """Worker ``index``'s graph with ``total`` replicas of which ``replicas`` are aggregated."""
    graph = tf.Graph()
    device = tf.train.replica_device_setter(ps_tasks=1, worker_device=f"/job:worker/task:{index}")
    with graph.as_default(), tf.device(device):
        global_step = tf.train.get_or_create_global_step()
        w = tf.Variable(np.array([1.0, -1.0], np.float32), name="w")
        grad = tf.placeholder(tf.float32, [2], name="grad")
        opt = tf.train.SyncReplicasOptimizer(
            tf.train.GradientDescentOptimizer(0.5), replicas, total_num_replicas=total
        )
        train_op = opt.apply_gradients([(grad, w)], global_step=global_step)
        hook = None
        if total >= replicas:  # fewer replicas need initial tokens (the hook refuses 0)
            hook = opt.make_session_run_hook(is_chief=index == 0, num_tokens=0)
            hook.begin()
        init = tf.global_variables_initializer()
    return {
        "graph": graph,
        "opt": opt,
        "hook": hook,
        "w": w,
        "train_op": train_op,
        "grad": grad,
        "global_step": global_step,
        "init": init,
    }


def test_the_chiefs_take_on_a_ps_task_says_which_replicas_have_not_sent(
    task: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from tf_accum.graph import remote_run

    monkeypatch.setattr(remote_run, "REPORT_AFTER", 0.2)
    spec = cluster_of(ps=1, workers=2)
    models = [_backup_graph(i, 2, 2) for i in range(2)]
    sessions = [task(spec, i, m["graph"])[1] for i, m in enumerate(models)]
    sessions[0].run(models[0]["init"])
    coord = tf.train.Coordinator()
    for m, sess in zip(models, sessions, strict=True):
        m["hook"].after_create_session(sess, coord)  # the chief starts its queue runner
    # step 0: both replicas send (each run waits for the token of step 1)
    both = [
        Background(sess.run, m["train_op"], {m["grad"]: [1.0, 1.0]}, options=RUN_BOUND)
        for m, sess in zip(models, sessions, strict=True)
    ]
    for run in both:
        run.result(WAIT)
    assert sessions[1].run(models[1]["global_step"]) == 1
    # step 1: only the chief's replica sends; the chief's take waits on the ps task
    with caplog.at_level(logging.WARNING, logger="tf_accum"):
        with pytest.raises(errors.DeadlineExceededError):
            sessions[0].run(
                models[0]["train_op"],
                {models[0]["grad"]: [1.0, 1.0]},
                options=tf.RunOptions(timeout_in_ms=2500),
            )
        wait_until(lambda: "the chief's take" in caplog.text, timeout=WAIT)
    chief = [m for m in (r.getMessage() for r in caplog.records) if "the chief's take" in m]
    assert "on task /job:ps/task:0" in chief[0]
    assert "for the gradients of step 1: 1 of replicas_to_aggregate=2 have arrived" in chief[0]
    assert "(0 stale dropped so far)" in chief[0]
    assert (
        "Replicas: sent for step 1: /job:worker/task:0; "
        "not yet: /job:worker/task:1 (last at step 0)"
    ) in chief[0]
    # the replica's own wait said what the chief waits for, once the chief waited
    replica = [m for m in (r.getMessage() for r in caplog.records) if "a replica's" in m]
    assert replica, caplog.text
    coord.request_stop()
    sessions[0].close()  # cancels the chief's take
    coord.join(stop_grace_period_secs=WAIT)


def test_stale_gradients_dropped_on_a_ps_task_are_counted_and_logged_by_the_chief(
    task: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # one gradient per update from two replicas: the slower one's arrives stale
    spec = cluster_of(ps=1, workers=2)
    models = [_backup_graph(i, 1, 2) for i in range(2)]
    sessions = [task(spec, i, m["graph"])[1] for i, m in enumerate(models)]
    sessions[0].run(models[0]["init"])
    coord = tf.train.Coordinator()
    with caplog.at_level(logging.INFO, logger="tf_accum"):
        for m, sess in zip(models, sessions, strict=True):
            m["hook"].after_create_session(sess, coord)
        chief, backup = models
        # the chief's replica sends at step 0: the update to step 1, two tokens
        sessions[0].run(chief["train_op"], {chief["grad"]: [2.0, 2.0]}, options=RUN_BOUND)
        # the backup computed at step 0 too: its gradient arrives stale and is dropped
        sessions[1].run(backup["train_op"], {backup["grad"]: [8.0, 8.0]}, options=RUN_BOUND)
        # the next update: the chief's take then sees the stale one
        sessions[0].run(chief["train_op"], {chief["grad"]: [2.0, 2.0]}, options=RUN_BOUND)
        wait_until(lambda: chief["hook"].steps_aggregated >= 2, timeout=WAIT)
        # the take's answer is counted, then logged, on the thread that received it
        wait_until(
            lambda: any("stale gradient(s)" in r.getMessage() for r in caplog.records),
            timeout=WAIT,
        )
    assert chief["hook"].stale_gradients == 1 == chief["opt"].stale_gradients
    assert backup["hook"].stale_gradients == 0  # counted where the chief takes
    dropped = [r.getMessage() for r in caplog.records if "stale gradient(s)" in r.getMessage()]
    assert dropped == [
        "SyncReplicasOptimizer: 1 stale gradient(s) dropped before the update to step 2 "
        "(1 in all); they came from replicas behind the global step"
    ]
    # the stale gradient changed nothing: two updates of 0.5 * 2
    np.testing.assert_allclose(sessions[1].run(backup["w"]), [-1.0, -3.0])
    coord.request_stop()
    sessions[0].close()
    coord.join(stop_grace_period_secs=WAIT)


def test_too_few_replicas_without_initial_tokens_on_a_ps_task_are_told_to_run_them(
    task: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from tf_accum.graph import remote_run

    monkeypatch.setattr(remote_run, "REPORT_AFTER", 0.2)
    spec = cluster_of(ps=1, workers=1)
    m = _backup_graph(0, 2, 1)  # one replica, two gradients per update
    _, sess = task(spec, 0, m["graph"])
    sess.run(m["init"])
    sess.run(m["opt"].chief_init_op)  # the local step and the accumulators' step
    coord = tf.train.Coordinator()
    # the chief's queue runner, but not get_init_tokens_op()
    m["opt"].get_chief_queue_runner().create_threads(sess, coord=coord, start=True)
    with (
        caplog.at_level(logging.WARNING, logger="tf_accum"),
        pytest.raises(errors.DeadlineExceededError),
    ):
        sess.run(m["train_op"], {m["grad"]: [1.0, 1.0]}, options=tf.RunOptions(timeout_in_ms=2500))
    told = [
        r.getMessage() for r in caplog.records if "must run get_init_tokens_op()" in r.getMessage()
    ]
    assert told, caplog.text
    assert "1 of replicas_to_aggregate=2 have arrived" in told[-1]
    coord.request_stop()
    sess.close()
    coord.join(stop_grace_period_secs=WAIT)


def test_a_replica_process_that_ends_holding_a_token_is_named_by_the_chiefs_wait(
    task: Any, spawn: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from tests.distributed import sync_replicas_roles as roles
    from tf_accum.graph import remote_run

    monkeypatch.setattr(remote_run, "REPORT_AFTER", 0.2)
    spec = cluster_of(ps=1, workers=2)
    m = roles.model(spec, 0, replicas=2)
    _, sess = task(spec, 0, m["graph"])
    sess.run([m["init"], m["local_init"]])
    coord = tf.train.Coordinator()
    m["hook"].after_create_session(sess, coord)
    other = spawn(
        "one_step", module="tests.distributed.sync_waits_roles", spec=spec, task=1, replicas=2
    )
    # step 0: both send; the other process takes the token of step 1 and ends
    sess.run(m["train_op"], options=RUN_BOUND)
    assert other.outcome(WAIT)["step"] >= 1
    with caplog.at_level(logging.WARNING, logger="tf_accum"):
        with pytest.raises(errors.DeadlineExceededError):
            sess.run(m["train_op"], options=tf.RunOptions(timeout_in_ms=2500))
        step_one = "for the gradients of step 1: 1 of replicas_to_aggregate=2 have arrived"
        wait_until(lambda: step_one in caplog.text, timeout=WAIT)
    chief = [r.getMessage() for r in caplog.records if step_one in r.getMessage()]
    # the process that ended is named by its task, with the last step it sent for
    assert (
        "sent for step 1: /job:worker/task:0; not yet: /job:worker/task:1 (last at step 0)"
    ) in chief[0]
    coord.request_stop()
    sess.close()
    coord.join(stop_grace_period_secs=WAIT)


def test_a_chief_whose_queue_runner_waits_on_a_ps_task_exits_at_once(
    ray_cluster: Any, serve_ps: Any, spawn: Any
) -> None:
    import time

    spec = cluster_of(ps=1, workers=2)
    serve_ps(spec)
    chief = spawn(
        "leave_waiting", module="tests.distributed.sync_waits_roles", spec=spec, replicas=2
    )
    outcome = chief.outcome(WAIT)  # fails the test if the process does not end
    ended = time.time()
    assert outcome["waiting"] == 1
    assert ended - outcome["left_at"] < 30  # Ray's own shutdown included
    # its waiting take was withdrawn when its process ended
    watcher = tf.train.Server(spec, job_name="worker", task_index=1)
    wait_until(lambda: watcher.runtime.counts("ps", 0)["waiting"] == 0, timeout=WAIT)
