"""Optimizers on a TF1 cluster: slots beside their variables on the ps tasks, and the
training ops run there, so two workers' sessions train the same variables."""

from __future__ import annotations

import uuid
from typing import Any

import numpy as np
import pytest

import tf_accum.compat.v1 as tf


def _program(spec: Any) -> dict[str, Any]:
    graph = tf.Graph()
    with graph.as_default(), tf.device(tf.train.replica_device_setter(cluster=spec)):
        step = tf.train.get_or_create_global_step()
        w = tf.Variable(np.arange(8, dtype=np.float32).reshape(4, 2), name="w")
        b = tf.Variable(np.zeros(2, np.float32), name="b")
        rows = tf.placeholder(tf.float32, [None, 2])
        indices = tf.placeholder(tf.int64, [None])
        grad_b = tf.placeholder(tf.float32, [2])
        optimizer = tf.train.AdamOptimizer(0.1)
        train = optimizer.apply_gradients(
            [(tf.IndexedSlices(rows, indices), w), (grad_b, b)], global_step=step
        )
        momentum = tf.train.MomentumOptimizer(0.1, 0.9)
        train_b = momentum.apply_gradients([(grad_b, b)])
        init = tf.global_variables_initializer()
    return {
        "init": init,
        "graph": graph,
        "train": train,
        "train_b": train_b,
        "feeds": (rows, indices, grad_b),
        "fetch": [w, b, step, *optimizer.variables(), *momentum.variables()],
        "optimizers": (optimizer, momentum),
        "w": w,
        "b": b,
    }


def _steps(sessions: list[Any], p: dict[str, Any]) -> list[Any]:
    rows, indices, grad_b = p["feeds"]
    for k in range(4):
        sess = sessions[k % len(sessions)]
        feed = {rows: [[1.0, -1.0], [0.5, 0.5]], indices: [k % 4, 3], grad_b: [0.25 * k, -1.0]}
        sess.run([p["train"], p["train_b"]], feed)
    return [np.asarray(v) for v in sessions[0].run(p["fetch"])]


def test_two_workers_train_the_ps_variables_as_one_session_would(task) -> None:
    tag = uuid.uuid4().hex[:8]
    spec = {
        "ps": [f"ps{i}-{tag}:2222" for i in range(2)],
        "worker": [f"w{i}-{tag}:2222" for i in range(2)],
    }
    p = _program(spec)
    adam, momentum = p["optimizers"]
    w, b = p["w"], p["b"]
    # global_step on ps 0, w on ps 1, b on ps 0; slots with their variable
    assert [adam.get_slot(w, "m").op.device, adam.get_slot(b, "v").op.device] == [
        w.op.device,
        b.op.device,
    ]
    assert momentum.get_slot(b, "momentum").op.device == b.op.device == "/job:ps/task:0"
    assert w.op.device == "/job:ps/task:1"
    server, first = task(spec, 0, p["graph"])
    _, second = task(spec, 1, p["graph"])
    first.run(p["init"])
    on_cluster = _steps([first, second], p)
    counts = [server.runtime.counts("ps", k)["variables"] for k in (0, 1)]
    # ps 0: global_step, b, its two Adam slots, its momentum slot, the beta powers (beside b,
    # whose name sorts first); ps 1: w and its two Adam slots
    assert counts == [7, 3]
    with tf.Session(graph=p["graph"]) as local:
        local.run(p["init"])
        here = _steps([local], p)
    for ours, theirs in zip(on_cluster, here, strict=True):
        assert ours.tolist() == theirs.tolist()


def test_an_embedding_on_a_ps_task_gathers_and_trains_there(task) -> None:
    # embedding_lookup of a variable is a ResourceGather on its handle: it runs on the
    # table's ps task, and its IndexedSlices gradient goes to the sparse update there
    tag = uuid.uuid4().hex[:8]
    spec = {"ps": [f"ps0-{tag}:2222"], "worker": [f"w0-{tag}:2222"]}
    graph = tf.Graph()
    with graph.as_default(), tf.device(tf.train.replica_device_setter(cluster=spec)):
        table = tf.Variable(np.arange(12, dtype=np.float32).reshape(6, 2), name="table")
        ids = tf.placeholder(tf.int64, [None])
        looked_up = tf.nn.embedding_lookup(table, ids)
        loss = tf.reduce_sum(tf.square(looked_up))
        train = tf.train.AdagradOptimizer(0.5).minimize(loss)
        init = tf.global_variables_initializer()
    assert looked_up.op.type == "ResourceGather" or any(
        op.type == "ResourceGather" for op in graph.get_operations()
    )
    _, sess = task(spec, 0, graph)
    sess.run(init)
    with tf.Session(graph=graph) as local:
        local.run(init)
        for feed in ([0, 3], [3, 5, 3]):
            ours = sess.run([looked_up, train], {ids: feed})[0]
            theirs = local.run([looked_up, train], {ids: feed})[0]
            assert ours.tolist() == theirs.tolist()
        assert sess.run(table).tolist() == local.run(table).tolist()
    with pytest.raises(tf.errors.InvalidArgumentError, match="not in"):
        sess.run(looked_up, {ids: [6]})
