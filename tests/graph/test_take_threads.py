"""The threads of a run waiting on many takes: TensorFlow serves them from
its inter-op pool; tf_accum queues an accumulator take's attempt in the
accumulator and holds no thread for it, so a run waiting on 10,000 takes adds
no thread; other blocking ops (queue ops) share at most ``TAKE_THREADS``
threads per run, and one whose result an apply of the same run needs gets a
thread at once, so a take waiting for that apply never deadlocks the run."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest

import tf_accum as tfa
import tf_accum.compat.v1 as tf
from tests.graph.support import BOUNDED, wait_for_waiting
from tests.helpers import WAIT, Background
from tf_accum.graph import executor

pytestmark = pytest.mark.usefixtures("graph")
raw = tfa.raw_ops


def _accumulator(name: str) -> Any:
    return raw.ResourceConditionalAccumulator(dtype=tf.float32, shape=[1], shared_name=name)


def _take(handle: Any) -> Any:
    return raw.ResourceAccumulatorTakeGradient(handle=handle, num_required=1, dtype=tf.float32)


def _apply(handle: Any, gradient: Any) -> Any:
    return raw.ResourceAccumulatorApplyGradient(handle=handle, local_step=0, gradient=gradient)


class PeakThreads:
    """The most threads alive at once while the block runs (sampled)."""

    def __init__(self) -> None:
        self.peak = threading.active_count()
        self._stop = threading.Event()
        self._sampler = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(0.0005):
            self.peak = max(self.peak, threading.active_count())

    def __enter__(self) -> PeakThreads:
        self._sampler.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._sampler.join(WAIT)


def test_ten_thousand_waiting_takes_use_a_bounded_number_of_threads() -> None:
    n = 10_000
    handles = [_accumulator(f"a{i}") for i in range(n)]
    takes = [_take(h) for h in handles]
    applies = tf.group(*[_apply(h, [float(i)]) for i, h in enumerate(handles)])
    with tf.Session() as sess:
        sess.run(handles)  # made before the run, so the takes find them
        before = threading.active_count()
        with PeakThreads() as threads:
            run = Background(sess.run, takes, options=tf.RunOptions(timeout_in_ms=120_000))
            wait_for_waiting(sess, n)  # the takes really wait, all at once
            assert not run.done()
            sess.run(applies)
            got = run.result(120)
    assert [float(v[0]) for v in got] == [float(i) for i in range(n)]  # every take served
    # the run's thread is the Background one; the sampler is one more
    assert threads.peak <= before + 2


def test_ten_thousand_waiting_takes_that_feed_applies_of_the_run_add_no_thread() -> None:
    """Each take feeds an apply of the same run (so each had a thread of its
    own when a waiting take held one); the run's deadline still bounds it."""
    n = 10_000
    sources = [_accumulator(f"source{i}") for i in range(n)]
    sinks = [_accumulator(f"sink{i}") for i in range(n)]
    feeders = tf.group(*[_apply(k, _take(s)) for s, k in zip(sources, sinks, strict=True)])
    fills = tf.group(*[_apply(s, [float(i)]) for i, s in enumerate(sources)])
    counts = [raw.ResourceAccumulatorNumAccumulated(handle=k) for k in sinks]
    with tf.Session() as sess:
        sess.run([sources, sinks])
        before = threading.active_count()
        with PeakThreads() as threads:
            run = Background(sess.run, feeders, options=tf.RunOptions(timeout_in_ms=120_000))
            wait_for_waiting(sess, n)
            assert not run.done()
            sess.run(fills)
            run.result(120)
        assert threads.peak <= before + 2
        assert sess.run(counts) == [1] * n
        # a run that times out withdraws all its waiting takes: nothing is consumed
        with pytest.raises(tf.errors.DeadlineExceededError):
            sess.run(feeders, options=tf.RunOptions(timeout_in_ms=300))
        wait_for_waiting(sess, 0)
        fresh = [
            raw.ResourceAccumulatorApplyGradient(handle=s, local_step=2**40, gradient=[1.0])
            for s in sources[:3]
        ]
        sess.run(fresh)  # not eaten by a withdrawn take
        left = sess.run([raw.ResourceAccumulatorNumAccumulated(handle=s) for s in sources[:3]])
        assert left == [1] * 3


def test_a_take_an_apply_of_the_run_needs_is_not_starved() -> None:
    """Takes waiting for applies whose gradients are takes of the same run:
    those takes are served, whatever waits before them."""
    n = 3 * executor.TAKE_THREADS
    waiting_on = [_accumulator(f"w{i}") for i in range(n)]
    sources = [_accumulator(f"s{i}") for i in range(n)]
    sinks = [_take(h) for h in waiting_on]  # fetched first: they fill the bounded threads
    feeders = [_apply(w, _take(s)) for w, s in zip(waiting_on, sources, strict=True)]
    with tf.Session() as sess:
        sess.run([_apply(s, [float(i)]) for i, s in enumerate(sources)])
        got, _ = sess.run([sinks, feeders], options=BOUNDED)
    assert [float(v[0]) for v in got] == [float(i) for i in range(n)]


def test_queued_takes_of_a_failed_run_never_start() -> None:
    n = 4 * executor.TAKE_THREADS
    handles = [_accumulator(f"q{i}") for i in range(n)]
    takes = [_take(h) for h in handles]
    with tf.Session() as sess:
        sess.run(handles)
        with pytest.raises(tf.errors.DeadlineExceededError):
            sess.run(takes, options=tf.RunOptions(timeout_in_ms=200))
        wait_for_waiting(sess, 0)  # withdrawn, none left queued or started late
        sess.run([_apply(h, [1.0]) for h in handles])
        counts = sess.run([raw.ResourceAccumulatorNumAccumulated(handle=h) for h in handles])
    assert np.all(np.asarray(counts) == 1)  # nothing was taken


def test_a_waiting_take_past_its_own_timeout_fails_the_run_and_consumes_nothing() -> None:
    slow, quick = _accumulator("slow"), _accumulator("quick")
    patient = _take(slow)
    impatient: Any = raw.ResourceAccumulatorTakeGradient(
        handle=quick, num_required=2, dtype=tf.float32, timeout=0.2
    )
    with tf.Session() as sess:
        sess.run([slow, quick])
        sess.run(_apply(quick, [1.0]))  # one of the two it needs
        with pytest.raises(tf.errors.DeadlineExceededError) as raised:
            sess.run([patient, impatient], options=BOUNDED)
        assert raised.value.op is impatient.op
        wait_for_waiting(sess, 0)  # both withdrawn
        counts = [raw.ResourceAccumulatorNumAccumulated(handle=h) for h in (slow, quick)]
        assert sess.run(counts) == [0, 1]
