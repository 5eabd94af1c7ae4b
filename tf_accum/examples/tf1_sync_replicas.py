"""A TensorFlow 1 synchronous-replicas program that runs on TensorFlow or on tf_accum.

The program is written against ``tf.compat.v1`` and uses only names that
``tf_accum.compat.v1`` provides: it builds a graph (placeholders for the
gradient and the step, a ``ConditionalAccumulator`` or a
``SparseConditionalAccumulator``, a weights ``Variable`` and the global step),
then worker threads call ``Session.run`` to apply gradients while a chief takes
their mean with a ``RunOptions`` timeout and updates the weights. The model
code (a least-squares gradient) is numpy and is fed through placeholders, as
it must be on tf_accum, which has no autodiff (``tf1_sgd_step`` computes its
gradients with graph arithmetic instead).

Choose the implementation with ``--backend tensorflow|tf_accum`` (or the
``backend`` parameter of :func:`run`); the program is the same either way:

    python -m tf_accum.examples.tf1_sync_replicas --backend tf_accum
    python -m tf_accum.examples.tf1_sync_replicas --backend tensorflow --variant sparse

Results are reproducible and equal under both backends: a barrier per step
makes every worker apply exactly one fresh gradient per step, a straggler
(worker 0) also re-sends its previous gradient with its old step, which the
accumulator must drop as stale, and gradients are rounded to a grid of
``2**-12`` so that their sum does not depend on the order in which the threads
applied them. :func:`reference` trains the same model in plain numpy.
"""

from __future__ import annotations

import argparse
import importlib
import json
import threading
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

Array = np.ndarray[Any, Any]

BACKENDS = {"tensorflow": "tensorflow.compat.v1", "tf_accum": "tf_accum.compat.v1"}
VARIANTS = ("dense", "sparse")
GRID = 2.0**-12  # gradients are multiples of this: exact sums in float32
STRAGGLER = 0  # the worker that also re-sends its previous (stale) gradient


@dataclass(frozen=True)
class Problem:
    """The data: one shard per worker and the weights that fit them."""

    variant: str
    features: np.ndarray[Any, Any]  # dense: [workers, examples, dim]; sparse: row ids
    targets: np.ndarray[Any, Any]  # dense: [workers, examples]; sparse: [workers, examples, dim]
    shape: tuple[int, ...]  # the weights' shape
    true_weights: np.ndarray[Any, Any]


def make_problem(variant: str, workers: int, seed: int) -> Problem:
    """Dense: linear regression of ``dim`` features. Sparse: an embedding table of
    ``rows`` rows, each example pulling one row toward its target (so a worker's
    gradient touches only the rows in its shard)."""
    rng = np.random.default_rng(seed)
    if variant == "dense":
        dim = 8
        true = rng.normal(size=dim).astype(np.float32)
        x = rng.normal(size=(workers, 64, dim)).astype(np.float32)
        y = (x @ true + 0.01 * rng.normal(size=(workers, 64))).astype(np.float32)
        return Problem(variant, x, y, (dim,), true)
    rows, dim = 32, 4
    true = rng.normal(size=(rows, dim)).astype(np.float32)
    ids = rng.integers(0, rows, size=(workers, 12))
    noise = 0.01 * rng.normal(size=(workers, 12, dim))
    return Problem(variant, ids, (true[ids] + noise).astype(np.float32), (rows, dim), true)


def gradient(problem: Problem, worker: int, weights: Array) -> tuple[Array, Array | None]:
    """The worker's gradient of its mean squared error, on the grid.

    Returns (dense gradient, None), or for the sparse variant (values, row indices).
    """
    if problem.variant == "dense":
        x, y = problem.features[worker], problem.targets[worker]
        return _on_grid(2.0 * x.T @ (x @ weights - y) / len(y)), None
    ids, targets = problem.features[worker], problem.targets[worker]
    rows, inverse = np.unique(ids, return_inverse=True)
    values = np.zeros((len(rows), weights.shape[1]), np.float64)
    np.add.at(values, inverse, 2.0 * (weights[ids] - targets))
    return _on_grid(values), rows.astype(np.int64)


def _on_grid(values: Array) -> Array:
    return (np.round(np.asarray(values, np.float64) / GRID) * GRID).astype(np.float32)


def loss(problem: Problem, weights: Array) -> float:
    """Mean squared error over all shards."""
    if problem.variant == "dense":
        return float(np.mean((problem.features @ weights - problem.targets) ** 2))
    return float(np.mean((weights[problem.features] - problem.targets) ** 2))


def _mean_update(problem: Problem, learning_rate: float, taken: Any) -> Array:
    """The weights' change for a taken mean gradient (dense array, or sparse triple)."""
    if problem.variant == "dense":
        return (-learning_rate * np.asarray(taken)).astype(np.float32)
    indices, values, _ = taken
    delta = np.zeros(problem.shape, np.float32)
    delta[np.asarray(indices)] = -learning_rate * np.asarray(values)
    return delta


def run(
    backend: str = "tf_accum",
    variant: str = "dense",
    workers: int = 4,
    steps: int = 20,
    learning_rate: float = 0.25,
    seed: int = 0,
    timeout_ms: int = 30_000,
    verbose: bool = False,
) -> dict[str, Any]:
    """Train with ``workers`` threads on ``backend`` ("tensorflow" or "tf_accum").

    Returns a dict of plain Python values: the losses after each step, the final
    weights and global step, how many gradients were applied (fresh and stale),
    and what the chief saw after training: the accumulator's count after one
    more stale gradient, and whether a last take timed out.

    Raises:
        ValueError: an unknown backend or variant.
        the first error of a worker, or of the chief's ``Session.run``.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {sorted(BACKENDS)}, got {backend!r}")
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    tf = importlib.import_module(BACKENDS[backend])
    problem = make_problem(variant, workers, seed)
    with tf.Graph().as_default():
        return _train(tf, problem, workers, steps, learning_rate, timeout_ms, verbose)


def _train(
    tf: ModuleType,
    problem: Problem,
    workers: int,
    steps: int,
    learning_rate: float,
    timeout_ms: int,
    verbose: bool,
) -> dict[str, Any]:
    # --- the graph: everything below is TF1 code, the same on both backends ---
    weights = tf.Variable(np.zeros(problem.shape, np.float32), name="weights")
    global_step = tf.train.get_or_create_global_step()
    step_ph = tf.placeholder(tf.int64, shape=[], name="local_step")
    if problem.variant == "dense":
        accumulator = tf.ConditionalAccumulator(
            tf.float32, shape=problem.shape, shared_name="grads", name="grads"
        )
        grad_ph = tf.placeholder(tf.float32, shape=problem.shape, name="gradient")
        apply_op = accumulator.apply_grad(grad_ph, local_step=step_ph)
        feeds: tuple[Any, ...] = (grad_ph,)
    else:
        accumulator = tf.SparseConditionalAccumulator(
            tf.float32, shape=problem.shape, shared_name="grads", name="grads"
        )
        indices_ph = tf.placeholder(tf.int64, shape=[None], name="indices")
        values_ph = tf.placeholder(tf.float32, shape=[None, problem.shape[1]], name="values")
        apply_op = accumulator.apply_grad(
            indices_ph, values_ph, grad_shape=list(problem.shape), local_step=step_ph
        )
        feeds = (values_ph, indices_ph)
    take_op = accumulator.take_grad(workers)
    last_take_op = accumulator.take_grad(1)
    count_op = accumulator.num_accumulated()
    delta_ph = tf.placeholder(tf.float32, shape=problem.shape, name="delta")
    update_op = tf.group(weights.assign_add(delta_ph), global_step.assign_add(1))
    init_op = tf.global_variables_initializer()

    # --- running it ---
    sess = tf.Session(config=tf.ConfigProto(allow_soft_placement=True))
    sess.run(init_op)
    barrier = threading.Barrier(workers + 1, timeout=timeout_ms / 1000.0)
    applied = [0] * workers
    stale_sent = [0] * workers
    failures: list[BaseException] = []

    def feed(values: Array, rows: Array | None, step: int) -> dict[Any, Any]:
        fed = dict(zip(feeds, (values,) if rows is None else (values, rows), strict=True))
        fed[step_ph] = step
        return fed

    def worker(index: int) -> None:
        previous: tuple[Array, Array | None, int] | None = None
        try:
            for _ in range(steps):
                barrier.wait()  # the chief has updated the weights
                current, step = sess.run([weights, global_step])
                if index == STRAGGLER and previous is not None:
                    sess.run(apply_op, feed_dict=feed(*previous))  # stale: must be dropped
                    stale_sent[index] += 1
                values, rows = gradient(problem, index, current)
                sess.run(apply_op, feed_dict=feed(values, rows, int(step)))
                applied[index] += 1
                previous = (values, rows, int(step))
        except threading.BrokenBarrierError:
            pass  # the chief stopped: its error is reported
        except BaseException as error:
            failures.append(error)
            barrier.abort()

    threads = [
        threading.Thread(target=worker, args=(i,), name=f"worker {i}", daemon=True)
        for i in range(workers)
    ]
    for thread in threads:
        thread.start()
    options = tf.RunOptions(timeout_in_ms=timeout_ms)
    losses = []
    try:
        try:
            for _ in range(steps):
                barrier.wait()
                taken = sess.run(take_op, options=options)
                delta = _mean_update(problem, learning_rate, taken)
                sess.run(update_op, feed_dict={delta_ph: delta})
                current, step = sess.run([weights, global_step])
                losses.append(loss(problem, current))
                if verbose:
                    print(f"step {int(step):3d}  loss {losses[-1]:.6f}")
        finally:
            barrier.abort()  # wakes any worker still waiting for a step
            for thread in threads:
                thread.join(timeout_ms / 1000.0)
            if failures:
                raise failures[0]  # the cause of whatever the chief saw
        # After training: a late gradient is stale, and a take finds nothing to take.
        values, rows = gradient(problem, STRAGGLER, current)
        sess.run(apply_op, feed_dict=feed(values, rows, 0))
        count_after_stale = int(sess.run(count_op))
        try:
            sess.run(last_take_op, options=tf.RunOptions(timeout_in_ms=100))
            last_take = "took"
        except tf.errors.DeadlineExceededError:
            last_take = "timed out"
        final_step = int(sess.run(global_step))
    finally:
        sess.close()
    return {
        "losses": losses,
        "weights": np.asarray(current, np.float64).ravel().tolist(),
        "global_step": final_step,
        "applied": sum(applied),
        "stale_sent": sum(stale_sent),
        "count_after_stale": count_after_stale,
        "last_take": last_take,
    }


def reference(
    variant: str = "dense",
    workers: int = 4,
    steps: int = 20,
    learning_rate: float = 0.25,
    seed: int = 0,
) -> dict[str, Any]:
    """The same training in plain numpy: what :func:`run` must give on either backend."""
    problem = make_problem(variant, workers, seed)
    weights = np.zeros(problem.shape, np.float32)
    losses = []
    for _ in range(steps):
        grads = [gradient(problem, i, weights) for i in range(workers)]
        if variant == "dense":
            mean: Any = np.sum([g for g, _ in grads], axis=0, dtype=np.float32) / np.float32(
                workers
            )
        else:
            total = np.zeros(problem.shape, np.float32)
            touched = np.zeros(problem.shape[0], np.int64)
            for values, rows in grads:
                assert rows is not None
                total[rows] += values
                touched[rows] += 1
            rows_taken = np.flatnonzero(touched)
            mean = (rows_taken, total[rows_taken] / touched[rows_taken, None], problem.shape)
        weights = weights + _mean_update(problem, learning_rate, mean)
        losses.append(loss(problem, weights))
    return {
        "losses": losses,
        "weights": np.asarray(weights, np.float64).ravel().tolist(),
        "global_step": steps,
        "applied": workers * steps,
        "stale_sent": steps - 1,
        "count_after_stale": 0,
        "last_take": "timed out",
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=sorted(BACKENDS), default="tf_accum")
    parser.add_argument("--variant", choices=VARIANTS, default="dense")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--json", action="store_true", help="print the results as one JSON line")
    args = parser.parse_args(argv)
    # A TF1 program's first line: graph mode for the whole process.
    importlib.import_module(BACKENDS[args.backend]).disable_eager_execution()
    outcome = run(args.backend, args.variant, args.workers, args.steps, verbose=not args.json)
    if args.json:
        print(json.dumps(outcome))
        return
    print(
        f"{args.workers} workers applied {outcome['applied']} fresh gradients and "
        f"{outcome['stale_sent']} stale ones (dropped); global step {outcome['global_step']}; "
        f"final loss {outcome['losses'][-1]:.6f}; a last take {outcome['last_take']}."
    )


if __name__ == "__main__":
    main()
