"""TF1 parameter-server programs on Ray (issue 24): one process per task, state on ps tasks.

The test process is the chief (worker task 0, with its own ``tf.train.Server``)
and, unless a test starts ps processes, serves the ps tasks too (their hosts
are owned by this process, ended after the test); other workers are real
processes running tests/distributed/tf1_roles.py. Each test names a cluster
of its own, so its ps hosts are new.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tf_accum.compat.v1 as tf
from tests.distributed.tf1_roles import FAR_AHEAD, Model, model
from tests.helpers import Background, wait_until
from tf_accum import errors

ROLES = "tests.distributed.tf1_roles"
PROCESS_START = 90.0  # seconds for a process to join the cluster, on a loaded machine
RUN_BOUND = tf.RunOptions(timeout_in_ms=60_000)


def cluster_of(ps: int, workers: int) -> dict[str, list[str]]:
    tag = uuid.uuid4().hex[:8]
    return {
        "ps": [f"ps{i}-{tag}:2222" for i in range(ps)],
        "worker": [f"worker{i}-{tag}:2222" for i in range(workers)],
    }


def chief_of(
    task: Callable[..., tuple[Any, Any]], spec: Any, ps: bool = True
) -> tuple[Any, Model, Any]:
    m = model(spec)
    server, sess = task(spec, 0, m.graph, ps)
    sess.run(m.init)
    return server, m, sess


def test_workers_and_a_chief_lose_nothing(task, spawn) -> None:
    spec = cluster_of(ps=1, workers=3)
    spawn("ps", module=ROLES, spec=spec, task=0)
    _server, m, sess = chief_of(task, spec, ps=False)
    per_worker = 40
    n = 2 * per_worker
    workers = [
        spawn("worker", module=ROLES, spec=spec, task=i + 1, first=i * per_worker, count=per_worker)
        for i in (0, 1)
    ]
    taken = np.zeros(2, np.int64)
    rounds = 0
    while taken[1] < n:
        # a take and the variable's update, one request to the ps task
        value, total = sess.run(
            [m.take, m.update], {m.num_required: min(4, n - int(taken[1]))}, options=RUN_BOUND
        )
        taken += value
        rounds += 1
        assert total.tolist() == taken.tolist()
    assert [w.outcome(PROCESS_START) for w in workers] == [{"applied": per_worker}] * 2
    assert taken.tolist() == [n * (n - 1) // 2, n]  # every gradient came out exactly once
    assert sess.run(m.total).tolist() == taken.tolist()
    assert sess.run(m.count) == 0
    assert 2 <= rounds <= n // 4  # a take takes every gradient in, 4 or more


def test_a_worker_reads_the_chiefs_update(task, spawn) -> None:
    spec = cluster_of(ps=2, workers=2)
    _server, m, sess = chief_of(task, spec)
    with m.graph.as_default():
        set_step = m.step.assign(7)
    sess.run(m.apply, {m.grad: [5, 1]})
    sess.run([m.update, set_step], {m.num_required: 1})
    assert spawn("read", module=ROLES, spec=spec, task=1).outcome(PROCESS_START) == {
        "total": [5, 1],
        "step": 7,
    }


def test_a_waiting_take_is_woken_by_another_process(task, spawn) -> None:
    spec = cluster_of(ps=1, workers=2)
    server, m, sess = chief_of(task, spec)
    taker = spawn("take", module=ROLES, spec=spec, task=1, num_required=2)
    wait_until(lambda: server.runtime.counts("ps", 0)["waiting"] == 1, timeout=PROCESS_START)
    sess.run(m.apply, {m.grad: [3, 1]})
    sess.run(m.apply, {m.grad: [4, 1]})
    assert taker.outcome(PROCESS_START) == {"value": [7, 2], "count": 0}


def test_a_timed_out_take_consumes_nothing(task, spawn) -> None:
    spec = cluster_of(ps=1, workers=2)
    _server, m, sess = chief_of(task, spec)
    sess.run(m.apply, {m.grad: [3, 1]})
    outcome = spawn("take", module=ROLES, spec=spec, task=1, num_required=2, timeout_ms=300)
    assert outcome.outcome(PROCESS_START) == {
        "error": "DeadlineExceededError",
        "message": "Timed out waiting for notification",
    }
    assert sess.run(m.count) == 1
    assert sess.run(m.take, {m.num_required: 1}).tolist() == [3, 1]


def test_closing_one_workers_session_leaves_the_others(task) -> None:
    spec = cluster_of(ps=1, workers=2)
    server, m, first = chief_of(task, spec)
    _, second = task(spec, 1, m.graph)
    first.run(m.apply, {m.grad: [1, 1]})
    waiting_first = Background(first.run, m.take, {m.num_required: 2})
    wait_until(lambda: server.runtime.counts("ps", 0)["waiting"] == 1, timeout=PROCESS_START)
    waiting_second = Background(second.run, m.take, {m.num_required: 2})
    wait_until(lambda: server.runtime.counts("ps", 0)["waiting"] == 2, timeout=PROCESS_START)
    first.close()
    error = waiting_first.error(PROCESS_START)
    assert isinstance(error, errors.CancelledError)
    assert not waiting_second.done()
    assert server.runtime.counts("ps", 0)["waiting"] == 1
    second.run(m.apply, {m.grad: [2, 1]})
    # the closed session's take consumed nothing: both gradients reach the other one
    assert waiting_second.result(PROCESS_START).tolist() == [3, 2]
    assert second.run(m.total).tolist() == [0, 0]


def test_placement_by_replica_device_setter_and_by_device_strings(task) -> None:
    spec = cluster_of(ps=2, workers=1)
    server, m, sess = chief_of(task, spec)
    # global_step -> ps 0, total -> ps 1, the accumulator -> ps 0
    assert [m.step.op.device, m.total.op.device, m.accumulator.accumulator_ref.op.device] == [
        "/job:ps/task:0",
        "/job:ps/task:1",
        "/job:ps/task:0",
    ]
    sess.run(m.apply, {m.grad: [1, 1]})
    assert server.runtime.counts("ps", 0)["variables"] == 1
    assert server.runtime.counts("ps", 0)["accumulators"] == 1
    assert server.runtime.counts("ps", 1)["variables"] == 1
    assert server.runtime.counts("ps", 1)["accumulators"] == 0
    with m.graph.as_default():
        with tf.device("/job:ps/task:1"):
            on_ps = tf.ConditionalAccumulator(tf.float32, shape=[1], shared_name="explicit")
        with tf.device("/job:worker/task:0"):
            here = tf.ConditionalAccumulator(tf.float32, shape=[1], shared_name="local")
        counts = [on_ps.num_accumulated(), here.num_accumulated()]
        applies = [on_ps.apply_grad([1.0], local_step=0), here.apply_grad([1.0], local_step=0)]
    sess.run(applies)
    assert sess.run(counts) == [1, 1]
    assert server.runtime.counts("ps", 1)["accumulators"] == 1
    assert server.runtime.counts("ps", 0)["accumulators"] == 1  # the local one stayed here
    assert len(sess.table.live_handles()) == 1
    # another worker's session sees the ps one, not the local one
    _, other = task(spec, 0, m.graph)
    assert other.run(counts) == [1, 0]


def test_errors_from_ops_on_a_ps_task(task) -> None:
    spec = cluster_of(ps=1, workers=1)
    m = model(spec)
    server, sess = task(spec, 0, m.graph)
    with pytest.raises(errors.FailedPreconditionError, match="total") as raised:
        sess.run(m.total)
    assert raised.value.op is m.total.graph_element.op
    sess.run(m.init)
    sess.run(m.apply, {m.grad: [1, 2]})
    sess.run(m.update, {m.num_required: 1})
    with m.graph.as_default():
        any_shape = tf.placeholder(tf.int64)
        bad = m.accumulator.apply_grad(any_shape, local_step=FAR_AHEAD)
    with pytest.raises(errors.InvalidArgumentError) as wrong_shape:
        sess.run(bad, {any_shape: np.zeros(3, np.int64)})
    assert wrong_shape.value.op is bad
    assert sess.run(m.count) == 0  # the failed apply changed nothing
    assert sess.run(m.total).tolist() == [1, 2]
    with m.graph.as_default(), tf.device("/job:ps/task:5"):
        nowhere = tf.ConditionalAccumulator(tf.float32, shape=[1], shared_name="x")
        count_nowhere = nowhere.num_accumulated()
    with pytest.raises(errors.InvalidArgumentError, match="/job:ps/task:5"):
        sess.run(count_nowhere)
    assert server.runtime.counts("ps", 0)["accumulators"] == 1


def test_one_request_per_host_per_run(task) -> None:
    """W workers applying V gradients over K ps tasks: W x K apply requests, K take requests."""
    workers, variables, ps_tasks = 2, 4, 2
    spec = cluster_of(ps=ps_tasks, workers=workers)
    g = tf.Graph()
    with g.as_default(), tf.device(tf.train.replica_device_setter(cluster=spec)):
        accumulators = [
            tf.ConditionalAccumulator(tf.float32, shape=[3], shared_name=f"g{i}")
            for i in range(variables)
        ]
        grads = [tf.placeholder(tf.float32, [3]) for _ in accumulators]
        applies = [
            a.apply_grad(g_, local_step=FAR_AHEAD)
            for a, g_ in zip(accumulators, grads, strict=True)
        ]
        takes = [a.take_grad(workers) for a in accumulators]
    started = [task(spec, i, g) for i in range(workers)]
    server, sessions = started[0][0], [sess for _, sess in started]
    # the same steps again: from the third run on, a session replays a plan's first
    # run's route (its requests), which must keep the counts, the order and the values
    for step in range(4):
        before = [server.runtime.counts("ps", k)["requests"] for k in range(ps_tasks)]
        for w, sess in enumerate(sessions):
            sess.run(applies, {g_: np.full(3, w + step + 1, np.float32) for g_ in grads})
        after_applies = [server.runtime.counts("ps", k)["requests"] for k in range(ps_tasks)]
        assert [a - b for a, b in zip(after_applies, before, strict=True)] == [workers] * ps_tasks
        means = sessions[0].run(takes)
        after_takes = [server.runtime.counts("ps", k)["requests"] for k in range(ps_tasks)]
        assert [a - b for a, b in zip(after_takes, after_applies, strict=True)] == [1] * ps_tasks
        assert [m.tolist() for m in means] == [[step + 1.5] * 3] * variables


def test_a_run_on_two_ps_tasks_gets_both_answers_at_once_and_names_a_lost_one(
    task, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run without takes on two ps tasks waits for both answers with one
    ray.get; when one host is gone, the run still says which task was lost."""
    import os
    import signal

    import ray

    from tf_accum.examples import recovery

    spec = cluster_of(ps=2, workers=1)
    g = tf.Graph()
    with g.as_default(), tf.device(tf.train.replica_device_setter(cluster=spec)):
        accumulators = [
            tf.ConditionalAccumulator(tf.float32, shape=[2], shared_name=f"a{i}") for i in range(2)
        ]
        applies = [a.apply_grad([1.0, 2.0], local_step=FAR_AHEAD) for a in accumulators]
        counts = [a.num_accumulated() for a in accumulators]
    server, sess = task(spec, 0, g)
    assert [a.accumulator_ref.op.device for a in accumulators] == [
        "/job:ps/task:0",
        "/job:ps/task:1",
    ]
    sess.run(applies)  # makes the accumulators
    real_get = ray.get
    gets: list[Any] = []

    def counted_get(refs: Any, *args: Any, **kwargs: Any) -> Any:
        gets.append(refs)
        return real_get(refs, *args, **kwargs)

    monkeypatch.setattr(ray, "get", counted_get)
    sess.run(applies)
    monkeypatch.undo()
    assert len(gets) == 1 and len(gets[0]) == 2
    assert sess.run(counts) == [2, 2]
    _, pid, _ = ray.get(server.runtime.host("ps", 1).actor.ping.remote())
    os.kill(pid, signal.SIGKILL)
    with pytest.raises((errors.UnavailableError, errors.NotFoundError)) as lost:
        sess.run(applies, options=RUN_BOUND)
    assert recovery.host_lost(lost.value), lost.value
    assert "task /job:ps/task:1" in lost.value.message, lost.value.message


@pytest.mark.parametrize("same_machine", [True, False])
def test_requests_and_answers_travel_pickled_in_pieces_and_large_ones_in_shared_memory_or_ray(
    task, monkeypatch: pytest.MonkeyPatch, same_machine: bool
) -> None:
    """A request or an answer whose arrays are small travels as one bytes object; one
    whose arrays come to at most MEDIUM_BYTES as bytes in pieces of at most
    PIECE_BYTES, each an argument or result of its own (an answer once the session
    has seen its size: the first comes whole). A gradient larger than that, and the
    mean it is taken into, go through the calling thread's shared-memory buffer when
    the host shares the machine (the mean once the session has seen its size), the
    message itself a bytes object; else they are left to Ray. The values are the
    same either way, and a fetched mean is an array the caller may write."""
    from tf_accum.distributed.small_messages import (
        MEDIUM_BYTES,
        PIECE_BYTES,
        unpack,
    )
    from tf_accum.graph import remote_run

    sizes = {"small": 3, "medium": PIECE_BYTES // 4 + 1, "large": MEDIUM_BYTES // 4 + 1}
    spec = cluster_of(ps=1, workers=1)
    g = tf.Graph()
    ops: dict[str, Any] = {}
    with g.as_default(), tf.device(tf.train.replica_device_setter(cluster=spec)):
        for kind, size in sizes.items():
            acc = tf.ConditionalAccumulator(tf.float32, shape=[size], shared_name=kind)
            grad = tf.placeholder(tf.float32, [size])
            ops[kind] = (grad, acc.apply_grad(grad, local_step=FAR_AHEAD), acc.take_grad(2))
        count = acc.num_accumulated()
    server, sess = task(spec, 0, g)
    sess.run(count)  # links to the host (and sends it the life token)
    link = server.runtime.host("ps", 0)
    if not same_machine:
        monkeypatch.setattr(link, "_same_machine", False)
    real_actor = link.actor
    sent: list[str] = []
    answered: list[str] = []

    def form(first: Any, rest: tuple[Any, ...]) -> str:
        """How a message travelled: "bytes", "pieces" (all at most PIECE_BYTES), or "ray"."""
        if type(first) is not bytes:
            return "ray"
        if not rest:
            return "bytes"
        assert all(type(p) is bytes and len(p) <= PIECE_BYTES for p in (first, *rest))
        return "pieces"

    class Recording:
        def __getattr__(self, name: str) -> Any:
            method = getattr(real_actor, name)
            if name != "run":
                return method

            class Run:
                def __init__(self, chosen: Any = method) -> None:
                    self.chosen = chosen

                def options(self, **options: Any) -> Any:
                    return Run(method.options(**options))

                def remote(self, first: Any, *rest: Any) -> Any:
                    sent.append(form(first, rest))
                    return self.chosen.remote(first, *rest)

            return Run()

    def recorded_unpack(answer: Any, *pieces: bytes) -> Any:
        answered.append(form(answer, pieces))
        return unpack(answer, *pieces)

    monkeypatch.setattr(link, "actor", Recording())
    monkeypatch.setattr(remote_run, "unpack", recorded_unpack)
    means: dict[str, list[Any]] = {}
    for kind, size in sizes.items():
        grad, apply, take = ops[kind]
        for _ in range(2):  # the second take's answer comes in the form the first taught
            for value in (1.0, 2.0):
                sess.run(apply, {grad: np.full(size, value, np.float32)})
            means.setdefault(kind, []).append(sess.run(take))
    monkeypatch.undo()
    large = "bytes" if same_machine else "ray"
    # per kind: two applies and a take, twice (the buffer's attach call is not a run)
    assert sent == ["bytes"] * 6 + ["pieces", "pieces", "bytes"] * 2 + [large, large, "bytes"] * 2
    # applies answer with no arrays; a medium mean comes whole once, then in pieces; a
    # large one through Ray, then in shared memory
    assert answered == ["bytes"] * 6 + ["bytes", "bytes", "ray", "bytes", "bytes", "pieces"] + [
        "bytes",
        "bytes",
        "ray",
        "bytes",
        "bytes",
        large,
    ]
    for kind, size in sizes.items():
        for mean in means[kind]:
            assert mean.dtype == np.float32 and mean.shape == (size,)
            assert (mean == 1.5).all()
            assert mean.flags.writeable
    assert sess.run(count) == 0


def test_a_request_given_up_while_it_may_read_the_buffer_leaves_it(
    task, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run interrupted while a request holding a large value in the thread's buffer
    waits (its take) stops using that buffer: the host may still read it. The next
    run's values arrive whole, through a buffer of its own."""
    from tf_accum.graph import remote_run

    spec = cluster_of(ps=1, workers=1)
    size = 2**18
    g = tf.Graph()
    with g.as_default(), tf.device(tf.train.replica_device_setter(cluster=spec)):
        acc = tf.ConditionalAccumulator(tf.float32, shape=[size], shared_name="given_up")
        other = tf.ConditionalAccumulator(tf.float32, shape=[1], shared_name="empty")
        grad = tf.placeholder(tf.float32, [size])
        apply = acc.apply_grad(grad, local_step=FAR_AHEAD)
        with tf.control_dependencies([apply]):
            waits = other.take_grad(1)
        take = acc.take_grad(1)
    server, sess = task(spec, 0, g)
    link = server.runtime.host("ps", 0)
    sess.run(apply, {grad: np.full(size, 1.0, np.float32)})
    first = link._buffers.buffer
    assert first is not None

    def interrupted(*args: Any) -> Any:
        raise KeyboardInterrupt  # as Ctrl-C lands while the run waits for the answer

    with monkeypatch.context() as patch:
        patch.setattr(remote_run, "_answer", interrupted)
        with pytest.raises(KeyboardInterrupt):
            sess.run(waits, {grad: np.full(size, 2.0, np.float32)})
    assert link._buffers.buffer is None
    sess.run(apply, {grad: np.full(size, 3.0, np.float32)})
    assert link._buffers.buffer is not None and link._buffers.buffer.name != first.name
    assert (sess.run(take, options=RUN_BOUND) == 2.0).all()  # the mean of 1, 2 and 3


def test_a_replayed_run_skips_constants_its_request_carries_and_keeps_the_rest(task) -> None:
    """Once a run's route is known, a local constant that only ops on a ps task use, and
    whose value the request carries in its steps, is not run again; a fetched constant
    or one a local op uses still is. The request, built again without it, is the same."""
    spec = cluster_of(ps=1, workers=1)
    g = tf.Graph()
    with g.as_default(), tf.device(tf.train.replica_device_setter(cluster=spec)):
        acc = tf.ConditionalAccumulator(tf.float32, shape=[2], shared_name="inline")
        with tf.device("/job:worker/task:0"):
            gradient = tf.constant([1.0, 2.0])
            doubled = gradient * 2.0
        apply = acc.apply_grad(gradient, local_step=FAR_AHEAD)
        take = acc.take_grad(4)
        count = acc.num_accumulated()
    server, sess = task(spec, 0, g)
    sess.run(count)  # makes the accumulator (a later run's route starts from its handle)
    runs = {"gradient": 0}
    kernel = gradient.op.kernel

    def counted(*args: Any) -> Any:
        runs["gradient"] += 1
        return kernel(*args)

    gradient.op.kernel = counted
    sess.run(apply)  # the route is found: the constant runs
    sess.run(apply)  # replayed: it does not
    assert runs["gradient"] == 1
    sess._cluster._requests.clear()  # the request is built again, from the constant itself
    sess.run(apply)
    assert runs["gradient"] == 1
    fetched, _ = sess.run([gradient, apply])
    assert runs["gradient"] == 2 and fetched.tolist() == [1.0, 2.0]
    assert sess.run(count) == 4
    assert sess.run(doubled).tolist() == [2.0, 4.0]
    assert sess.run(doubled).tolist() == [2.0, 4.0]
    # a run of local ops only computes a constant once per plan (its value is fixed)
    assert runs["gradient"] == 3
    assert sess.run(take).tolist() == [1.0, 2.0]
    assert sess.run(count) == 0


def test_a_release_after_an_assign_is_one_request_and_keeps_its_order(task) -> None:
    """Applies of constants under control_dependencies of an assign on the same ps task
    (the chief's release of TF1's sync replicas) go as one request, after the assign."""
    spec = cluster_of(ps=1, workers=1)
    g = tf.Graph()
    with g.as_default(), tf.device(tf.train.replica_device_setter(cluster=spec)):
        step = tf.train.get_or_create_global_step()
        with tf.device("/job:ps/task:0"):
            tokens = [
                tf.ConditionalAccumulator(tf.float32, shape=[], shared_name=f"token{i}")
                for i in range(2)
            ]
        new_step = tf.placeholder(tf.int64, [])
        with tf.control_dependencies([step.assign_add(new_step)]):
            release = tf.group(*[t.apply_grad(np.float32(1), local_step=FAR_AHEAD) for t in tokens])
        counts = [t.num_accumulated() for t in tokens]
    server, sess = task(spec, 0, g)
    sess.run(counts)  # makes the tokens
    before = server.runtime.counts("ps", 0)["requests"]
    # the step is not initialized: the assign fails, and the applies after it never run
    with pytest.raises(errors.FailedPreconditionError):
        sess.run(release, {new_step: 1})
    assert sess.run(counts) == [0, 0]
    sess.run(step.initializer)
    middle = server.runtime.counts("ps", 0)["requests"]
    assert sess.run(release, {new_step: 5}) is None
    assert server.runtime.counts("ps", 0)["requests"] - middle == 1
    assert middle - before == 3  # the failed release (one request), the counts, the initializer
    assert sess.run([step, *counts]) == [5, 1, 1]


def test_a_fed_constant_reaches_the_ps_task_with_each_runs_value(task) -> None:
    """A run's request to a host is built once per plan, with constants inline; a
    constant fed in place of its value (one the plan runs anyway, since an op waits
    for it through control_dependencies) must send each run's fed value."""
    spec = cluster_of(ps=1, workers=1)
    g = tf.Graph()
    with g.as_default(), tf.device(tf.train.replica_device_setter(cluster=spec)):
        total = tf.Variable(0.0, name="total")
        amount = tf.constant(1.0)
        marker = tf.no_op()
        with tf.control_dependencies([amount.op, marker]):
            add = total.assign_add(amount)
    server, sess = task(spec, 0, g)
    sess.run(total.initializer)
    sess.run(add, {amount: 2.0})
    sess.run(add, {amount: 5.0})
    sess.run(add)  # the constant's own value
    assert sess.run(total) == 8.0


def test_a_killed_workers_waiting_take_is_withdrawn(task, spawn) -> None:
    spec = cluster_of(ps=1, workers=2)
    server, m, sess = chief_of(task, spec)
    taker = spawn("take", module=ROLES, spec=spec, task=1, num_required=2)
    wait_until(lambda: server.runtime.counts("ps", 0)["waiting"] == 1, timeout=PROCESS_START)
    taker.kill()  # SIGKILL: no chance to withdraw it itself
    wait_until(lambda: server.runtime.counts("ps", 0)["waiting"] == 0, timeout=PROCESS_START)
    sess.run(m.apply, {m.grad: [3, 1]})
    sess.run(m.apply, {m.grad: [4, 1]})
    # the dead process's take consumed nothing: the round is the chief's
    assert sess.run(m.take, {m.num_required: 2}).tolist() == [7, 2]


def test_an_interactive_session_on_a_target(task) -> None:
    spec = cluster_of(ps=1, workers=1)
    server, m, sess = chief_of(task, spec)
    sess.run(m.apply, {m.grad: [2, 1]})
    interactive = tf.InteractiveSession(server.target, graph=m.graph)
    try:
        assert interactive.sess_str == server.target
        assert m.count.eval() == 1
        assert m.total.eval().tolist() == [0, 0]
    finally:
        interactive.close()
    assert sess.run(m.count) == 1


def test_host_groups_name_and_spread_hosts_the_same_way_everywhere() -> None:
    from tf_accum.distributed.placement import HostGroup

    def group() -> HostGroup:
        return HostGroup("model", 4, lambda: None, lambda index: ())

    keys = [f"container/grads{i}" for i in range(64)]
    first, second = group(), group()
    spread = [first.index_for(k) for k in keys]
    assert spread == [second.index_for(k) for k in reversed(keys)][::-1]
    assert set(spread) == {0, 1, 2, 3}  # 64 keys reach every host
    assert [first.actor_name(i) for i in (0, 3)] == ["tf_accum/model/0", "tf_accum/model/3"]
    with pytest.raises(errors.InvalidArgumentError, match="Host 4 is outside group model"):
        first.actor_name(4)
    with pytest.raises(ValueError, match="at least one host"):
        HostGroup("empty", 0, lambda: None, lambda index: ())


def test_initialization_of_ps_variables_is_shared_by_every_session(task) -> None:
    spec = cluster_of(ps=2, workers=2)
    m = model(spec)
    with m.graph.as_default():
        with tf.device("/job:worker/task:0"):
            here = tf.Variable(1.0, name="here")  # each session's own
        report = tf.report_uninitialized_variables()
        total_ready = tf.is_variable_initialized(m.total)
        here_report = tf.report_uninitialized_variables([m.total, here])
    _, first = task(spec, 0, m.graph)
    _, second = task(spec, 1, m.graph)
    assert first.run(report).tolist() == [b"global_step", b"total", b"here"]
    assert first.run(total_ready) == np.False_
    second.run(m.init)  # made before `here`: the ps variables, for every session
    assert first.run(total_ready) == np.True_
    assert first.run(report).tolist() == [b"here"]  # each session's own is not, yet
    assert second.run(report).tolist() == [b"here"]
    first.run(here.initializer)
    assert first.run(report).tolist() == []
    assert second.run(here_report).tolist() == [b"here"]


def test_scatter_ops_on_a_ps_variable_change_it_for_every_session(task) -> None:
    spec = cluster_of(ps=1, workers=2)
    g = tf.Graph()
    with g.as_default(), tf.device(tf.train.replica_device_setter(cluster=spec)):
        table = tf.Variable(np.zeros((4, 2), np.float32), name="embedding")
        indices = tf.placeholder(tf.int64, [None])
        rows = tf.placeholder(tf.float32, [None, 2])
        add = tf.scatter_add(table, indices, rows)
        sub = table.scatter_sub(tf.IndexedSlices(rows, indices))
        update = tf.scatter_update(table, indices, rows)
    # as TensorFlow's: the scatter op's device is the worker's, and it runs with its variable
    assert (table.op.device, add.op.device) == ("/job:ps/task:0", "/job:worker")
    server, first = task(spec, 0, g)
    _, second = task(spec, 1, g)
    first.run(table.initializer)
    first.run(add, {indices: [1, 1, 3], rows: [[1, 2], [3, 4], [5, 6]]})  # row 1 gets both
    second.run(sub, {indices: [3], rows: [[1, 1]]})
    assert first.run(table).tolist() == [[0, 0], [4, 6], [0, 0], [4, 5]]
    second.run(update, {indices: [0], rows: [[9, 9]]})
    assert first.run(table).tolist() == [[9, 9], [4, 6], [0, 0], [4, 5]]
    with pytest.raises(errors.InvalidArgumentError, match=r"indices\[1\] = 4 is not in \[0, 4\)"):
        first.run(add, {indices: [0, 4], rows: [[1, 1], [1, 1]]})
    assert second.run(table).tolist() == [[9, 9], [4, 6], [0, 0], [4, 5]]  # nothing half-done
    assert server.runtime.counts("ps", 0)["variables"] == 1


def test_a_lost_ps_task_is_recovered_as_tf1_did_with_a_new_session(task) -> None:
    """The recipe of docs/tf1-cluster.md: on a lost ps task, a new session, init, the step."""
    import os
    import signal

    import ray

    from tf_accum.examples import recovery

    spec = cluster_of(ps=1, workers=1)
    server, m, sess = chief_of(task, spec)
    with m.graph.as_default():
        new_step = tf.placeholder(tf.int64, [])
        set_step = m.step.assign(new_step)
    sess.run(m.apply, {m.grad: [1, 1]})
    sess.run([m.update, set_step], {m.num_required: 1, new_step: 5})
    _, pid, _ = ray.get(server.runtime.host("ps", 0).actor.ping.remote())
    os.kill(pid, signal.SIGKILL)
    with pytest.raises((errors.UnavailableError, errors.NotFoundError)) as lost:
        sess.run(m.apply, {m.grad: [2, 1]}, options=RUN_BOUND)
    assert recovery.host_lost(lost.value), lost.value
    # a new session on the same target (TF1's recoverable sessions do the same), then
    # what the restarted task lost: its variables' values (from a checkpoint in real
    # programs), the global step, its accumulators (made again by the new session)
    _, fresh = task(spec, 0, m.graph)
    recovery.remake(lambda: fresh.run(m.init))
    fresh.run(set_step, {new_step: 5})
    assert fresh.run([m.step, m.count]) == [5, 0]  # the restarted host starts empty
    fresh.run(m.apply, {m.grad: [2, 1]})
    assert fresh.run(m.take, {m.num_required: 1}, options=RUN_BOUND).tolist() == [2, 1]


def test_cheap_ops_between_ops_of_one_ps_task_run_there_with_their_values_and_errors(
    task,
) -> None:
    """A Mul between a variable's read and its assign on a ps task, and a Fill of the
    read's value into a queue there, run on the task in the same request: the values
    are the ones computed here would have (fetched, or used by an op here, too); a
    failing one raises the error it raises in one process, with its op."""
    spec = cluster_of(ps=1, workers=1)
    g = tf.Graph()
    with g.as_default(), tf.device("/job:ps/task:0"):
        v = tf.Variable(np.float32(3.0), name="v")
        queue = tf.FIFOQueue(-1, tf.float32, shapes=(), shared_name="filled", name="filled")
        doubled = v.read_value() * 2.0
        update = v.assign(doubled)
        filled = tf.fill([3], v.read_value())
        enqueue = queue.enqueue_many((filled,))
        size = queue.size()
        dequeue = queue.dequeue()
        dims = tf.Variable(np.array([-1], np.int32), name="dims")
        bad = queue.enqueue_many((tf.fill(dims.read_value(), 1.0),))
        with tf.device("/job:worker/task:0"):
            here = doubled + 1.0
    server, sess = task(spec, 0, g)
    sess.run([v.initializer, dims.initializer])
    before = server.runtime.counts("ps", 0)["requests"]
    sess.run(update)
    sess.run(enqueue)
    assert server.runtime.counts("ps", 0)["requests"] - before == 2  # one each
    assert sess.run(v) == 6.0
    assert sess.run(size) == 3
    assert sess.run(dequeue) == 6.0
    assert sess.run([doubled, here]) == [12.0, 13.0]  # fetched, and used here
    with pytest.raises(errors.InvalidArgumentError, match="must be >= 0") as raised:
        sess.run(bad)  # as in one process
    assert raised.value.op is not None and raised.value.op.type == "Fill"
    assert sess.run(size) == 2  # nothing enqueued


def test_a_fetched_take_goes_back_when_its_run_fails_after_the_answer(task, monkeypatch) -> None:
    """Ctrl-C landing as a take's answer arrives, before Session.run returns it:
    the round goes back on the ps task (as a take in one process does), and the
    next take gets it whole. A take whose value an op on the ps task used (the
    variable's update) is not given back: the update happened."""
    from tf_accum.graph.remote_run import ClusterSession

    spec = cluster_of(ps=1, workers=1)
    _server, m, sess = chief_of(task, spec)
    absorb = ClusterSession._absorb

    def interrupted(self: Any, *args: Any) -> Any:
        absorb(self, *args)
        raise KeyboardInterrupt

    for fetches, goes_back in ((m.take, True), ([m.take, m.update], False)):
        sess.run(m.apply, {m.grad: [5, 1]})
        monkeypatch.setattr(ClusterSession, "_absorb", interrupted)
        with pytest.raises(KeyboardInterrupt):
            sess.run(fetches, {m.num_required: 1}, options=RUN_BOUND)
        monkeypatch.setattr(ClusterSession, "_absorb", absorb)
        if goes_back:
            wait_until(lambda: sess.run(m.count) == 1)  # the give-back is a message on its way
            assert sess.run(m.take, {m.num_required: 1}).tolist() == [5, 1]
        else:
            assert sess.run(m.total).tolist() == [5, 1]
        assert sess.run(m.count) == 0
