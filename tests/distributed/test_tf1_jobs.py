"""A TF1 job's state is its own and lives as long as its ps processes.

Real processes on the test session's Ray cluster (tests/distributed/tf1_roles.py):
a rerun of the same program starts empty, whatever order its processes start
in; a restarted ps task starts empty and the workers' runs fail until it is
back; two jobs with the same ClusterSpec (told apart by TF_ACCUM_JOB) never
see each other; a second live process for a task, and ClusterSpecs that
disagree, are refused. Every process is killed by pid after its test.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import tf_accum.compat.v1 as tf
from tests.distributed.test_tf1_cluster import cluster_of
from tests.distributed.tf1_roles import FAR_AHEAD, model
from tests.helpers import Background, wait_until
from tf_accum import errors
from tf_accum.graph import cluster_job

ROLES = "tests.distributed.tf1_roles"
PROCESS_START = 90.0  # seconds for a process to join the cluster, on a loaded machine
START_BOUND = tf.RunOptions(timeout_in_ms=int(PROCESS_START * 1000))  # a run that waits for ps
RUN_BOUND = tf.RunOptions(timeout_in_ms=60_000)
STEPS = 3


@pytest.fixture
def servers(ray_cluster) -> Iterator[Callable[..., Any]]:
    """Servers of this process (sessions on them are closed, and the hosts of its ps
    tasks ended, after the test)."""
    import ray

    made: list[Any] = []
    sessions: list[Any] = []

    def server(spec: Any, job: str, index: int, graph: Any = None) -> Any:
        made.append(tf.train.Server(spec, job_name=job, task_index=index))
        if job == "ps":
            return made[-1]
        sessions.append(tf.Session(made[-1].target, graph=graph))
        return made[-1], sessions[-1]

    yield server
    for sess in sessions:
        sess.close()
    for server_ in made:
        link = server_.runtime.link("ps", server_.task_index)
        if server_.job_name == "ps" and link is not None:
            ray.kill(link.actor, no_restart=True)


def host_gone(server: Any, job: str, task: int) -> bool:
    import ray

    from tf_accum.distributed.wire import NAMESPACE

    name = cluster_job.host_name(server.runtime.job_identity, job, task)
    try:
        ray.get_actor(name, namespace=NAMESPACE)
    except ValueError:
        return True
    return False


def trained(outcome: dict[str, Any], steps: int = STEPS) -> bool:
    """Whether a ``train`` role started empty and made every step."""
    return outcome == {
        "start": {"step": 0, "count": 0},
        "total": [sum(range(steps)), steps],
        "step": steps,
    }


def test_a_rerun_of_the_same_program_starts_empty_whatever_order_its_processes_start_in(
    spawn,
) -> None:
    spec = cluster_of(ps=1, workers=1)
    first_ps = spawn("ps", module=ROLES, spec=spec, task=0)
    first = spawn("train", module=ROLES, spec=spec, task=0, steps=STEPS).outcome(PROCESS_START)
    assert trained(first), first
    first_ps.kill()  # by pid; the run is over
    # the same program again, its worker first: it waits for the ps task, and says so
    second = spawn("train", module=ROLES, spec=spec, task=0, steps=STEPS, notice=0.5)
    wait_until(
        lambda: "Still waiting for task /job:ps/task:0" in second.error_output(),
        timeout=PROCESS_START,
    )
    assert second.popen.poll() is None
    spawn("ps", module=ROLES, spec=spec, task=0)
    # empty: the global step is 0 and the accumulator takes step-0 gradients
    again = second.outcome(PROCESS_START)
    assert trained(again), again


def test_a_restarted_ps_task_starts_empty_and_runs_fail_until_it_is_back(spawn, servers) -> None:
    spec = cluster_of(ps=1, workers=2)
    ps = spawn("ps", module=ROLES, spec=spec, task=0)
    m = model(spec)
    with m.graph.as_default():
        set_step = m.step.assign(7)
    server, sess = servers(spec, "worker", 0, m.graph)
    sess.run(m.init, options=START_BOUND)
    sess.run(m.apply, {m.grad: [5, 1]})
    sess.run([m.update, set_step], {m.num_required: 1})
    sess.run(m.apply, {m.grad: [2, 1]})
    assert sess.run(m.total).tolist() == [5, 1]
    assert sess.run([m.step, m.count]) == [7, 1]
    _, taker = servers(spec, "worker", 1, m.graph)
    waiting = Background(taker.run, m.take, {m.num_required: 5}, options=RUN_BOUND)
    wait_until(lambda: server.runtime.counts("ps", 0)["waiting"] == 1, timeout=PROCESS_START)
    ps.kill()
    # the waiting take fails with the task
    lost = waiting.error(PROCESS_START)
    assert isinstance(lost, errors.UnavailableError) and "task /job:ps/task:0" in lost.message
    # Ray ends the host a moment after its owner: until then it still answers
    wait_until(lambda: host_gone(server, "ps", 0), timeout=PROCESS_START)
    with pytest.raises(errors.UnavailableError, match="task /job:ps/task:0"):
        sess.run(m.count, options=RUN_BOUND)
    # the task is down: a run waits for it, within its deadline
    with pytest.raises(errors.DeadlineExceededError, match="waiting for task /job:ps/task:0"):
        sess.run(m.count, options=tf.RunOptions(timeout_in_ms=1500))
    spawn("ps", module=ROLES, spec=spec, task=0)
    with pytest.raises(errors.FailedPreconditionError):  # the new task holds nothing
        sess.run(m.total, options=START_BOUND)
    assert sess.run(m.count) == 0
    sess.run(m.init)
    assert sess.run([m.step, m.count]) == [0, 0]
    assert sess.run(m.total).tolist() == [0, 0]
    sess.run(m.apply, {m.grad: [3, 1]})
    assert sess.run(m.take, {m.num_required: 1}, options=RUN_BOUND).tolist() == [3, 1]


def test_two_jobs_with_the_same_cluster_spec_do_not_see_each_other(
    spawn, servers, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = cluster_of(ps=1, workers=2)
    tag = uuid.uuid4().hex[:8]
    spawn("ps", module=ROLES, environment={"TF_ACCUM_JOB": f"b-{tag}"}, spec=spec, task=0)
    m = model(spec)
    monkeypatch.setenv("TF_ACCUM_JOB", f"a-{tag}")
    servers(spec, "ps", 0)  # job a's ps task is this process
    server_a, a = servers(spec, "worker", 0, m.graph)
    monkeypatch.setenv("TF_ACCUM_JOB", f"b-{tag}")
    server_b, b = servers(spec, "worker", 1, m.graph)
    assert server_a.runtime.job_identity != server_b.runtime.job_identity
    a.run(m.init)
    a.run(m.apply, {m.grad: [5, 1]})
    a.run(m.update, {m.num_required: 1})
    a.run(m.apply, {m.grad: [6, 1]})
    b.run(m.init, options=START_BOUND)  # job b's own ps task, in its own process
    assert b.run([m.count, m.step]) == [0, 0]
    assert b.run(m.total).tolist() == [0, 0]
    b.run(m.apply, {m.grad: [7, 1]})
    b.run(m.apply, {m.grad: [8, 1]})
    assert b.run(m.take, {m.num_required: 2}, options=RUN_BOUND).tolist() == [15, 2]
    assert a.run(m.count) == 1
    assert a.run(m.total).tolist() == [5, 1]
    assert a.run(m.take, {m.num_required: 1}, options=RUN_BOUND).tolist() == [6, 1]


def test_a_second_live_process_for_a_task_is_refused_and_a_restarted_one_is_not(
    spawn, servers
) -> None:
    spec = cluster_of(ps=1, workers=2)
    ps = servers(spec, "ps", 0)  # this process serves ps task 0
    # a second ps process for the task (no TF_ACCUM_JOB to tell two jobs apart)
    refused = spawn("ps", module=ROLES, spec=spec, task=0).outcome(PROCESS_START)
    assert refused["error"] == "UnknownError"
    for words in ("/job:ps/task:0", "already served by another live process", "TF_ACCUM_JOB"):
        assert words in refused["message"], refused["message"]
    assert "python -m tf_accum.launch" in refused["message"]
    # worker 1 in another process, then in this one
    holder = spawn("hold", module=ROLES, spec=spec, task=1)
    wait_until(lambda: ps.runtime.counts("ps", 0)["requests"] >= 1, timeout=PROCESS_START)
    m = model(spec)
    _, sess = servers(spec, "worker", 1, m.graph)
    with pytest.raises(errors.UnknownError) as duplicate:
        sess.run(m.count, options=RUN_BOUND)
    message = duplicate.value.message
    assert "Task /job:worker/task:1" in message and f"pid {holder.popen.pid} " in message, message
    holder.kill()  # the old process is gone: its task may be served again
    assert sess.run(m.count, options=RUN_BOUND) == 0


def test_processes_whose_cluster_specs_disagree_are_refused(servers) -> None:
    spec = cluster_of(ps=1, workers=2)
    servers(spec, "ps", 0)
    m = model(spec)
    _, sess = servers(spec, "worker", 0, m.graph)
    sess.run(m.init)
    other_worker = dict(spec, worker=["elsewhere:2222", spec["worker"][1]])
    theirs = model(other_worker)
    _, wrong = servers(other_worker, "worker", 1, theirs.graph)
    with pytest.raises(errors.InvalidArgumentError) as raised:
        wrong.run(theirs.count, options=RUN_BOUND)
    message = raised.value.message
    assert "ClusterSpec disagrees with that of task /job:ps/task:0" in message, message
    assert (
        f"task /job:worker/task:0 is {spec['worker'][0]!r} in task /job:ps/task:0's and "
        "'elsewhere:2222' in this process's" in message
    ), message
    assert "TF_ACCUM_JOB" in message
    more_ps = dict(spec, ps=[*spec["ps"], "ps1-more:2222"], worker=[*spec["worker"], "w2:2222"])
    theirs = model(more_ps)
    _, wrong = servers(more_ps, "worker", 2, theirs.graph)
    with pytest.raises(
        errors.InvalidArgumentError,
        match=r"job 'ps' has tasks \[0\] in task /job:ps/task:0's and \[0, 1\] in this",
    ):
        wrong.run(theirs.count, options=RUN_BOUND)
    # a sparse view (a worker that lists only itself) agrees with the full one
    sparse = {"ps": spec["ps"], "worker": {3: "w3-alone:2222"}}
    theirs = model(sparse)
    _, alone = servers(sparse, "worker", 3, theirs.graph)
    assert alone.run(theirs.count, options=RUN_BOUND) == 0
    assert sess.run(m.count) == 0


def test_a_worker_waits_for_its_ps_task_and_says_so(
    servers, caplog, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = cluster_of(ps=1, workers=1)
    m = model(spec)
    server, sess = servers(spec, "worker", 0, m.graph)
    with pytest.raises(errors.DeadlineExceededError, match="Timed out waiting for task /job:ps"):
        sess.run(m.count, options=tf.RunOptions(timeout_in_ms=300))
    monkeypatch.setattr(cluster_job, "WAIT_NOTICE", 0.2)
    caplog.set_level(logging.WARNING, "tf_accum")
    waiting = Background(sess.run, m.count)
    wait_until(lambda: "Still waiting for task /job:ps/task:0" in caplog.text, timeout=30)
    assert not waiting.done()
    # a session closed while its run waits for the ps task: the run ends
    closed = tf.Session(server.target, graph=m.graph)
    withdrawn = Background(closed.run, m.count)
    wait_until(lambda: len(closed._runs) == 1, timeout=30)
    closed.close()
    cancelled = withdrawn.error(30)
    assert isinstance(cancelled, errors.CancelledError), cancelled
    assert "while waiting for task /job:ps/task:0 to start" in cancelled.message
    servers(spec, "ps", 0)
    assert waiting.result(PROCESS_START) == 0
    with m.graph.as_default():
        apply = m.accumulator.apply_grad([1, 1], local_step=FAR_AHEAD)
    sess.run(apply)
    assert sess.run(m.count) == 1


def test_another_workers_task_has_a_host_made_on_first_use_and_made_again_when_lost(
    servers,
) -> None:
    """An op placed on another worker task runs in a host the process needing it makes
    (docs/departures.md T30); a lost one is made again, empty."""
    import ray

    spec = cluster_of(ps=1, workers=2)
    servers(spec, "ps", 0)
    g = tf.Graph()
    with g.as_default(), tf.device("/job:worker/task:0"):
        total = tf.Variable(1.0, name="on_worker_0")
        add = total.assign_add(2.0)
    server, sess = servers(spec, "worker", 1, g)
    sess.run(total.initializer)
    assert sess.run(add) == 3.0
    assert server.runtime.counts("worker", 0)["variables"] == 1
    lost = server.runtime.link("worker", 0).actor
    ray.kill(lost, no_restart=True)
    # ray.kill only asks: the host can still answer calls for a while, so wait until
    # it no longer does (bounded) before the run that must find it lost
    gone_by = time.monotonic() + 60
    while True:
        try:
            ray.get(lost.owner.remote(), timeout=10)
        except ray.exceptions.RayActorError:
            break
        assert time.monotonic() < gone_by, "the killed host still answers after 60 s"
        time.sleep(0.05)
    with pytest.raises(errors.UnavailableError, match="task /job:worker/task:0"):
        sess.run(add, options=RUN_BOUND)
    with pytest.raises(errors.FailedPreconditionError):  # made again, empty
        sess.run(add, options=RUN_BOUND)
    sess.run(total.initializer)
    assert sess.run(add) == 3.0
