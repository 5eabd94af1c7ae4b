"""A cluster run's variable reads that went ahead with the run before: runs see
every write all the same.

A run whose first request to a ps task only reads variables, and whose ops
before its last request to that task can run again unseen, has that last
request also read them for the next run of the same plan (see
``remote_run._ReadAhead``). The next run sends its last request with which
reads it used, and the host runs it only if the variables still hold what
was read; otherwise the run starts again. These tests check the values each
run sees, that a refused request changed nothing, which runs read ahead, and
that the host lets held reads go.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import numpy as np

import tf_accum.compat.v1 as tf

RUN_BOUND = tf.RunOptions(timeout_in_ms=60_000)


def job(local_effects: bool = False) -> dict[str, Any]:
    """``u += square(v)`` with v and u on the ps task and the square in the session's
    process (plus a random term with ``local_effects``): a request of v's read, a
    local op, a request of u's update."""
    tag = uuid.uuid4().hex[:8]
    spec = {"ps": [f"ps-{tag}:2222"], "worker": [f"w-{tag}:2222"]}
    graph = tf.Graph()
    with graph.as_default():
        with tf.device("/job:ps/task:0"):
            v = tf.Variable(np.array([1.0, 2.0, 3.0], np.float32), name="v")
            u = tf.Variable(np.zeros(3, np.float32), name="u")
        with tf.device("/job:worker/task:0"):
            change = tf.square(v.read_value())
            if local_effects:
                change = change + tf.random_uniform([3]) * 0.0
        update = u.assign_add(change)
        init = tf.global_variables_initializer()
    return {"spec": spec, "graph": graph, "v": v, "u": u, "update": update, "init": init}


def host_counts(server: Any) -> dict[str, int]:
    counts: dict[str, int] = server.runtime.counts("ps", 0)
    return counts


def requests_of(server: Any, run: Callable[[], Any]) -> tuple[Any, int]:
    """``run()``'s result and the requests the ps task's host ran for it."""
    before = host_counts(server)["requests"]
    found = run()
    return found, host_counts(server)["requests"] - before


def test_runs_read_ahead_and_see_the_values_they_would_have_read(task: Any) -> None:
    m = job()
    server, sess = task(m["spec"], 0, m["graph"])
    sess.run(m["init"])
    update = lambda: sess.run([m["update"], m["v"]], options=RUN_BOUND)  # noqa: E731
    expected = np.zeros(3, np.float32)
    spent = []
    for _ in range(5):
        (total, seen), requests = requests_of(server, update)
        expected += np.square(np.array([1.0, 2.0, 3.0], np.float32))
        np.testing.assert_array_equal(total, expected)
        np.testing.assert_array_equal(seen, [1.0, 2.0, 3.0])
        spent.append(requests)
    # the first run finds its route, the second reads ahead, the others use the reads
    assert spent == [2, 2, 1, 1, 1]
    assert host_counts(server)["reads_ahead"] == 1
    assert host_counts(server)["reads_changed"] == 0


def test_a_write_between_runs_is_seen_and_the_refused_request_changed_nothing(
    task: Any,
) -> None:
    m = job()
    server, sess = task(m["spec"], 0, m["graph"])
    other = tf.Session(server.target, graph=m["graph"])
    try:
        sess.run(m["init"])
        update = lambda: sess.run([m["update"], m["v"]], options=RUN_BOUND)  # noqa: E731
        for _ in range(3):
            before, _ = update()
        other.run(m["v"].assign([5.0, 6.0, 7.0]))  # another session's write
        (total, seen), requests = requests_of(server, update)
    finally:
        other.close()
    np.testing.assert_array_equal(seen, [5.0, 6.0, 7.0])
    # u's update ran once, with the new value
    np.testing.assert_array_equal(total, before + np.square([5.0, 6.0, 7.0]).astype(np.float32))
    np.testing.assert_array_equal(sess.run(m["u"]), total)
    assert host_counts(server)["reads_changed"] == 1
    assert requests == 2  # the refused request ran nothing: the run's reads, its update


def test_a_run_whose_local_ops_have_effects_reads_within_the_run(task: Any) -> None:
    m = job(local_effects=True)
    server, sess = task(m["spec"], 0, m["graph"])
    sess.run(m["init"])
    spent = [requests_of(server, lambda: sess.run(m["update"]))[1] for _ in range(4)]
    assert spent == [2, 2, 2, 2]
    assert host_counts(server)["reads_ahead"] == 0


def test_reads_that_keep_changing_stop_going_ahead(task: Any) -> None:
    m = job()
    server, sess = task(m["spec"], 0, m["graph"])
    other = tf.Session(server.target, graph=m["graph"])
    try:
        sess.run(m["init"])
        spent = []
        for k in range(10):
            other.run(m["v"].assign(np.full(3, k, np.float32)))
            total, seen = sess.run([m["update"], m["v"]], options=RUN_BOUND)
            np.testing.assert_array_equal(seen, np.full(3, k, np.float32))
            spent.append(host_counts(server)["reads_changed"])
    finally:
        other.close()
    # refused three times, then the route reads within its runs
    assert spent[-1] == 3
    assert spent[-4:] == [3, 3, 3, 3]
    expected = sum(np.square(np.full(3, k, np.float32)) for k in range(10))
    np.testing.assert_array_equal(total, expected)


def test_held_reads_go_with_their_session(task: Any) -> None:
    m = job()
    server, sess = task(m["spec"], 0, m["graph"])
    sess.run(m["init"])
    for _ in range(3):
        sess.run(m["update"])
    assert host_counts(server)["reads_ahead"] == 1
    sess.close()  # tells the host without waiting for it
    deadline = time.monotonic() + 30
    while host_counts(server)["reads_ahead"] and time.monotonic() < deadline:
        time.sleep(0.01)
    assert host_counts(server)["reads_ahead"] == 0


def test_runs_on_threads_never_see_a_value_older_than_the_last_write_before_them(
    task: Any,
) -> None:
    """Two threads run the same plan while another session writes v = k for k = 1, 2,
    ...: every run sees a value at least as new as the last write that ended before it
    started, and u holds the sum of what the runs saw, each added once."""
    m = job()
    server, sess = task(m["spec"], 0, m["graph"])
    other = tf.Session(server.target, graph=m["graph"])
    sess.run(m["init"])
    before = host_counts(server)["requests"]
    other.run(m["v"].assign(np.zeros(3, np.float32)))
    written: list[tuple[float, float]] = [(time.monotonic(), 0.0)]  # (ended, k)
    seen: list[tuple[float, float]] = []  # (run started, value seen)
    stop = threading.Event()
    failures: list[BaseException] = []

    def runs() -> None:
        try:
            while not stop.is_set():
                started = time.monotonic()
                _, value = sess.run([m["update"], m["v"]], options=RUN_BOUND)
                assert (value == value[0]).all()
                seen.append((started, float(value[0])))
        except BaseException as exc:  # noqa: BLE001 -- reported below
            failures.append(exc)

    threads = [threading.Thread(target=runs, name=f"runs-{i}") for i in range(2)]
    for thread in threads:
        thread.start()
    try:
        for k in range(1, 25):
            time.sleep(0.05)  # a few runs between writes: the runs keep reading ahead
            other.run(m["v"].assign(np.full(3, k, np.float32)))
            written.append((time.monotonic(), float(k)))
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
        other.close()
    assert not any(thread.is_alive() for thread in threads)
    assert not failures, failures
    assert len(seen) > 20
    counts = host_counts(server)
    # the writes made some runs start again, and most runs used reads ahead
    assert counts["reads_changed"] >= 3
    for started, value in seen:
        newest = max(k for ended, k in written if ended <= started)
        assert value >= newest, (started, value, newest)
    total = sess.run(m["u"])
    np.testing.assert_allclose(total, np.full(3, sum(v * v for _, v in seen), np.float32))
    # a run without reads ahead makes two requests (a refused one is not counted)
    assert counts["requests"] - before - len(written) < 2 * len(seen)
