"""FIFOQueue, its raw ops and QueueRunner, against what TensorFlow 2.21 does.

What TensorFlow does was seen by running the same calls on
``tensorflow.compat.v1`` (eagerly and in graph mode): op names and types,
static shapes, values and dtypes, the error classes and messages quoted
below, that a plain close waits behind the enqueues already waiting, that
``close(cancel_pending_enqueues=True)`` fails them with "Enqueue operation
was cancelled", that a closing session fails a waiting dequeue with
"Dequeue operation was cancelled", and that a queue runner with a
coordinator has one thread per enqueue op and one "close_on_stop" thread.
Threads are real and every wait is bounded.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tf_accum as tfa
import tf_accum.compat.v1 as tf
from tests.graph.support import BOUNDED
from tests.helpers import WAIT, Background, wait_until
from tf_accum import errors
from tf_accum.dtypes import string_ref
from tf_accum.queues import fifo
from tf_accum.resources import current_table

raw = tfa.raw_ops
F32_I32 = [tf.float32, tf.int32]


def waiting(handle: Any, table: Any = None) -> tuple[int, int]:
    """(enqueues and closes, dequeues) waiting on the queue ``handle``."""
    found: Any = (table or current_table()).lookup(handle)
    counts: tuple[int, int] = found.waiting()
    return counts


def queue_handle(capacity: int = 2, shapes: Any = ([2], []), **kwargs: Any) -> Any:
    return raw.FIFOQueueV2(
        component_types=F32_I32, shapes=list(shapes), capacity=capacity, **kwargs
    )


def enqueue(handle: Any, value: float, label: int, **kwargs: Any) -> None:
    raw.QueueEnqueueV2(handle=handle, components=[[value, value], label], **kwargs)


def dequeue(handle: Any, **kwargs: Any) -> list[Any]:
    result: list[Any] = raw.QueueDequeueV2(handle=handle, component_types=F32_I32, **kwargs)
    return result


def labels(handle: Any) -> list[int]:
    """Every label left in the queue (it must not block)."""
    return [int(dequeue(handle, timeout=0)[1]) for _ in range(int(raw.QueueSizeV2(handle=handle)))]


# --- values, dtypes and shapes (eager) --------------------------------------------------


def test_elements_come_out_in_order_with_their_dtypes_and_shapes() -> None:
    h = queue_handle(capacity=5)
    enqueue(h, 1.0, 7)
    raw.QueueEnqueueManyV2(handle=h, components=[[[2.0, 2.0], [3.0, 3.0]], [8, 9]])
    assert raw.QueueSizeV2(handle=h) == 3 and type(raw.QueueSizeV2(handle=h)) is np.int32
    first = dequeue(h)
    assert [a.dtype for a in first] == [np.float32, np.int32]
    assert first[0].tolist() == [1.0, 1.0] and first[0].shape == (2,) and first[1].shape == ()
    many = raw.QueueDequeueManyV2(handle=h, n=2, component_types=F32_I32)
    assert many[0].shape == (2, 2) and many[1].tolist() == [8, 9]
    # as TensorFlow: n=0 gives empty batches of the element shapes
    empty = raw.QueueDequeueManyV2(handle=h, n=0, component_types=F32_I32)
    assert (empty[0].shape, empty[1].shape) == ((0, 2), (0,))
    assert raw.QueueIsClosedV2(handle=h) == np.bool_(False)


def test_an_enqueued_array_is_copied() -> None:
    h = raw.FIFOQueueV2(component_types=[tf.float32], shapes=[[2]], capacity=2)
    value = np.array([1.0, 2.0], dtype=np.float32)
    raw.QueueEnqueueV2(handle=h, components=[value])
    value[0] = 99.0
    assert raw.QueueDequeueV2(handle=h, component_types=[tf.float32])[0].tolist() == [1.0, 2.0]


def test_the_class_gives_one_value_a_list_or_a_dict() -> None:
    single = tf.FIFOQueue(3, tf.int32, shapes=[[]])
    assert (single.dtypes, single.names, single.name) == ([tf.int32], None, "fifo_queue")
    single.enqueue(5)
    single.enqueue_many([[6, 7]])
    assert int(single.dequeue()) == 5
    assert single.dequeue_many(2).tolist() == [6, 7]
    named = tf.FIFOQueue(5, [tf.int32, tf.float32], shapes=[[], []], names=["a", "b"])
    named.enqueue({"a": 1, "b": 2.0})
    named.enqueue_many({"a": [2, 3], "b": [3.0, 4.0]})
    out = named.dequeue()
    assert set(out) == {"a", "b"} and int(out["a"]) == 1 and out["b"].dtype == np.float32
    named.close()
    # as TensorFlow: a closed queue gives what it has to dequeue_up_to
    assert named.dequeue_up_to(5)["a"].tolist() == [2, 3]


def test_the_class_refuses_what_tensorflows_python_layer_refuses() -> None:
    q = tf.FIFOQueue(3, F32_I32, shapes=[[2], []])
    with pytest.raises(ValueError, match=r"^Shapes \(3,\) and \(2,\) are incompatible$"):
        q.enqueue(([1.0, 2.0, 3.0], 7))
    with pytest.raises(TypeError):
        q.enqueue(([1.0, 2.0], 7.5))  # TensorFlow: "Cannot convert 7.5 to EagerTensor ..."
    with pytest.raises(ValueError, match=r"^Dimensions 2 and 3 are not compatible$"):
        q.enqueue_many(([[1.0, 2.0], [3.0, 4.0]], [1, 2, 3]))
    with pytest.raises(ValueError, match="Queue must have names to enqueue a dictionary"):
        q.enqueue({"a": 1})
    # TensorFlow drops the extra component silently (docs/departures.md T28)
    with pytest.raises(ValueError, match="at most 2 components"):
        q.enqueue(([1.0, 2.0], 7, 8))
    named = tf.FIFOQueue(5, [tf.int32, tf.float32], shapes=[[], []], names=["a", "b"])
    with pytest.raises(ValueError, match="^You must enqueue a dictionary in a Queue with names$"):
        named.enqueue((1, 2.0))
    with pytest.raises(ValueError, match=r"^Keys in dictionary to enqueue do not match names"):
        named.enqueue({"a": 1})
    with pytest.raises(ValueError, match=r"len\(names\)=2,len\(dtypes\)=1"):
        tf.FIFOQueue(5, tf.int32, names=["a", "b"])
    assert q.size() == 0  # nothing refused changed the queue


def test_raw_ops_refuse_bad_components_with_tensorflows_messages() -> None:
    h = queue_handle()
    with pytest.raises(
        errors.InvalidArgumentError,
        match=r"^Signature mismatch, have: resource, float, float-> expected: resource, float, "
        r"int32->$",
    ):
        raw.QueueEnqueueV2(handle=h, components=[[1.0, 2.0], 7.5])
    with pytest.raises(errors.InvalidArgumentError, match=r"have: resource, float->"):
        raw.QueueEnqueueV2(handle=h, components=[[1.0, 2.0]])
    with pytest.raises(
        errors.InvalidArgumentError,
        match=r"^Shape mismatch in tuple component 0\. Expected \[2\], got \[3\]$",
    ):
        raw.QueueEnqueueV2(handle=h, components=[[1.0, 2.0, 3.0], 7])
    with pytest.raises(
        errors.InvalidArgumentError,
        match=r"^Shape mismatch in tuple component 1\. Expected \[2\], got \[3\]$",
    ):
        raw.QueueEnqueueManyV2(handle=h, components=[[[1.0, 1.0]] * 2, [1, 2, 3]])
    with pytest.raises(errors.InvalidArgumentError, match=r"^Timeout not supported yet\.$"):
        raw.QueueDequeueV2(handle=h, component_types=F32_I32, timeout_ms=50)
    with pytest.raises(
        errors.InvalidArgumentError,
        match=r"^Signature mismatch, have: resource->float expected: resource->float, int32$",
    ):
        raw.QueueDequeueV2(handle=h, component_types=[tf.float32])
    with pytest.raises(
        errors.InvalidArgumentError, match=r"^DequeueManyOp requested -1 < 0 elements$"
    ):
        raw.QueueDequeueManyV2(handle=h, n=-1, component_types=F32_I32)
    unshaped = raw.FIFOQueueV2(component_types=[tf.int32], capacity=3)
    with pytest.raises(errors.InvalidArgumentError, match="require the components to have"):
        raw.QueueDequeueManyV2(handle=unshaped, n=1, component_types=[tf.int32])
    with pytest.raises(errors.InvalidArgumentError, match="must be at least minimum 1"):
        raw.FIFOQueueV2(component_types=[], capacity=3)
    with pytest.raises(errors.InvalidArgumentError, match="^Different number of component types"):
        raw.FIFOQueueV2(component_types=[tf.int32, tf.int32], shapes=[[]])
    with pytest.raises(TypeError, match="only takes keyword args"):
        raw.QueueSizeV2(h)  # type: ignore[call-arg]
    assert raw.QueueSizeV2(handle=h) == 0


def test_shared_names_share_and_conflicting_attributes_are_refused() -> None:
    a = raw.FIFOQueueV2(component_types=[tf.int32], shapes=[[]], capacity=5, shared_name="q")
    b = raw.FIFOQueueV2(component_types=[tf.int32], shapes=[[]], capacity=5, shared_name="q")
    raw.QueueEnqueueV2(handle=a, components=[4])
    assert raw.QueueSizeV2(handle=b) == 1
    with pytest.raises(
        errors.InvalidArgumentError,
        match="^Shared queue 'q' has component types int32 but requested component types "
        "were float$",
    ):
        raw.FIFOQueueV2(component_types=[tf.float32], shapes=[[]], capacity=5, shared_name="q")
    with pytest.raises(
        errors.InvalidArgumentError,
        match="^Shared queue 'q' has capacity 5 but requested capacity was 6$",
    ):
        raw.FIFOQueueV2(component_types=[tf.int32], shapes=[[]], capacity=6, shared_name="q")
    raw.DestroyResourceOp(resource=a)
    with pytest.raises(errors.NotFoundError):
        raw.QueueSizeV2(handle=b)


def test_queue_and_accumulator_handles_are_not_interchangeable() -> None:
    q = queue_handle()
    acc = raw.ResourceConditionalAccumulator(dtype=tf.float32, shape=[2])
    with pytest.raises(errors.InvalidArgumentError, match="needs an accumulator"):
        raw.ResourceAccumulatorNumAccumulated(handle=q)
    with pytest.raises(errors.InvalidArgumentError, match="needs a queue"):
        raw.QueueSizeV2(handle=acc)


# --- closing --------------------------------------------------------------------------


def test_a_closed_queue_refuses_enqueues_and_runs_dry() -> None:
    h = queue_handle()
    enqueue(h, 1.0, 1)
    raw.QueueCloseV2(handle=h)
    assert bool(raw.QueueIsClosedV2(handle=h))
    name = current_table().lookup(h).label.split("/", 1)[1]
    with pytest.raises(errors.CancelledError, match=f"^FIFOQueue '{name}' is closed\\.$"):
        enqueue(h, 2.0, 2)
    with pytest.raises(
        errors.OutOfRangeError,
        match=rf"^FIFOQueue '{name}' is closed and has insufficient elements \(requested 2, "
        r"current size 1\)$",
    ):
        raw.QueueDequeueManyV2(handle=h, n=2, component_types=F32_I32)
    assert int(dequeue(h)[1]) == 1  # the refused dequeue_many took nothing
    with pytest.raises(errors.OutOfRangeError, match=r"\(requested 1, current size 0\)$"):
        dequeue(h)
    with pytest.raises(errors.CancelledError, match=f"^Queue '{name}' is already closed\\.$"):
        raw.QueueCloseV2(handle=h)
    raw.QueueCloseV2(handle=h, cancel_pending_enqueues=True)  # no error, as TensorFlow


def test_a_plain_close_waits_behind_the_enqueues_waiting_already() -> None:
    h = queue_handle(capacity=1)
    enqueue(h, 1.0, 1)
    pending = Background(enqueue, h, 2.0, 2)
    wait_until(lambda: waiting(h) == (1, 0))
    closing = Background(raw.QueueCloseV2, handle=h)
    wait_until(lambda: waiting(h) == (2, 0))
    assert not closing.done() and not bool(raw.QueueIsClosedV2(handle=h))
    assert int(dequeue(h)[1]) == 1  # room: the enqueue goes in, then the close
    assert pending.result() is None and closing.result() is None
    assert bool(raw.QueueIsClosedV2(handle=h)) and labels(h) == [2]


def test_close_with_cancel_pending_enqueues_fails_them() -> None:
    h = queue_handle(capacity=1)
    enqueue(h, 1.0, 1)
    pending = Background(enqueue, h, 2.0, 2)
    wait_until(lambda: waiting(h) == (1, 0))
    raw.QueueCloseV2(handle=h, cancel_pending_enqueues=True)
    error = pending.error()
    assert isinstance(error, errors.CancelledError)
    assert error.message == "Enqueue operation was cancelled"
    assert labels(h) == [1]


def test_closing_wakes_waiting_dequeues() -> None:
    h = queue_handle(capacity=4, shapes=([2], []))
    enqueue(h, 1.0, 1)
    up_to = Background(raw.QueueDequeueUpToV2, handle=h, n=3, component_types=F32_I32)
    wait_until(lambda: waiting(h) == (0, 1))
    plain = Background(dequeue, h)
    wait_until(lambda: waiting(h) == (0, 2))
    raw.QueueCloseV2(handle=h)
    assert up_to.result()[1].tolist() == [1]
    assert isinstance(plain.error(), errors.OutOfRangeError)


def test_destroying_cancels_waiting_dequeues() -> None:
    h = queue_handle()
    waiter = Background(dequeue, h)
    wait_until(lambda: waiting(h) == (0, 1))
    raw.DestroyResourceOp(resource=h)
    error = waiter.error()
    assert isinstance(error, errors.CancelledError)
    assert error.message == "Dequeue operation was cancelled"


# --- blocking -------------------------------------------------------------------------


def test_a_dequeue_waits_for_an_enqueue_and_an_enqueue_for_room() -> None:
    h = queue_handle(capacity=1)
    waiter = Background(dequeue, h)
    wait_until(lambda: waiting(h) == (0, 1))
    assert not waiter.done()
    enqueue(h, 5.0, 5)
    assert int(waiter.result()[1]) == 5
    enqueue(h, 6.0, 6)
    blocked = Background(enqueue, h, 7.0, 7)
    wait_until(lambda: waiting(h) == (1, 0))
    assert not blocked.done()
    assert int(dequeue(h)[1]) == 6
    blocked.result()
    assert labels(h) == [7]


def test_waiting_dequeues_are_served_first_in_first_out() -> None:
    h = queue_handle(capacity=5)
    first = Background(raw.QueueDequeueManyV2, handle=h, n=2, component_types=F32_I32)
    wait_until(lambda: waiting(h) == (0, 1))
    second = Background(dequeue, h)
    wait_until(lambda: waiting(h) == (0, 2))
    for label in (1, 2, 3):
        enqueue(h, float(label), label)
    assert first.result()[1].tolist() == [1, 2]
    assert int(second.result()[1]) == 3


def test_a_dequeue_that_times_out_consumes_nothing() -> None:
    h = queue_handle(capacity=3)
    enqueue(h, 1.0, 1)
    # TensorFlow loses the element a timed-out dequeue_many had taken (docs/departures.md T28)
    with pytest.raises(errors.DeadlineExceededError, match="^Timed out waiting for notification$"):
        raw.QueueDequeueManyV2(handle=h, n=2, component_types=F32_I32, timeout=0.05)
    with pytest.raises(errors.DeadlineExceededError):
        dequeue(raw.FIFOQueueV2(component_types=F32_I32, capacity=1), timeout=0.05)
    assert waiting(h) == (0, 0)
    enqueue(h, 2.0, 2)
    assert labels(h) == [1, 2]


def test_more_than_the_capacity_goes_through_in_pieces() -> None:
    h = raw.FIFOQueueV2(component_types=[tf.int32], shapes=[[]], capacity=2)
    feeder = Background(raw.QueueEnqueueManyV2, handle=h, components=[list(range(5))])
    batch = raw.QueueDequeueManyV2(handle=h, n=5, component_types=[tf.int32], timeout=WAIT)
    assert batch[0].tolist() == [0, 1, 2, 3, 4]
    feeder.result()
    # out of time, an enqueue_many leaves what it added (as TensorFlow: size 2)
    with pytest.raises(errors.DeadlineExceededError):
        raw.QueueEnqueueManyV2(handle=h, components=[list(range(5))], timeout=0.05)
    assert raw.QueueSizeV2(handle=h) == 2


def test_ctrl_c_withdraws_a_waiting_dequeue() -> None:
    assert threading.current_thread() is threading.main_thread()
    h = queue_handle(capacity=3)
    enqueue(h, 1.0, 1)

    def interrupt() -> None:
        wait_until(lambda: waiting(h) == (0, 1))
        os.kill(os.getpid(), signal.SIGINT)

    sender = threading.Thread(target=interrupt, daemon=True)
    sender.start()
    with pytest.raises(KeyboardInterrupt):
        raw.QueueDequeueManyV2(handle=h, n=2, component_types=F32_I32, timeout=WAIT)
    sender.join(WAIT)
    assert waiting(h) == (0, 0) and labels(h) == [1]


@pytest.mark.usefixtures("graph")
def test_ctrl_c_withdraws_a_dequeue_a_session_runs() -> None:
    q = tf.FIFOQueue(3, tf.int32, shapes=[[]])
    fill = q.enqueue(1)
    take_two = q.dequeue_many(2)
    with tf.Session() as sess:
        sess.run(fill)
        handle = sess.run(q.queue_ref)

        def interrupt() -> None:
            wait_until(lambda: waiting(handle, sess.table) == (0, 1))
            os.kill(os.getpid(), signal.SIGINT)

        sender = threading.Thread(target=interrupt, daemon=True)
        sender.start()
        with pytest.raises(KeyboardInterrupt):
            sess.run(take_two, options=BOUNDED)
        sender.join(WAIT)
        assert waiting(handle, sess.table) == (0, 0)
        assert sess.run(q.size()) == 1


def test_a_long_wait_says_what_it_waits_for(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(fifo, "REPORT_AFTER", 0.02)
    h = queue_handle()
    with (
        caplog.at_level(logging.WARNING, logger="tf_accum"),
        pytest.raises(errors.DeadlineExceededError),
    ):
        raw.QueueDequeueManyV2(handle=h, n=2, component_types=F32_I32, timeout=0.2)
    assert "a dequeue of 2 element(s) (0 taken so far) has waited" in caplog.text
    assert "it holds 0 element(s), capacity 2, open" in caplog.text


# --- graph mode -----------------------------------------------------------------------


@pytest.mark.usefixtures("graph")
def test_graph_ops_have_tensorflows_names_types_and_static_shapes() -> None:
    q = tf.FIFOQueue(2, F32_I32, shapes=[[2], []])
    assert q.name == "fifo_queue" and q.queue_ref.op.type == "FIFOQueueV2"
    assert q.queue_ref.dtype == tf.resource
    x = tf.placeholder(tf.float32, [2])
    y = tf.placeholder(tf.int32, [])
    ops = [q.enqueue((x, y)), q.enqueue_many(([[1.0, 2.0]], [1])), q.close()]
    assert [(o.name, o.type) for o in ops] == [
        ("fifo_queue_enqueue", "QueueEnqueueV2"),
        ("fifo_queue_EnqueueMany", "QueueEnqueueManyV2"),
        ("fifo_queue_Close", "QueueCloseV2"),
    ]
    assert [i.name for i in ops[0].inputs] == ["fifo_queue:0", "Placeholder:0", "Placeholder_1:0"]
    tensors = [*q.dequeue(), *q.dequeue_many(2), *q.dequeue_up_to(2), q.size(), q.is_closed()]
    assert [(t.name, t.op.type, t.shape.as_list(), t.dtype) for t in tensors] == [
        ("fifo_queue_Dequeue:0", "QueueDequeueV2", [2], tf.float32),
        ("fifo_queue_Dequeue:1", "QueueDequeueV2", [], tf.int32),
        ("fifo_queue_DequeueMany:0", "QueueDequeueManyV2", [2, 2], tf.float32),
        ("fifo_queue_DequeueMany:1", "QueueDequeueManyV2", [2], tf.int32),
        ("fifo_queue_DequeueUpTo:0", "QueueDequeueUpToV2", [None, 2], tf.float32),
        ("fifo_queue_DequeueUpTo:1", "QueueDequeueUpToV2", [None], tf.int32),
        ("fifo_queue_Size:0", "QueueSizeV2", [], tf.int32),
        ("fifo_queue_Is_Closed:0", "QueueIsClosedV2", [], tf.bool),
    ]


@pytest.mark.usefixtures("graph")
def test_a_session_runs_the_queue_and_its_deadline_consumes_nothing() -> None:
    q = tf.FIFOQueue(2, F32_I32, shapes=[[2], []])
    fill = q.enqueue_many(([[1.0, 2.0], [3.0, 4.0]], [1, 2]))
    one = q.enqueue(([5.0, 6.0], 3))
    take = q.dequeue()
    take_two = q.dequeue_many(2)
    size = q.size()
    short = tf.RunOptions(timeout_in_ms=50)
    with tf.Session() as sess:
        sess.run(fill)
        with pytest.raises(errors.DeadlineExceededError):
            sess.run(one, options=short)  # full
        value = sess.run(take)
        assert value[0].tolist() == [1.0, 2.0] and type(value[1]) is np.int32
        with pytest.raises(errors.DeadlineExceededError):
            sess.run(take_two, options=short)  # one element: taken, then put back
        assert sess.run(size) == 1
        # a run fetching a dequeue with the enqueue it waits for completes
        both = sess.run([take_two, one], options=BOUNDED)
        assert both[0][1].tolist() == [2, 3]


@pytest.mark.usefixtures("graph")
def test_sessions_have_their_own_queues_and_closing_one_cancels_its_waits() -> None:
    q = tf.FIFOQueue(2, tf.int32, shapes=[[]], shared_name="shared")
    same = tf.FIFOQueue(2, tf.int32, shapes=[[]], shared_name="shared")
    put = q.enqueue(4)
    with tf.Session() as first:
        first.run(put)
        assert first.run(same.size()) == 1
        with tf.Session() as second:
            assert second.run(same.size()) == 0
    take = q.dequeue()
    sess = tf.Session()
    waiter = Background(sess.run, take)
    wait_until(lambda: waiting(sess.run(q.queue_ref), sess.table) == (0, 1))
    sess.close()
    error = waiter.error()
    assert isinstance(error, errors.CancelledError)
    assert error.message == "Dequeue operation was cancelled"


# --- queue runners --------------------------------------------------------------------


@pytest.mark.usefixtures("graph")
def test_queue_runners_fill_a_queue_and_stop_with_the_coordinator() -> None:
    q = tf.FIFOQueue(3, tf.int32, shapes=[[]])
    counter = tf.Variable(0)
    runner = tf.train.QueueRunner(q, [q.enqueue(tf.assign_add(counter, 1))])
    tf.train.add_queue_runner(runner)
    assert tf.get_collection(tf.GraphKeys.QUEUE_RUNNERS) == [runner]
    assert runner.queue_closed_exception_types == (errors.OutOfRangeError,)
    take = q.dequeue()
    with tf.Session() as sess:
        sess.run(counter.initializer)
        coord = tf.train.Coordinator()
        threads = tf.train.start_queue_runners(sess, coord)
        assert [(t.name, t.daemon) for t in threads] == [
            ("QueueRunnerThread-fifo_queue-fifo_queue_enqueue", True),
            ("QueueRunnerThread-fifo_queue-close_on_stop", True),
        ]
        assert [sess.run(take, options=BOUNDED) for _ in range(5)] == [1, 2, 3, 4, 5]
        assert runner.create_threads(sess, coord) == []  # running already
        coord.request_stop()
        coord.join(threads, stop_grace_period_secs=WAIT)
        assert not any(t.is_alive() for t in threads)
        assert sess.run(q.is_closed())


@pytest.mark.usefixtures("graph")
def test_a_runner_closes_its_queue_when_its_input_runs_out() -> None:
    source = tf.FIFOQueue(10, tf.int32, shapes=[[]])
    target = tf.FIFOQueue(10, tf.int32, shapes=[[]])
    runner = tf.train.QueueRunner(target, [target.enqueue(source.dequeue() * 10)] * 2)
    with tf.Session() as sess:
        sess.run(source.enqueue_many([[1, 2, 3]]))
        sess.run(source.close())
        threads = runner.create_threads(sess, start=True)
        assert [t.daemon for t in threads] == [True, True]  # docs/departures.md T28
        for thread in threads:
            thread.join(WAIT)
        assert sorted(sess.run(target.dequeue_up_to(10))) == [10, 20, 30]
        assert sess.run(target.is_closed())  # the last thread ran the close op


@pytest.mark.usefixtures("graph")
def test_a_runners_error_stops_the_coordinator() -> None:
    q = tf.FIFOQueue(3, tf.float32, shapes=[[]])
    fed = tf.placeholder(tf.float32, [])
    runner = tf.train.QueueRunner(q, [q.enqueue(fed)])
    with tf.Session() as sess:
        coord = tf.train.Coordinator()
        threads = runner.create_threads(sess, coord, start=True)
        with pytest.raises(errors.InvalidArgumentError, match="placeholder"):
            coord.join(threads, stop_grace_period_secs=WAIT)


@pytest.mark.usefixtures("graph")
def test_a_runner_cancelled_by_the_sessions_close_after_the_stop_ends_quietly() -> None:
    # A MonitoredSession stops and joins its coordinator, then closes the session:
    # a runner still blocked in its enqueue is cancelled then, and must not raise
    # in its thread (TensorFlow prints that traceback at every clean shutdown).
    source = tf.FIFOQueue(1, tf.int32, shapes=[[]])
    q = tf.FIFOQueue(1, tf.int32, shapes=[[]])
    runner = tf.train.QueueRunner(q, [q.enqueue(source.dequeue())])
    failures: list[BaseException | None] = []
    previous = threading.excepthook
    threading.excepthook = lambda args: failures.append(args.exc_value)
    try:
        sess = tf.Session()
        coord = tf.train.Coordinator()
        threads = runner.create_threads(sess, coord, start=True)
        # the runner's dequeue waits on the empty source: only closing the session ends it
        wait_until(lambda: waiting(sess.run(source.queue_ref), sess.table) == (0, 1))
        coord.request_stop()
        coord.join(threads, stop_grace_period_secs=0.5, ignore_live_threads=True)
        sess.close()
        for thread in threads:
            thread.join(WAIT)
        assert not any(t.is_alive() for t in threads)
    finally:
        threading.excepthook = previous
    assert failures == []


@pytest.mark.usefixtures("graph")
def test_a_runner_waiting_beyond_its_queue_is_cancelled_when_its_coordinator_stops() -> None:
    # Its run waits on another queue (as a SyncReplicasOptimizer chief's sync op
    # waits in a take for gradients that never come once the workers stop): the
    # coordinator's stop cancels that run, so join() does not wait out its grace
    # period, and the session stays open (TensorFlow waits until it closes).
    source = tf.FIFOQueue(1, tf.int32, shapes=[[]])
    q = tf.FIFOQueue(1, tf.int32, shapes=[[]])
    runner = tf.train.QueueRunner(q, [q.enqueue(source.dequeue())])
    failures: list[BaseException | None] = []
    previous = threading.excepthook
    threading.excepthook = lambda args: failures.append(args.exc_value)
    try:
        with tf.Session() as sess:
            coord = tf.train.Coordinator()
            threads = runner.create_threads(sess, coord, start=True)
            wait_until(lambda: waiting(sess.run(source.queue_ref), sess.table) == (0, 1))
            coord.request_stop()
            started = time.monotonic()
            coord.join(threads, stop_grace_period_secs=WAIT)  # raises if one is still alive
            assert time.monotonic() - started < WAIT / 2
            assert not any(t.is_alive() for t in threads)
            # the withdrawn dequeue took nothing; the session still runs
            sess.run(source.enqueue(7))
            assert sess.run(source.dequeue(), options=BOUNDED) == 7
            assert sess.run(q.is_closed())  # the cancel op ran too
    finally:
        threading.excepthook = previous
    assert failures == []


def test_queue_runners_need_graph_mode_and_a_session() -> None:
    with pytest.raises(RuntimeError, match="eager execution"):
        tf.train.start_queue_runners()
    with tf.Graph().as_default():
        q = tf.FIFOQueue(3, tf.int32)
        with pytest.raises(ValueError, match="^Must provide queue and enqueue_ops"):
            tf.train.QueueRunner(q, [])
        with pytest.raises(ValueError, match="No default session is registered"):
            tf.train.start_queue_runners()
        assert tf.train.queue_runner.QueueRunner is tf.train.QueueRunner
        assert tf.queue.FIFOQueue is tf.FIFOQueue


def test_many_threads_move_every_element_once() -> None:
    h = raw.FIFOQueueV2(component_types=[tf.int64], shapes=[[]], capacity=4)
    received: list[int] = []
    lock = threading.Lock()

    def produce(start: int) -> None:
        for i in range(start, start + 50):
            raw.QueueEnqueueV2(handle=h, components=[np.int64(i)], timeout=WAIT)

    def consume() -> None:
        while True:
            try:
                got = raw.QueueDequeueUpToV2(
                    handle=h, n=3, component_types=[tf.int64], timeout=WAIT
                )
            except errors.OutOfRangeError:
                return
            with lock:
                received.extend(int(v) for v in got[0])

    producers = [Background(produce, 100 * k) for k in range(4)]
    consumers = [Background(consume) for _ in range(3)]
    for p in producers:
        p.result()
    raw.QueueCloseV2(handle=h)
    for c in consumers:
        c.result()
    assert sorted(received) == sorted(i for k in range(4) for i in range(100 * k, 100 * k + 50))


@pytest.mark.usefixtures("graph")
def test_queue_ops_on_another_task_are_written_as_steps_for_its_host() -> None:
    from tf_accum.distributed.steps import MAKE, RAW, RawStep, decode
    from tf_accum.graph.host_steps import write_steps

    with tf.device("/job:ps/task:0"):
        q = tf.FIFOQueue(2, [tf.int32, tf.float32], shapes=[[], [2]], shared_name="q")
        enqueue = q.enqueue((tf.constant(1), tf.constant([0.5, 1.5])))
        dequeue = q.dequeue()
    ops = [q.queue_ref.op, enqueue, dequeue[0].op]
    steps = write_steps(ops, {}, {op: None for op in ops}, [])
    assert [step[0] for step in steps] == [MAKE, RAW, RAW]
    assert steps[0][1:3] == ("FIFOQueueV2", q.queue_ref.op.name)
    enqueue_step, dequeue_step = decode(steps[1]), decode(steps[2])
    assert isinstance(enqueue_step, RawStep) and isinstance(dequeue_step, RawStep)
    assert enqueue_step.queue_op == "QueueEnqueueV2" and enqueue_step.take
    # the components are a list argument of the enqueue, and the dequeue's outputs
    assert enqueue_step.arguments([7, "a", "b"]) == {"handle": 7, "components": ["a", "b"]}
    assert enqueue_step.listed_input and not enqueue_step.listed_outputs
    assert dequeue_step.queue_op == "QueueDequeueV2" and dequeue_step.listed_outputs


def test_accumulator_stats_refuses_a_queue() -> None:
    with pytest.raises(errors.InvalidArgumentError, match="needs an accumulator"):
        tfa.accumulator_stats(queue_handle())


@pytest.mark.usefixtures("graph")
def test_a_token_queue_as_sync_replicas_programs_build_it() -> None:
    # unbounded, dtype from the global step's base_dtype, shapes=() for one
    # scalar component, a dtype given by its enum number
    step = tf.train.get_or_create_global_step()
    tokens = tf.FIFOQueue(-1, step.dtype.base_dtype, shapes=(), shared_name="sync_token_q")
    dummy = tf.FIFOQueue(1, 3, shapes=(), shared_name="dummy_queue")
    assert (tokens.shapes, tokens.dtypes, dummy.dtypes) == (
        [tf.TensorShape([])],
        [tf.int64],
        [tf.int32],
    )
    with tf.control_dependencies([step.assign_add(1)]):
        put = tokens.enqueue_many((tf.zeros([3], tf.int64),))
    take = tokens.dequeue()
    with tf.Session() as sess:
        sess.run(step.initializer)
        sess.run(put)
        assert (sess.run(tokens.size()), sess.run(take), sess.run(step)) == (3, 0, 1)
    assert string_ref.base_dtype == tf.string and tf.int64.base_dtype == tf.int64


def test_a_blocked_queue_runner_never_holds_up_the_programs_exit() -> None:
    # TensorFlow's create_threads() makes non-daemon threads by default, and a
    # program whose runner waits on a full queue then never exits
    program = textwrap.dedent(
        """
        import tf_accum.compat.v1 as tf
        tf.disable_eager_execution()
        q = tf.FIFOQueue(1, tf.int32, shapes=[[]])
        runner = tf.train.QueueRunner(q, [q.enqueue(1)])
        sess = tf.Session()
        threads = runner.create_threads(sess, start=True)  # daemon=False, as TF1 programs call it
        while sess.run(q.size()) < 1:
            pass
        print("exiting with", len(threads), "runner blocked")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", program],
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
        capture_output=True,
        text=True,
        timeout=WAIT * 6,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "exiting with 1 runner blocked"
