"""Training steps in TF1 graph mode: ``Session.run(train_op)``, against TensorFlow's graph mode.

Run: ``python -m benchmarks.bench_training`` (TensorFlow columns need the
``oracle`` extra). The same TF1 code builds both graphs, with the same
initial values and batches; trials alternate between the two sessions.
Targets (issue: gradients, model math and optimizers in graph mode):
  - a 784-100-10 MLP (batch 100, softmax cross entropy, Adam), ``minimize``:
    ``Session.run(train_op)`` within 1.2x of TensorFlow's time;
  - a linear regression on 1,000 features (batch 100, mean squared error,
    gradient descent), ``minimize``: likewise (per-op overhead dominates).
Both need ``tf.gradients``, ``matmul`` and ``tf.nn``; where this build lacks
them the row says so.

numpy's matrix products run on OpenBLAS, whose thread count is the process's
(``OPENBLAS_NUM_THREADS``, default one per core); the title says which was
used. On a machine whose cores are busy with other work, OpenBLAS's threads
wait for each other and a product can take many times longer than on one
thread; TensorFlow's own thread pools are not affected by the variable.
Neither this benchmark nor tf_accum changes the setting: run
``OPENBLAS_NUM_THREADS=1 python -m benchmarks.bench_training`` to measure
with one thread. Two rows that need only the optimizers are measured
always: the same steps with the gradients fed (``apply_gradients`` of Adam on
the MLP's variables, of gradient descent on the regression's).
"""

from __future__ import annotations

import functools
import statistics
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np

import tf_accum.compat.v1 as tfa_v1
from benchmarks.harness import (
    Figures,
    command_line,
    fmt_ratio,
    fmt_time,
    load_tensorflow,
    print_table,
)

BATCH = 100
CALLS = 20  # Session.run calls per trial
TARGET = 1.2
Array = np.ndarray[Any, Any]


def _data(features: int, classes: int) -> dict[str, Array]:
    rng = np.random.default_rng(features)
    x = rng.standard_normal((BATCH, features)).astype(np.float32)
    labels = rng.integers(0, classes, BATCH) if classes > 1 else None
    y = (
        np.eye(classes, dtype=np.float32)[labels]
        if labels is not None
        else rng.standard_normal((BATCH, 1)).astype(np.float32)
    )
    return {"x": x, "y": y}


def _weights(shapes: list[tuple[int, ...]]) -> list[Array]:
    rng = np.random.default_rng(7)
    return [(rng.standard_normal(s) * 0.05).astype(np.float32) for s in shapes]


MLP_SHAPES = [(784, 100), (100,), (100, 10), (10,)]
LINEAR_SHAPES = [(1000, 1), (1,)]


def missing_pieces(v1: ModuleType, model: str) -> list[str]:
    """What ``model``'s ``minimize`` needs that ``v1`` lacks."""
    import importlib.util

    wanted = ["matmul", "reduce_mean", "square", "gradients"] + (["nn"] if model == "mlp" else [])
    missing = [name for name in wanted if not hasattr(v1, name)]
    if v1 is tfa_v1 and importlib.util.find_spec("tf_accum.graph.gradients") is None:
        missing.append("tf_accum.graph.gradients")
    return missing


class Step:
    """One training step of a model in ``v1``'s graph mode, with a session."""

    def __init__(self, v1: ModuleType, model: str, fed_gradients: bool) -> None:
        shapes = MLP_SHAPES if model == "mlp" else LINEAR_SHAPES
        self.data = _data(784, 10) if model == "mlp" else _data(1000, 1)
        graph = v1.Graph()
        with graph.as_default():
            variables = [v1.Variable(w) for w in _weights(shapes)]
            if model == "mlp":
                optimizer = v1.train.AdamOptimizer(1e-3)
            else:
                optimizer = v1.train.GradientDescentOptimizer(0.01)
            self.feed: dict[Any, Array] = {}
            if fed_gradients:
                grads = [v1.placeholder(v1.float32, s) for s in shapes]
                rng = np.random.default_rng(3)
                for g, s in zip(grads, shapes, strict=True):
                    self.feed[g] = (rng.standard_normal(s) * 0.01).astype(np.float32)
                self.train = optimizer.apply_gradients(list(zip(grads, variables, strict=True)))
            else:
                x = v1.placeholder(v1.float32, self.data["x"].shape)
                y = v1.placeholder(v1.float32, self.data["y"].shape)
                self.feed = {x: self.data["x"], y: self.data["y"]}
                loss = _loss(v1, model, x, y, variables)
                self.train = optimizer.minimize(loss)
            init = v1.global_variables_initializer()
        self.session = v1.Session(graph=graph)
        self.session.run(init)
        self.session.run(self.train, self.feed)  # warm up

    def seconds(self, number: int) -> float:
        import time

        run, train, feed = self.session.run, self.train, self.feed
        start = time.perf_counter()
        for _ in range(number):
            run(train, feed)
        return (time.perf_counter() - start) / number

    def close(self) -> None:
        self.session.close()


def _loss(v1: ModuleType, model: str, x: Any, y: Any, variables: list[Any]) -> Any:
    if model == "mlp":
        w1, b1, w2, b2 = variables
        hidden = v1.nn.relu(v1.matmul(x, w1) + b1)
        logits = v1.matmul(hidden, w2) + b2
        return v1.reduce_mean(v1.nn.softmax_cross_entropy_with_logits_v2(labels=y, logits=logits))
    w, b = variables
    return v1.reduce_mean(v1.square(v1.matmul(x, w) + b - y))


def alternate(measures: list[Callable[[], float]], repeat: int) -> list[float]:
    """The median of each measure (a trial returning seconds per call), trials in turn."""
    trials: list[list[float]] = [[] for _ in measures]
    for _ in range(repeat):
        for found, measure in zip(trials, measures, strict=True):
            found.append(measure())
    return [statistics.median(t) for t in trials]


ROWS = [
    ("MLP 784-100-10, Adam, minimize", "mlp", False),
    ("linear regression 1000, SGD, minimize", "linear", False),
    ("MLP 784-100-10, Adam, gradients fed", "mlp", True),
    ("linear regression 1000, SGD, gradients fed", "linear", True),
]


def rows(repeat: int, tf_v1: ModuleType | None, figures: Figures) -> list[list[str]]:
    found = []
    for label, model, fed in ROWS:
        missing = [] if fed else missing_pieces(tfa_v1, model)
        if missing:
            found.append([label, f"n/a: tf_accum lacks {', '.join(missing)}", "", "", "", ""])
            continue
        steps = [Step(tfa_v1, model, fed)]
        if tf_v1 is not None:
            steps.append(Step(tf_v1, model, fed))
        times = alternate([functools.partial(s.seconds, CALLS) for s in steps], repeat)
        for s in steps:
            s.close()
        ratio = times[0] / times[1] if len(times) > 1 else None
        met = "n/a" if ratio is None else ("yes" if ratio <= TARGET else "NO")
        for column, seconds in zip(["tf_accum", "TF graph"], times, strict=False):
            figures.add(label, column, seconds)
        found.append(
            [
                label,
                fmt_time(times[0]),
                fmt_time(times[1]) if len(times) > 1 else "n/a",
                fmt_ratio(ratio),
                f"ours <= {TARGET:g} x TF",
                met,
            ]
        )
    return found


def blas_threads() -> str:
    """What the environment asks of OpenBLAS's thread count."""
    import os

    for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
        if os.environ.get(variable):
            return f"{variable}={os.environ[variable]}"
    return f"OpenBLAS's default ({os.cpu_count()} cores)"


def run(repeat: int, with_tensorflow: bool, json_path: str | None = None) -> None:
    tf = load_tensorflow() if with_tensorflow else None
    figures = Figures()
    table = rows(repeat, tf.compat.v1 if tf is not None else None, figures)
    print_table(
        f"Session.run(train_op), median of {repeat} alternating trials of {CALLS} steps (per "
        f"step); BLAS threads: {blas_threads()}",
        ["case", "tf_accum", "TF graph", "ours/TF", "target", "met"],
        table,
    )
    figures.write(json_path)


def main() -> None:
    args = command_line(__doc__, repeat=9).parse_args()
    run(args.repeat, not args.no_tensorflow, args.json)


if __name__ == "__main__":
    main()
