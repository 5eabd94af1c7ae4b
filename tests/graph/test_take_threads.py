"""The threads of a run waiting on many takes are bounded (issue 26): TensorFlow
serves them from its inter-op pool; tf_accum runs them on at most
``TAKE_THREADS`` threads per run, and a take whose result an apply of the same
run needs gets a thread at once, so a take waiting for that apply never
deadlocks the run."""

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
            wait_for_waiting(sess, executor.TAKE_THREADS)  # the takes really wait
            assert not run.done()
            sess.run(applies)
            got = run.result(120)
    assert [float(v[0]) for v in got] == [float(i) for i in range(n)]  # every take served
    # the run's thread is the Background one; the sampler is one more
    assert threads.peak <= before + 2 + executor.TAKE_THREADS


def test_a_take_an_apply_of_the_run_needs_is_not_starved() -> None:
    """Takes waiting on every bounded thread for applies whose gradients are
    takes of the same run: those takes get threads of their own."""
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
