"""Blocking takes, timeouts, cancellation and many threads in graph mode
(cases D23-D30, S31, S32): takes run in worker threads,
released by applies from the test thread, cancelled by ``sess.close()``."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest

import tf_accum.compat.v1 as tf
from tests.graph.support import BOUNDED, DenseOps, SparseOps, wait_for_waiting, waiting
from tests.helpers import WAIT, Background, wait_until
from tf_accum import errors

pytestmark = pytest.mark.usefixtures("graph")


def test_blocked_take_is_released_by_the_apply_that_completes_it() -> None:  # D23
    acc = DenseOps(shape=[1])
    with tf.Session() as sess:
        acc.put(sess, [1])
        acc.put(sess, [2])
        take = Background(acc.get, sess, 3)
        wait_for_waiting(sess, 1)
        assert not take.done()
        acc.put(sess, [6])
        np.testing.assert_array_equal(take.result(), [3])
        assert acc.count(sess) == 0


def test_gradients_after_the_release_are_stale() -> None:  # D24
    acc = DenseOps(shape=[1])
    with tf.Session() as sess:
        take = Background(acc.get, sess, 2)
        wait_for_waiting(sess, 1)
        acc.put(sess, [1])
        acc.put(sess, [3])
        np.testing.assert_array_equal(take.result(), [2])
        acc.put(sess, [100])
        assert acc.count(sess) == 0


def test_waiting_takes_are_served_in_order() -> None:  # D25
    acc = DenseOps(shape=[1])
    with tf.Session() as sess:
        first = Background(acc.get, sess, 1)
        wait_for_waiting(sess, 1)
        second = Background(acc.get, sess, 1)
        wait_for_waiting(sess, 2)
        acc.put(sess, [1])
        np.testing.assert_array_equal(first.result(), [1])
        acc.put(sess, [2])  # stale: the take made the step 1
        assert waiting(sess) == 1 and not second.done()
        acc.put(sess, [3], 1)
        np.testing.assert_array_equal(second.result(), [3])


def test_head_of_line_blocking() -> None:  # D26
    acc = DenseOps(shape=[1])
    with tf.Session() as sess:
        big = Background(acc.get, sess, 3)
        wait_for_waiting(sess, 1)
        acc.put(sess, [1])
        small = Background(acc.get, sess, 1)
        wait_for_waiting(sess, 2)
        assert not small.done() and acc.count(sess) == 1
        acc.put(sess, [2])
        acc.put(sess, [3])
        np.testing.assert_array_equal(big.result(), [2])
        assert waiting(sess) == 1 and not small.done()
        acc.put(sess, [5], 1)
        np.testing.assert_array_equal(small.result(), [5])


def test_timed_out_head_lets_the_next_take_through() -> None:  # D27
    acc = DenseOps(shape=[1])
    with tf.Session() as sess:
        head = Background(acc.get, sess, 3, options=tf.RunOptions(timeout_in_ms=200))
        wait_for_waiting(sess, 1)
        second = Background(acc.get, sess, 1)
        wait_for_waiting(sess, 2)
        acc.put(sess, [7])
        error = head.error()
        assert isinstance(error, errors.DeadlineExceededError)
        assert error.message == "Timed out waiting for notification"
        np.testing.assert_array_equal(second.result(), [7])


@pytest.mark.parametrize("kind", ["dense", "sparse"])
def test_timed_out_take_consumes_nothing(kind: str) -> None:  # D28
    acc: Any = DenseOps(shape=[1]) if kind == "dense" else SparseOps(shape=[3, 1])
    with tf.Session() as sess:
        with pytest.raises(
            errors.DeadlineExceededError, match="Timed out waiting for notification"
        ):
            acc.get(sess, 1, options=tf.RunOptions(timeout_in_ms=50))
        assert waiting(sess) == 0
        if kind == "dense":
            acc.put(sess, [4])
        else:
            acc.put(sess, [0], [[4]])
        assert acc.count(sess) == 1


def test_a_timeout_does_not_touch_runs_that_finish_in_time() -> None:
    acc = DenseOps(shape=[1])
    with tf.Session() as sess:
        acc.put(sess, [4])
        got = acc.get(sess, 1, options=tf.RunOptions(timeout_in_ms=60_000))
        np.testing.assert_array_equal(got, [4])


@pytest.mark.parametrize("kind", ["dense", "sparse"])
def test_close_cancels_waiting_takes(kind: str) -> None:  # D29, S32
    acc = DenseOps(shape=[1]) if kind == "dense" else SparseOps(shape=[3, 1])
    sess = tf.Session()
    takes = [Background(acc.get, sess, 1) for _ in range(2)]
    wait_for_waiting(sess, 2)
    sess.close()
    for take in takes:
        error = take.error()
        assert isinstance(error, errors.CancelledError)
        assert error.message == "TakeGrad operation was cancelled"
    assert sess.table.live_handles() == []  # the session's accumulators are freed
    with pytest.raises(RuntimeError, match="Attempted to use a closed Session."):
        acc.count(sess)


def test_a_run_whose_accumulator_a_close_freed_is_cancelled(monkeypatch) -> None:
    # The close lands after the run has its handle and before the apply looks
    # it up: TensorFlow cancels such a run ("Session has been closed.")
    acc = DenseOps(shape=[1])
    sess = tf.Session()
    acc.put(sess, [1])
    made = tf.Session.resource_for

    def then_closed(self: tf.Session, op: Any, create: Any) -> int:
        handle = made(self, op, create)
        self.close()
        return handle

    monkeypatch.setattr(tf.Session, "resource_for", then_closed)
    with pytest.raises(errors.CancelledError, match=r"^Session has been closed\.$"):
        acc.put(sess, [2])


def test_threads_running_while_the_session_closes_see_only_cancellation() -> None:
    """Real threads, real closes: each run either completes, is cancelled by
    the close, or finds the session closed; never a freed accumulator."""
    acc = DenseOps(shape=[256])
    gradient = np.ones(256, np.float32)
    seen: list[str] = []
    for _ in range(10):
        sess = tf.Session()
        acc.put(sess, gradient)  # the accumulator exists before the threads start

        def work(sess: tf.Session = sess) -> None:
            while True:
                try:
                    acc.put(sess, gradient)
                except errors.CancelledError:
                    seen.append("cancelled")
                    return
                except RuntimeError as error:
                    assert "closed Session" in str(error)
                    seen.append("closed")
                    return

        def applied(sess: tf.Session = sess) -> bool:
            return int(acc.count(sess)) > 20

        workers = [Background(work) for _ in range(2)]
        wait_until(applied)
        sess.close()
        for worker in workers:
            worker.result()
    assert len(seen) == 20 and set(seen) <= {"cancelled", "closed"}


def test_closing_one_session_leaves_another_alone() -> None:  # D29, D45
    acc = DenseOps(shape=[1], shared_name="x")
    closing, staying = tf.Session(), tf.Session()
    cancelled = Background(acc.get, closing, 1)
    kept = Background(acc.get, staying, 1)
    wait_for_waiting(closing, 1)
    wait_for_waiting(staying, 1)
    closing.close()
    assert isinstance(cancelled.error(), errors.CancelledError)
    assert not kept.done()
    acc.put(staying, [9])
    np.testing.assert_array_equal(kept.result(), [9])
    staying.close()


def test_set_global_step_does_not_release_a_take() -> None:  # D30
    acc = DenseOps(shape=[1])
    with tf.Session() as sess:
        take = Background(acc.get, sess, 1)
        wait_for_waiting(sess, 1)
        acc.set(sess, 5)
        acc.put(sess, [1], 4)
        assert waiting(sess) == 1 and not take.done()
        acc.put(sess, [2], 5)
        np.testing.assert_array_equal(take.result(), [2])


def test_sparse_take_released_by_a_second_gradient() -> None:  # S31
    acc = SparseOps(shape=[3, 1])
    with tf.Session() as sess:
        acc.put(sess, [0], [[1]])
        take = Background(acc.get, sess, 2)
        wait_for_waiting(sess, 1)
        assert not take.done()
        acc.put(sess, [2], [[4]])
        result = take.result()
        np.testing.assert_array_equal(result.indices, [0, 2])
        np.testing.assert_array_equal(result.values, [[1], [4]])
        np.testing.assert_array_equal(result.shape, [3, 1])


def test_one_run_fetching_a_take_and_the_applies_it_needs() -> None:  # issue: executor
    q = tf.ConditionalAccumulator(tf.float32, shape=[2])
    grads = [tf.placeholder(tf.float32, [2]) for _ in range(3)]
    applies = [q.apply_grad(g) for g in grads]
    take = q.take_grad(3)
    with tf.Session() as sess:
        feed = {g: [i, 2 * i] for i, g in enumerate(grads)}
        got, *rest = sess.run([take, *applies], feed, options=BOUNDED)
        assert rest == [None, None, None]
        np.testing.assert_array_equal(got, [1, 2])
        assert sess.run(q.num_accumulated()) == 0


def test_a_take_ready_before_its_applies_does_not_starve_them() -> None:  # issue: executor
    """The take's inputs are ready at once, the gradients only after a chain of
    ops: running the take first on the run's own thread would wait forever."""
    q = tf.ConditionalAccumulator(tf.float32, shape=[2])
    take = q.take_grad(2)
    grad = tf.placeholder(tf.float32, [2])
    late = grad
    for _ in range(3):
        late = tf.identity(late)
    applies = [q.apply_grad(late), q.apply_grad(tf.add(late, 2.0))]
    for fetches in ([take, *applies], [*applies, take]):
        with tf.Session() as sess:
            got = sess.run(fetches, {grad: [1, 2]}, options=BOUNDED)
            np.testing.assert_array_equal(got[0 if got[0] is not None else 2], [2, 3])


def test_one_run_with_two_takes_and_their_applies(graph) -> None:  # issue: executor
    first = tf.ConditionalAccumulator(tf.float32, shape=[1])
    second = tf.SparseConditionalAccumulator(tf.float32, shape=[3, 1])
    grad = tf.placeholder(tf.float32, [1])
    late = tf.identity(tf.identity(grad))
    takes = [first.take_grad(2), second.take_grad(2)]
    applies = [
        first.apply_grad(late),
        first.apply_grad(tf.add(late, 2.0)),
        second.apply_grad([0], tf.identity([[4.0]])),
        second.apply_grad([2], [[6.0]]),
    ]
    with tf.Session() as sess:
        dense, sparse, *rest = sess.run([*takes, *applies], {grad: [1]}, options=BOUNDED)
        assert rest == [None] * 4
        np.testing.assert_array_equal(dense, [2])
        np.testing.assert_array_equal(sparse.indices, [0, 2])
        np.testing.assert_array_equal(sparse.values, [[4], [6]])


def test_a_failing_op_withdraws_the_runs_waiting_take() -> None:  # issue: executor
    q = tf.ConditionalAccumulator(tf.float32, shape=[2])
    grad = tf.placeholder(tf.float32)
    bad = q.apply_grad(grad)
    take = q.take_grad(1)
    with tf.Session() as sess:
        with pytest.raises(errors.InvalidArgumentError, match="Shape mismatch"):
            sess.run([take, bad], {grad: [1, 2, 3]}, options=BOUNDED)
        assert waiting(sess) == 0
        sess.run(bad, {grad: [1, 2]})
        assert sess.run(q.num_accumulated()) == 1  # the withdrawn take consumed nothing


def test_a_run_deadline_covers_a_take_on_its_own_thread() -> None:  # RunOptions, executor
    q = tf.ConditionalAccumulator(tf.float32, shape=[2])
    first, second = q.apply_grad([1.0, 1.0]), q.apply_grad([3.0, 3.0])
    take = q.take_grad(3)
    with tf.Session() as sess:
        with pytest.raises(errors.DeadlineExceededError):
            sess.run([take, first, second], options=tf.RunOptions(timeout_in_ms=100))
        assert waiting(sess) == 0
        assert sess.run(q.num_accumulated()) == 2
        sess.run(first)
        got = sess.run(take, options=BOUNDED)
        np.testing.assert_array_equal(got, [np.float32(5) / np.float32(3)] * 2)


def test_control_dependencies_order_applies_before_count_and_take() -> None:  # issue
    q = tf.ConditionalAccumulator(tf.float32, shape=[1])
    apply = q.apply_grad([2.0])
    with tf.control_dependencies([apply]):
        count = q.num_accumulated(name="after_apply")
    with tf.control_dependencies([count]):
        take = q.take_grad(1)
    assert count.op.control_inputs == (apply,)
    with tf.Session() as sess:
        assert sess.run(count) == 1  # the apply ran first
        # the take runs after the count, which runs after another apply
        np.testing.assert_array_equal(sess.run(take, options=BOUNDED), [2])
        assert sess.run(q.num_accumulated()) == 0


def test_synchronous_replicas_conserve_every_gradient() -> None:  # issue: many threads, one session
    """Worker threads apply through placeholders while a chief takes on the same
    session: every applied gradient is taken exactly once."""
    workers, rounds, aggregate = 4, 10, 3
    q = tf.ConditionalAccumulator(tf.float64, shape=[2], reduction_type="SUM")
    grad = tf.placeholder(tf.float64, [2])
    step = tf.placeholder(tf.int64, [])
    apply = q.apply_grad(grad, local_step=step)
    take = q.take_grad(aggregate)
    global_step = tf.train.get_or_create_global_step()
    bump = tf.assign_add(global_step, 1)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        stop = threading.Event()
        applied: list[float] = []
        lock = threading.Lock()

        def worker(index: int) -> None:
            k = 0
            while not stop.is_set() and k < 100_000:
                value = float(index * 100_000 + k)
                # a step no take can reach in this test: nothing is stale
                sess.run(apply, {grad: [value, 1.0], step: 1_000})
                with lock:
                    applied.append(value)
                k += 1

        def chief() -> list[np.ndarray]:
            totals = []
            for _ in range(rounds):
                total, _ = sess.run([take, bump], options=tf.RunOptions(timeout_in_ms=WAIT * 1000))
                totals.append(total)
            stop.set()
            return totals

        threads = [Background(worker, i) for i in range(workers)]
        totals = Background(chief).result()
        for thread in threads:
            thread.result()
        assert sess.run(global_step) == rounds
        assert all(t[1] >= aggregate for t in totals)
        if sess.run(q.num_accumulated()):
            totals.append(sess.run(q.take_grad(1), options=BOUNDED))
        taken = np.sum(totals, axis=0)
        assert taken[1] == len(applied)
        assert taken[0] == sum(applied)


@pytest.mark.parametrize("kind", ["dense", "sparse"])
def test_take_timeout_argument_bounds_the_take_when_run(
    graph, kind: str
) -> None:  # docs/departures.md T2
    if kind == "dense":
        q: Any = tf.ConditionalAccumulator(tf.float32, shape=[1])
        apply = q.apply_grad([4.0])
    else:
        q = tf.SparseConditionalAccumulator(tf.float32, shape=[3, 1])
        apply = q.apply_grad([0], [[4.0]])
    take = q.take_grad(1, timeout=0.05)
    with tf.Session() as sess:
        with pytest.raises(
            errors.DeadlineExceededError, match="Timed out waiting for notification"
        ):
            sess.run(take)
        assert waiting(sess) == 0
        sess.run(apply)
        assert sess.run(q.num_accumulated()) == 1
    before = len(graph.get_operations())
    with pytest.raises(ValueError, match="timeout must be a non-negative number of seconds"):
        q.take_grad(1, timeout=-1)
    with pytest.raises(ValueError, match="timeout must be a non-negative number of seconds"):
        q.take_grad(1, timeout=float("nan"))
    assert not [op for op in graph.get_operations()[before:] if "TakeGradient" in op.type]


def test_many_threads_each_run_takes_with_their_applies(graph) -> None:  # issue: executor
    accs = [tf.ConditionalAccumulator(tf.float32, shape=[1]) for _ in range(4)]
    runs = [
        [a.take_grad(2), a.apply_grad([1.0], local_step=10**6), a.apply_grad([3.0], 10**6)]
        for a in accs
    ]
    with tf.Session() as sess:

        def work(i: int) -> list[float]:
            return [
                float(sess.run(runs[i], options=tf.RunOptions(timeout_in_ms=WAIT * 1000))[0][0])
                for _ in range(50)
            ]

        tasks = [Background(work, i) for i in range(4)]
        assert [task.result() for task in tasks] == [[2.0] * 50] * 4
        assert sess.run([a.num_accumulated() for a in accs]) == [0, 0, 0, 0]


def test_close_cancels_takes_waiting_on_their_own_threads(graph) -> None:  # D29, executor
    accs = [tf.ConditionalAccumulator(tf.float32, shape=[1]) for _ in range(3)]
    runs = [[a.take_grad(3), a.apply_grad([1.0])] for a in accs]
    sess = tf.Session()
    tasks = [Background(sess.run, r) for r in runs]
    wait_for_waiting(sess, 3)
    sess.close()
    for task in tasks:
        error = task.error()
        assert isinstance(error, errors.CancelledError), error
        assert error.message == "TakeGrad operation was cancelled"


def test_feeding_a_takes_output_skips_the_take(graph) -> None:  # feeds: any tensor
    q = tf.ConditionalAccumulator(tf.float32, shape=[2])
    take = q.take_grad(1)
    doubled = tf.add(take, take)
    with tf.Session() as sess:
        bounded = tf.RunOptions(timeout_in_ms=WAIT * 1000)
        assert sess.run(doubled, {take: [1, 2]}, options=bounded).tolist() == [2, 4]
        assert waiting(sess) == 0


def test_parallel_takes_each_get_one_round(graph) -> None:  # one round per take
    q = tf.ConditionalAccumulator(tf.float32, shape=[])
    grad = tf.placeholder(tf.float32, [])
    step = tf.placeholder(tf.int64, [])
    apply = q.apply_grad(grad, local_step=step)
    take = q.take_grad(1)
    with tf.Session() as sess:
        takes = [Background(sess.run, take, options=BOUNDED) for _ in range(4)]
        wait_for_waiting(sess, 4)
        for round_ in range(4):
            # each round's gradient is applied at that round's step: never stale
            sess.run(apply, {grad: 10.0 * (round_ + 1), step: round_})
        assert sorted(float(t.result()) for t in takes) == [10.0, 20.0, 30.0, 40.0]
        assert waiting(sess) == 0


@pytest.mark.parametrize("kind", ["dense", "sparse"])
def test_parallel_applies_then_one_take(graph, kind: str) -> None:  # many threads, one session
    workers = 8
    if kind == "dense":
        q: Any = tf.ConditionalAccumulator(tf.float32, shape=[2])
        value = tf.placeholder(tf.float32, [2])
        apply = q.apply_grad(value)
    else:
        q = tf.SparseConditionalAccumulator(tf.float32, shape=[4, 2])
        value = tf.placeholder(tf.float32, [1, 2])
        apply = q.apply_grad([1], value, [4, 2])
    take = q.take_grad(workers)
    with tf.Session() as sess:
        result = Background(sess.run, take, options=BOUNDED)
        wait_for_waiting(sess, 1)
        tasks = [
            Background(sess.run, apply, {value: [i, -i] if kind == "dense" else [[i, -i]]})
            for i in range(workers)
        ]
        for task in tasks:
            task.result()
        got = result.result()
        mean = (workers - 1) / 2
        if kind == "dense":
            np.testing.assert_array_equal(got, [mean, -mean])
        else:
            np.testing.assert_array_equal(got.indices, [1])
            np.testing.assert_array_equal(got.values, [[mean, -mean]])
        assert sess.run(q.num_accumulated()) == 0
