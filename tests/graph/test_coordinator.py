"""train.Coordinator (issue 26): threads stop together, and join raises the
first error a worker reported, as TensorFlow 2.21's Coordinator does."""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

import pytest

import tf_accum.compat.v1 as tf
from tests.helpers import WAIT, wait_until
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


# LooperThread, as TensorFlow 2.21's (tf.compat.v1.train.LooperThread) behaves


def test_a_looper_with_no_interval_calls_back_to_back_with_its_arguments() -> None:
    coord = tf.train.Coordinator()
    calls: list[tuple[Any, ...]] = []
    enough = threading.Event()

    def target(*args: Any, **kwargs: Any) -> None:
        calls.append((args, kwargs))
        if len(calls) >= 50:
            enough.set()

    looper = tf.train.LooperThread.loop(coord, None, target, args=(1,), kwargs={"x": 2})
    assert isinstance(looper, tf.train.LooperThread) and looper.daemon
    assert enough.wait(WAIT)
    coord.request_stop()
    coord.join(stop_grace_period_secs=WAIT)  # registered: join waits for it
    assert not looper.is_alive()
    assert calls[0] == ((1,), {"x": 2})


def test_a_looper_with_an_interval_calls_at_once_then_on_the_boundaries() -> None:
    coord = tf.train.Coordinator()
    times: list[float] = []
    third = threading.Event()

    def target() -> None:
        times.append(time.monotonic())
        if len(times) == 3:
            third.set()

    start = time.monotonic()
    looper = tf.train.LooperThread.loop(coord, 0.2, target)
    assert third.wait(WAIT)
    coord.request_stop()
    coord.join([looper], stop_grace_period_secs=WAIT)
    assert times[0] - start < 0.2  # the first call at once
    # the later ones not before their boundaries
    assert times[1] - times[0] >= 0.2 - 0.02 and times[2] - times[0] >= 0.4 - 0.02


def test_a_looper_stopped_before_it_starts_never_calls() -> None:
    for interval in (None, 0.01):
        coord = tf.train.Coordinator()
        coord.request_stop()
        calls: list[int] = []
        looper = tf.train.LooperThread.loop(coord, interval, calls.append, args=(1,))
        looper.join(WAIT)
        assert not looper.is_alive() and calls == []


def test_a_looper_reports_its_targets_exception_and_a_bad_interval() -> None:
    def boom() -> None:
        raise ValueError("boom")

    coord = tf.train.Coordinator()
    looper = tf.train.LooperThread.loop(coord, 0.01, boom)
    looper.join(WAIT)
    assert coord.should_stop() and not looper.is_alive()
    with pytest.raises(ValueError, match="boom"):
        coord.join([looper])
    # an interval that is no number fails at the first boundary (TensorFlow's TypeError)
    coord = tf.train.Coordinator()
    looper = tf.train.LooperThread.loop(coord, "x", lambda: None)  # type: ignore[arg-type]
    looper.join(WAIT)
    with pytest.raises(TypeError):
        coord.join([looper])


def test_a_looper_refuses_what_tensorflow_refuses_and_runs_a_subclass_hooks() -> None:
    coord = tf.train.Coordinator()
    with pytest.raises(ValueError, match="'coord' argument must be a Coordinator: c"):
        tf.train.LooperThread("c", 0.1, lambda: None)  # type: ignore[arg-type]
    for extra in ({"args": (1,)}, {"kwargs": {"a": 1}}):
        with pytest.raises(ValueError, match="'args' and 'kwargs' argument require"):
            tf.train.LooperThread(coord, 0.1, **extra)

    class Counting(tf.train.LooperThread):
        def __init__(self, coord: Any) -> None:
            super().__init__(coord, 0.01)
            self.count = 0
            self.events: list[str] = []

        def start_loop(self) -> None:
            self.events.append("start")

        def run_loop(self) -> None:
            self.count += 1

        def stop_loop(self) -> None:
            self.events.append("stop")

    looper = Counting(coord)
    assert not looper.is_alive()  # made, not started
    looper.start()
    wait_until(lambda: looper.count > 1)
    coord.request_stop()
    coord.join(stop_grace_period_secs=WAIT)
    assert looper.events == ["start", "stop"]
    # no target: run_loop does nothing
    quiet = tf.train.LooperThread.loop(tf.train.Coordinator(), 0.01, None)
    assert quiet.is_alive()
    quiet._coord.request_stop()
    quiet.join(WAIT)
