"""train.Coordinator (issue 26): threads stop together, and join raises the
first error a worker reported, as TensorFlow 2.21's Coordinator does."""

from __future__ import annotations

import sys
import threading

import pytest

import tf_accum.compat.v1 as tf
from tests.helpers import WAIT
from tf_accum import errors


def _started(target: object, name: str | None = None) -> threading.Thread:
    thread = threading.Thread(target=target, name=name, daemon=True)  # type: ignore[arg-type]
    thread.start()
    return thread


def test_workers_stop_when_one_requests_it() -> None:
    coord = tf.train.Coordinator()
    steps = [0, 0, 0]
    go = threading.Barrier(3, timeout=WAIT)

    def work(i: int) -> None:
        go.wait()
        while not coord.should_stop():
            steps[i] += 1
            if i == 0 and steps[0] == 100:
                coord.request_stop()

    threads = [_started(lambda i=i: work(i)) for i in range(3)]
    coord.join(threads, stop_grace_period_secs=WAIT)
    assert coord.should_stop() and coord.joined
    assert steps[0] == 100 and not any(t.is_alive() for t in threads)


def test_join_reraises_a_workers_exception() -> None:
    coord = tf.train.Coordinator()

    def fail() -> None:
        with coord.stop_on_exception():
            raise KeyError("boom")

    threads = [_started(fail)]
    with pytest.raises(KeyError, match="boom"):
        coord.join(threads, stop_grace_period_secs=WAIT)
    assert coord.should_stop() and coord.joined
    # after join, a reported error is raised where it is reported
    with pytest.raises(ValueError, match="late"):
        coord.request_stop(ValueError("late"))
    coord.request_stop()


def test_only_the_first_error_is_kept() -> None:
    coord = tf.train.Coordinator()
    try:
        raise ValueError("first")
    except ValueError as error:
        coord.request_stop(error)
    try:
        raise KeyError("second")
    except KeyError:
        coord.request_stop(sys.exc_info())
    with pytest.raises(ValueError, match="first"):
        coord.raise_requested_exception()
    with pytest.raises(ValueError, match="first"):
        coord.join()


def test_out_of_range_is_a_clean_stop() -> None:
    coord = tf.train.Coordinator()

    def drained() -> None:
        with coord.stop_on_exception():
            raise errors.OutOfRangeError(None, None, "done")

    threads = [_started(drained)]
    coord.join(threads, stop_grace_period_secs=WAIT)  # raises nothing
    strict = tf.train.Coordinator(clean_stop_exception_types=[])
    strict.request_stop(errors.OutOfRangeError(None, None, "done"))
    with pytest.raises(errors.OutOfRangeError, match="done"):
        strict.join()


def test_stop_on_exception_reports_system_exit_too() -> None:
    coord = tf.train.Coordinator()

    def leave() -> None:
        with coord.stop_on_exception():
            raise SystemExit(3)

    threads = [_started(leave)]
    with pytest.raises(SystemExit):
        coord.join(threads, stop_grace_period_secs=WAIT)


def test_threads_still_running_after_the_grace_period() -> None:
    coord = tf.train.Coordinator()
    release = threading.Event()
    straggler = _started(lambda: release.wait(WAIT), name="straggler")
    coord.request_stop()
    try:
        with pytest.raises(
            RuntimeError, match=r"^Coordinator stopped with threads still running: straggler$"
        ):
            coord.join([straggler], stop_grace_period_secs=0.05)
        coord.clear_stop()
        coord.register_thread(straggler)
        coord.request_stop()
        coord.join(stop_grace_period_secs=0.05, ignore_live_threads=True)
    finally:
        release.set()
        straggler.join(WAIT)


def test_clear_stop_and_wait_for_stop() -> None:
    coord = tf.train.Coordinator()
    assert coord.wait_for_stop(0.01) is False
    waiter_saw: list[bool] = []
    waiter = _started(lambda: waiter_saw.append(coord.wait_for_stop(WAIT)))
    coord.request_stop()
    waiter.join(WAIT)
    assert waiter_saw == [True]
    coord.join()
    assert coord.joined and coord.should_stop()
    coord.clear_stop()
    assert not coord.joined and not coord.should_stop()


def test_join_waits_for_registered_threads_without_a_stop() -> None:
    coord = tf.train.Coordinator()
    release = threading.Event()
    worker = _started(lambda: release.wait(WAIT))
    coord.register_thread(worker)
    release.set()
    coord.join(stop_grace_period_secs=WAIT)  # returns once the thread ended
    assert not worker.is_alive() and not coord.should_stop()


def test_loop_calls_its_target_until_the_stop() -> None:
    coord = tf.train.Coordinator()
    calls = threading.Semaphore(0)
    thread = coord.loop(0.001, calls.release)
    for _ in range(3):
        assert calls.acquire(timeout=WAIT)
    coord.request_stop()
    coord.join(stop_grace_period_secs=WAIT)
    assert not thread.is_alive()
