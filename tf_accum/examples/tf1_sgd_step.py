"""A TensorFlow 1 synchronous-SGD program whose model math is in the graph,
run unchanged on TensorFlow or on tf_accum.

Two workers each compute the least-squares gradient of their shard in the
graph (``reduce_sum(X * w, axis=1)``, ``square``, ``reduce_mean``, ...) and
apply it to a ``ConditionalAccumulator``; the chief takes their mean and
updates the weights with ``w.assign(w - lr * acc.take_grad(2))``. Every step
prints the loss, and the program ends with the weights:

    python -m tf_accum.examples.tf1_sgd_step --backend tf_accum
    python -m tf_accum.examples.tf1_sgd_step --backend tensorflow

Losses and weights are printed to 4 decimals: TensorFlow and numpy may sum
float32 values in different orders, which changes their last bits only (the
loss of step 3 is 1.8263953 on one and 1.8263955 on the other), and the
printed figures are what both give. ``--json`` prints the unrounded values too.
"""

from __future__ import annotations

import argparse
import importlib
import json
import threading
from types import ModuleType
from typing import Any

import numpy as np

BACKENDS = {"tensorflow": "tensorflow.compat.v1", "tf_accum": "tf_accum.compat.v1"}
WORKERS = 2
DIM = 3
EXAMPLES = 8  # per worker
DECIMALS = 4
TIMEOUT_MS = 60_000


def make_data(seed: int = 7) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Features ``[workers, examples, dim]`` and targets ``[workers, examples]`` of a
    linear model with a little noise."""
    rng = np.random.default_rng(seed)
    features = rng.normal(size=(WORKERS, EXAMPLES, DIM)).astype(np.float32)
    true_weights = np.array([1.5, -2.0, 0.5], np.float32)
    noise = 0.01 * rng.normal(size=(WORKERS, EXAMPLES))
    targets = (features @ true_weights + noise).astype(np.float32)
    return features, targets


def run(backend: str, steps: int = 20, learning_rate: float = 0.1) -> dict[str, Any]:
    """Train for ``steps`` steps on ``backend``; returns the losses and the weights."""
    tf: ModuleType = importlib.import_module(BACKENDS[backend])
    with tf.Graph().as_default():
        return _train(tf, steps, learning_rate)


def _train(tf: ModuleType, steps: int, learning_rate: float) -> dict[str, Any]:
    features, targets = make_data()
    # --- the graph: TF1 code, the same on both backends ---
    w = tf.Variable(tf.zeros([DIM]), name="weights")
    x = tf.placeholder(tf.float32, shape=[None, DIM], name="x")
    y = tf.placeholder(tf.float32, shape=[None], name="y")
    local_step = tf.placeholder(tf.int64, shape=[], name="local_step")
    error = tf.reduce_sum(x * w, axis=1) - y
    loss = tf.reduce_mean(tf.square(error))
    # d loss / d w = 2 * mean over examples of x * error (x transposed, so error broadcasts)
    x_t = tf.placeholder(tf.float32, shape=[DIM, None], name="x_t")
    gradient = 2.0 * tf.reduce_mean(tf.multiply(x_t, error), axis=1)
    accumulator = tf.ConditionalAccumulator(tf.float32, shape=[DIM], name="grads")
    apply_op = accumulator.apply_grad(gradient, local_step=local_step)
    mean_gradient = accumulator.take_grad(WORKERS)
    train_op = w.assign(w - learning_rate * mean_gradient)
    init_op = tf.global_variables_initializer()

    # --- running it ---
    every_x = features.reshape(-1, DIM)
    every_y = targets.reshape(-1)
    losses = []
    with tf.Session() as sess:
        sess.run(init_op)
        for step in range(steps):
            failures: list[BaseException] = []

            def worker(
                index: int, step: int = step, failures: list[BaseException] = failures
            ) -> None:
                feed = {
                    x: features[index],
                    y: targets[index],
                    x_t: features[index].T,
                    local_step: step,
                }
                try:
                    sess.run(apply_op, feed_dict=feed)
                except BaseException as failure:  # reported by the chief
                    failures.append(failure)

            threads = [threading.Thread(target=worker, args=(i,)) for i in range(WORKERS)]
            for thread in threads:
                thread.start()
            sess.run(train_op, options=tf.RunOptions(timeout_in_ms=TIMEOUT_MS))
            for thread in threads:
                thread.join(TIMEOUT_MS / 1000)
            if failures:
                raise failures[0]
            losses.append(float(sess.run(loss, {x: every_x, y: every_y})))
        weights = [float(v) for v in sess.run(w)]
    return {
        "losses": [round(v, DECIMALS) for v in losses],
        "weights": [round(v, DECIMALS) for v in weights],
        "raw": {"losses": losses, "weights": weights},
    }


def reference(steps: int = 20, learning_rate: float = 0.1) -> dict[str, Any]:
    """The same training in numpy (float64): the answer both backends approach."""
    features, targets = make_data()
    w = np.zeros(DIM)
    losses = []
    for _ in range(steps):
        grads = [
            2 * ((f @ w - t)[:, None] * f).mean(axis=0)
            for f, t in zip(features, targets, strict=True)
        ]
        w = w - learning_rate * np.mean(grads, axis=0)
        every = features.reshape(-1, DIM) @ w - targets.reshape(-1)
        losses.append(float(np.mean(every**2)))
    return {"losses": losses, "weights": w.tolist()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=sorted(BACKENDS), default="tf_accum")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--json", action="store_true", help="print the result as one JSON line")
    args = parser.parse_args(argv)
    tf: ModuleType = importlib.import_module(BACKENDS[args.backend])
    tf.disable_eager_execution()  # a TF1 program: graph mode for the whole process
    result = _train(tf, args.steps, 0.1)
    if args.json:
        print(json.dumps(result))
        return
    for step, value in enumerate(result["losses"], 1):
        print(f"step {step:3d}  loss {value:.4f}")
    print("weights", result["weights"])


if __name__ == "__main__":
    main()
