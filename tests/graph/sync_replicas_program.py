"""A TF1 synchronous-replicas program that runs on TensorFlow or on tf_accum.

Worker threads share one graph and one ``Session``, as replicas of one
process: each worker has its own ``SyncReplicasOptimizer`` (so its own
``sync_rep_local_step``) over the same variables, the accumulators are shared
through their shared names and the token queue through ``sync_token_q``.
Worker 0 is the chief and runs the chief's queue runner.

The run is deterministic: no initial tokens (``num_tokens=0``), so every
gradient of a step is computed from that step's weights, and a barrier after
each worker step keeps each worker to one token per step. In the "backup"
scenario worker 2 waits until the chief has moved the step on before it
applies, so its gradient is always stale and dropped.

``python -m tests.graph.sync_replicas_program`` runs every scenario on
TensorFlow 2.21 and prints the results as JSON
(tests/graph/sync_replicas_tensorflow.json is what it printed).
"""

from __future__ import annotations

import json
import threading
import time
from types import ModuleType
from typing import Any

import numpy as np

# name -> (workers, replicas_to_aggregate, total_num_replicas, the lagging worker, optimizer)
SCENARIOS: dict[str, tuple[int, int, int | None, int | None, str]] = {
    "all": (3, 3, None, None, "GradientDescentOptimizer"),
    "backup": (3, 2, 3, 2, "GradientDescentOptimizer"),
    "adam": (2, 2, None, None, "AdamOptimizer"),
}
STEPS = 4
LEARNING_RATE = 0.125
ROWS, DIM = 6, 2
BATCH = 3


def data(workers: int, steps: int = STEPS) -> dict[str, np.ndarray[Any, Any]]:
    """Each worker's batches: features [w, s, b, 3], targets [w, s, b], row ids [w, s, b]
    (distinct and sorted within a batch, as TensorFlow's sparse accumulator
    merges them; batches of different workers share rows)."""
    rng = np.random.default_rng(7)
    x = np.round(rng.normal(size=(workers, steps, BATCH, 3)) * 8) / 8
    y = np.round(rng.normal(size=(workers, steps, BATCH)) * 8) / 8
    ids = np.stack(
        [
            np.stack([np.sort(rng.choice(ROWS, BATCH, replace=False)) for _ in range(steps)])
            for _ in range(workers)
        ]
    )
    return {"x": x.astype(np.float32), "y": y.astype(np.float32), "ids": ids.astype(np.int64)}


def initial_values() -> dict[str, np.ndarray[Any, Any]]:
    return {
        "w": np.array([[0.5], [-0.25], [0.125]], np.float32),
        "b": np.array(0.25, np.float32),
        "emb": (np.arange(ROWS * DIM, dtype=np.float32).reshape(ROWS, DIM) - 5) / 8,
    }


def run(tf: ModuleType, scenario: str, steps: int = STEPS, timeout: float = 60.0) -> dict[str, Any]:
    """Train ``steps`` steps; returns the variables, the global step and the
    losses each worker saw, as lists (on tf_accum also the chief's counts)."""
    workers, replicas, total, lagging, optimizer = SCENARIOS[scenario]
    batches = data(workers, steps)
    start = initial_values()
    graph = tf.Graph()
    with graph.as_default():
        global_step = tf.train.get_or_create_global_step()
        w = tf.Variable(start["w"], name="w")
        b = tf.Variable(start["b"], name="b")
        emb = tf.Variable(start["emb"], name="emb")
        x = tf.placeholder(tf.float32, [None, 3], name="x")
        y = tf.placeholder(tf.float32, [None], name="y")
        ids = tf.placeholder(tf.int64, [None], name="ids")
        looked_up = tf.reduce_sum(tf.nn.embedding_lookup(emb, ids), axis=1)
        prediction = tf.reshape(tf.matmul(x, w), [-1]) + b + looked_up
        loss = tf.reduce_mean(tf.square(prediction - y))
        optimizers, train_ops = [], []
        wrapped = getattr(tf.train, optimizer)(LEARNING_RATE)  # one, so one set of slots
        for _ in range(workers):
            opt = tf.train.SyncReplicasOptimizer(
                wrapped,
                replicas_to_aggregate=replicas,
                total_num_replicas=total,
            )
            train_ops.append(opt.minimize(loss, global_step=global_step))
            optimizers.append(opt)
        chief = optimizers[0]
        init_tokens = chief.get_init_tokens_op(num_tokens=0)
        close_queue = chief._sync_token_queue.close(cancel_pending_enqueues=True)
        init = tf.global_variables_initializer()
        local_init = tf.local_variables_initializer()
    with tf.Session(graph=graph) as sess:
        sess.run([init, local_init])
        sess.run(chief.chief_init_op)
        for opt in optimizers[1:]:
            sess.run(opt.local_step_init_op)
        sess.run(init_tokens)
        coord = tf.train.Coordinator()
        runner = chief.get_chief_queue_runner()
        threads = runner.create_threads(sess, coord=coord, daemon=True, start=True)
        barrier = threading.Barrier(workers, timeout=timeout)
        losses: list[list[float]] = [[] for _ in range(workers)]
        failures: list[BaseException] = []

        def work(index: int) -> None:
            try:
                for step in range(steps):
                    if index == lagging:
                        give_up = time.monotonic() + timeout
                        while sess.run(global_step) < step + 1:
                            if time.monotonic() > give_up:
                                raise TimeoutError("the step never moved on")
                            time.sleep(0.005)
                    feed = {
                        x: batches["x"][index, step],
                        y: batches["y"][index, step],
                        ids: batches["ids"][index, step],
                    }
                    _, value = sess.run([train_ops[index], loss], feed_dict=feed)
                    losses[index].append(float(value))
                    barrier.wait()
            except BaseException as error:  # reported by the main thread
                failures.append(error)
                barrier.abort()

        workers_threads = [threading.Thread(target=work, args=(i,)) for i in range(workers)]
        for thread in workers_threads:
            thread.start()
        for thread in workers_threads:
            thread.join(timeout)
        if failures:
            raise failures[0]
        if any(thread.is_alive() for thread in workers_threads):
            raise TimeoutError(f"a worker did not finish: losses {losses}")
        # the chief's last update ends before the tokens it enqueues, which the workers took
        final = sess.run({"w": w, "b": b, "emb": emb, "global_step": global_step})
        coord.request_stop()
        sess.run(close_queue)
    # closing the session cancels the chief's take of a step no worker sends
    coord.join(threads, stop_grace_period_secs=timeout)
    counts = {
        # tf_accum's counts of the chief (TensorFlow's optimizer has none)
        key: getattr(chief, key)
        for key in ("stale_gradients", "steps_aggregated")
        if hasattr(chief, key)
    }
    return {
        **counts,
        "w": np.asarray(final["w"]).tolist(),
        "b": float(final["b"]),
        "emb": np.asarray(final["emb"]).tolist(),
        "global_step": int(final["global_step"]),
        "losses": losses,
    }


def reference(scenario: str, steps: int = STEPS) -> dict[str, Any]:
    """The same training in numpy (the gradient descent scenarios): each step,
    the mean of the fresh gradients (each embedding row's mean over the
    gradients that touch it), then gradient descent."""
    workers, replicas, _, lagging, optimizer = SCENARIOS[scenario]
    assert optimizer == "GradientDescentOptimizer"
    batches = data(workers, steps)
    values = {k: v.astype(np.float64) for k, v in initial_values().items()}
    for step in range(steps):
        grads_w, grads_b = [], []
        rows_sum = np.zeros((ROWS, DIM))
        rows_count = np.zeros(ROWS)
        for index in range(workers):
            if index == lagging:
                continue
            xb, yb, ib = (batches[k][index, step] for k in ("x", "y", "ids"))
            prediction = xb @ values["w"][:, 0] + values["b"] + values["emb"][ib].sum(axis=1)
            residual = 2 * (prediction - yb) / len(yb)
            grads_w.append(xb.T @ residual)
            grads_b.append(residual.sum())
            rows_sum[ib] += residual[:, None]
            rows_count[ib] += 1
        assert len(grads_w) == replicas
        values["w"] -= LEARNING_RATE * np.mean(grads_w, axis=0)[:, None]
        values["b"] -= LEARNING_RATE * np.mean(grads_b)
        touched = rows_count > 0
        values["emb"][touched] -= LEARNING_RATE * rows_sum[touched] / rows_count[touched, None]
    return {
        "w": values["w"].tolist(),
        "b": float(values["b"]),
        "emb": values["emb"].tolist(),
        "global_step": steps,
    }


def main() -> None:
    import tensorflow.compat.v1 as tf

    tf.disable_v2_behavior()
    print(json.dumps({name: run(tf, name) for name in SCENARIOS}, indent=1))


if __name__ == "__main__":
    main()
