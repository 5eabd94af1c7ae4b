"""tf.train.Saver on a TF1 cluster: variables on ps tasks saved and restored by a worker.

The Saver's read and assign ops run where each variable lives (its ps task's
host, shared by every session of the cluster); the files are written and read
by the worker's process.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import numpy as np
import pytest

import tf_accum.compat.v1 as tf
from tf_accum import errors


def cluster_of(ps: int, workers: int) -> dict[str, list[str]]:
    tag = uuid.uuid4().hex[:8]
    return {
        "ps": [f"ps{i}-{tag}:2222" for i in range(ps)],
        "worker": [f"worker{i}-{tag}:2222" for i in range(workers)],
    }


def test_a_worker_saves_ps_variables_and_another_restores_them_for_everyone(
    task, tmp_path: Path
) -> None:
    spec = cluster_of(ps=2, workers=2)
    g = tf.Graph()
    with g.as_default():
        with tf.device(tf.train.replica_device_setter(cluster=spec)):
            step = tf.train.get_or_create_global_step()
            weights = tf.Variable(np.zeros((2, 3), np.float32), name="weights")
            bias = tf.Variable(np.zeros(3, np.float64), name="bias")
        with tf.device("/job:worker/task:0"):
            mine = tf.Variable(np.int32(5), name="mine")  # each session's own
        with tf.device(tf.train.replica_device_setter(cluster=spec)):
            saver = tf.train.Saver(max_to_keep=1)
        new_weights = tf.placeholder(tf.float32, [2, 3])
        change = tf.group(weights.assign(new_weights), bias.assign_add([1.0, 2.0, 3.0]))
        bump = step.assign_add(1)
        init = tf.global_variables_initializer()
    assert {v.op.name: v.op.device for v in (step, weights, bias)} == {
        "global_step": "/job:ps/task:0",
        "weights": "/job:ps/task:1",
        "bias": "/job:ps/task:0",
    }
    _, first = task(spec, 0, g)
    _, second = task(spec, 1, g)
    first.run(init)
    saved_weights = np.arange(6, dtype=np.float32).reshape(2, 3)
    first.run([change, bump], {new_weights: saved_weights})
    path = saver.save(first, str(tmp_path / "model"), global_step=step)
    assert path == f"{tmp_path}/model-1"
    stored = tf.train.load_checkpoint(path)
    assert stored.get_tensor("weights").tolist() == saved_weights.tolist()
    assert stored.get_tensor("bias").tolist() == [1.0, 2.0, 3.0]
    assert stored.get_tensor("mine") == 5 and stored.get_tensor("global_step") == 1

    # the other worker changes the shared variables, then restores them: for both sessions
    second.run([change, bump], {new_weights: np.full((2, 3), -1, np.float32)})
    with pytest.raises(errors.FailedPreconditionError, match="Could not find variable mine"):
        second.run(mine)
    assert first.run(bias).tolist() == [2.0, 4.0, 6.0]
    saver.restore(second, tf.train.latest_checkpoint(str(tmp_path)))
    for sess in (first, second):
        assert sess.run(weights).tolist() == saved_weights.tolist()
        assert sess.run(bias).tolist() == [1.0, 2.0, 3.0]
        assert sess.run(step) == 1
    # a worker's own variable is each session's: the restore initialised the second's
    assert second.run(mine) == 5
