"""The Ray requests a synchronous-replicas training step makes, counted.

The program is benchmarks/bench_sync_replicas.py's: a 784-100-10 MLP trained
by SyncReplicasOptimizer over Adam, its variables spread over the ps tasks
by replica_device_setter. A worker's step runs on a thread while the chief's
sync op runs on this one, as in a running job (the step's token comes from
the sync op that used its gradients), and every call this process makes to a
ps task's host is counted, by thread and method, beside the requests each
host says it ran. A change that adds a request to either fails here.
"""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tf_accum.compat.v1 as tf

RUN_BOUND = tf.RunOptions(timeout_in_ms=60_000)


def mlp(spec: Any) -> dict[str, Any]:
    """The benchmark's job as worker 0 builds it (one replica)."""
    rng = np.random.default_rng(0)
    graph = tf.Graph()
    device = tf.train.replica_device_setter(cluster=spec, worker_device="/job:worker/task:0")
    with graph.as_default(), tf.device(device):
        global_step = tf.train.get_or_create_global_step()
        images = tf.placeholder(tf.float32, [None, 784])
        labels = tf.placeholder(tf.float32, [None, 10])
        w1 = tf.Variable((rng.standard_normal((784, 100)) * 0.05).astype(np.float32), name="w1")
        b1 = tf.Variable(np.zeros(100, np.float32), name="b1")
        w2 = tf.Variable((rng.standard_normal((100, 10)) * 0.1).astype(np.float32), name="w2")
        b2 = tf.Variable(np.zeros(10, np.float32), name="b2")
        logits = tf.matmul(tf.nn.relu(tf.matmul(images, w1) + b1), w2) + b2
        loss = tf.reduce_mean(
            tf.nn.softmax_cross_entropy_with_logits_v2(labels=labels, logits=logits)
        )
        opt = tf.train.SyncReplicasOptimizer(
            tf.train.AdamOptimizer(1e-3), replicas_to_aggregate=1, total_num_replicas=1
        )
        train_op = opt.minimize(loss, global_step=global_step)
        tokens = opt.get_init_tokens_op(num_tokens=4)
        init = tf.global_variables_initializer()
        local_init = tf.local_variables_initializer()
    feed = {
        images: rng.random((100, 784), dtype=np.float32),
        labels: np.eye(10, dtype=np.float32)[rng.integers(0, 10, 100)],
    }
    return {
        "graph": graph,
        "opt": opt,
        "train_op": train_op,
        "sync_op": opt.get_chief_queue_runner().enqueue_ops[0],
        "tokens": tokens,
        "init": init,
        "local_init": local_init,
        "global_step": global_step,
        "w1": w1,
        "feed": feed,
    }


class CountingActor:
    """Stands for a host's actor handle: counts the calls made on it, by method."""

    def __init__(self, actor: Any, calls: Counter[str], answers: list[Any]) -> None:
        self._actor = actor
        self._calls = calls
        self._answers = answers

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._actor, name)
        calls = self._calls
        answers = self._answers

        class Counted:
            def __init__(self, chosen: Any = method) -> None:
                self.chosen = chosen

            def options(self, **options: Any) -> Any:
                return Counted(method.options(**options))

            def remote(self, *args: Any, **kwargs: Any) -> Any:
                calls[f"{threading.current_thread().name}: {name}"] += 1
                found = self.chosen.remote(*args, **kwargs)
                answers.extend(found if isinstance(found, list) else [found])
                return found

        return Counted()


def counted(
    server: Any,
    ps_tasks: int,
    monkeypatch: pytest.MonkeyPatch,
    run: Callable[[], Any],
    answers: list[Any] | None = None,
) -> tuple[Counter[str], list[int]]:
    """The calls ``run`` makes on the hosts' actors (by thread name and method), and
    the requests each host ran (the calls' results are added to ``answers``)."""
    calls: Counter[str] = Counter()
    links = [server.runtime.host("ps", k) for k in range(ps_tasks)]
    before = [server.runtime.counts("ps", k)["requests"] for k in range(ps_tasks)]
    with monkeypatch.context() as patch:
        for link in links:
            patch.setattr(
                link, "actor", CountingActor(link.actor, calls, [] if answers is None else answers)
            )
        run()
    after = [server.runtime.counts("ps", k)["requests"] for k in range(ps_tasks)]
    return calls, [b - a for a, b in zip(before, after, strict=True)]


def answer_bytes(answers: list[Any]) -> int:
    """The bytes of the answers to a run's requests (pickled, as they travel)."""
    import pickle

    import ray

    return sum(len(pickle.dumps(found)) for found in ray.get(answers, timeout=60))


# ps tasks -> (a worker's step: requests per host, the sync op: requests per host)
EXPECTED = {
    # the gradients' applies with the token's dequeue: the variables' reads went
    # ahead with the last step's dequeue, after the chief's update, and still hold
    # the sync op: takes, Adam's updates, the step and the tokens, all on the one host
    1: ([1], [1]),
    # the reads (one per host: ps task 0's cannot go ahead, as ps task 1's applies
    # come before its last request, and ps task 1's, read ahead with its applies,
    # always change in the chief's update, so the step stopped reading them ahead);
    # ps task 1's applies; then ps task 0's applies with the dequeue (it comes after
    # all the applies)
    # the sync op: the beta powers' reads on ps task 0 (ps task 1's updates need them:
    # they go before the takes wait); each task's takes with its variables' updates;
    # the beta powers' and the step's updates and the tokens on ps task 0
    2: ([2, 2], [3, 1]),
}


def initialized(task: Any, ps_tasks: int, tokens: bool = True) -> tuple[dict[str, Any], Any, Any]:
    """The MLP on ``ps_tasks`` ps tasks of a cluster of its own, with a chief's
    session that has run the initialization and put the first tokens in (with
    ``tokens``)."""
    tag = uuid.uuid4().hex[:8]
    spec = {"ps": [f"ps{k}-{tag}:2222" for k in range(ps_tasks)], "worker": [f"w0-{tag}:2222"]}
    m = mlp(spec)
    server, sess = task(spec, 0, m["graph"])
    sess.run([m["init"], m["local_init"]])
    sess.run(m["opt"].chief_init_op)
    if tokens:
        sess.run(m["tokens"])
    return m, server, sess


def job_step(m: dict[str, Any], sess: Any, fetches: list[Any] | None = None) -> Any:
    """One global step of a running job: the worker's step on a thread named "step"
    (its token comes from the sync op, once its gradients are in), the sync op on
    this one; the step's results."""
    found: list[Any] = []
    fetched = [m["train_op"], m["global_step"]] if fetches is None else fetches
    stepping = threading.Thread(
        target=lambda: found.append(sess.run(fetched, m["feed"], options=RUN_BOUND)),
        name="step",
    )
    stepping.start()
    try:
        sess.run(m["sync_op"], options=RUN_BOUND)
    finally:
        stepping.join(timeout=60)
    assert not stepping.is_alive() and found, "the worker's step did not end"
    return found[0]


@pytest.mark.parametrize("ps_tasks", [1, 2])
def test_the_requests_of_a_worker_step_and_of_the_sync_op(
    task: Any, ps_tasks: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    m, server, sess = initialized(task, ps_tasks, tokens=False)
    worker, sync_op = EXPECTED[ps_tasks]
    # the first steps learn the answers' sizes and which reads hold ahead
    for _ in range(6):
        job_step(m, sess)
    for _ in range(2):
        calls, requests = counted(server, ps_tasks, monkeypatch, lambda: job_step(m, sess))
        assert requests == [a + b for a, b in zip(worker, sync_op, strict=True)]
        # nothing else: no ping, no wait
        assert calls == Counter({"step: run": sum(worker), "MainThread: run": sum(sync_op)})
    # and the steps trained: the global step went up once per sync op
    assert sess.run(m["global_step"]) == 8
    assert all(server.runtime.counts("ps", k)["reads_changed"] <= 3 for k in range(ps_tasks))


@pytest.mark.parametrize("ps_tasks", [1, 2])
def test_the_sync_ops_answers_leave_the_taken_means_on_the_hosts(
    task: Any, ps_tasks: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The takes' means feed Adam's updates on their hosts and nothing of the chief's:
    the answers carry none of them (the 784x100 weight's alone is 313 KB), only
    small values (the beta powers', the step's), yet the run trains, and each
    take's counts still reach the session."""
    m, server, sess = initialized(task, ps_tasks)
    before = sess.run(m["w1"])
    for _ in range(2):
        sess.run(m["opt"].local_step_init_op)
        sess.run([m["train_op"], m["global_step"]], m["feed"], options=RUN_BOUND)
        answers: list[Any] = []
        counted(
            server,
            ps_tasks,
            monkeypatch,
            lambda: sess.run(m["sync_op"], options=RUN_BOUND),
            answers,
        )
        assert answer_bytes(answers) < 16 * 1024
    assert sess.run(m["global_step"]) == 2
    assert m["opt"].steps_aggregated == 2  # the takes' counts came back
    assert not np.array_equal(before, sess.run(m["w1"]))  # Adam's updates used the means
