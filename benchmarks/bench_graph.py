"""TF1 graph mode: ``Session.run`` of accumulator ops, against TensorFlow's graph mode.

Run: ``python -m benchmarks.bench_graph`` (TensorFlow columns need the
``oracle`` extra). The same TF1 code builds both graphs (a
``ConditionalAccumulator``, an apply fed through a placeholder, a take) and
trials alternate between the two sessions and bare numpy (the add into a
buffer an apply does, the new array of the mean a take makes). Targets (issue: TF1 graph mode):
  - ``Session.run`` of an apply with a fed float32 gradient: at most a quarter
    of TensorFlow's time at 1 and 1e3 elements, at most its time at 1e6;
  - ``Session.run`` of a take of a ready round: likewise;
  - eager raw ops as fast after graph mode was used as before.
"""

from __future__ import annotations

import functools
import statistics
import threading
import time
from collections.abc import Callable
from types import ModuleType

import numpy as np

import tf_accum as tfa
import tf_accum.compat.v1 as tfa_v1
from benchmarks.harness import (
    Figures,
    command_line,
    fmt_ratio,
    fmt_time,
    load_tensorflow,
    median_seconds,
    print_table,
)

SIZES = (1, 1_000, 1_000_000)
# Every apply carries a step far ahead of the global step, so that takes (which
# bump the step) never make later applies stale.
AHEAD = 2**40
SIZE_NAMES = {1: "1", 1_000: "1e3", 1_000_000: "1e6"}
CALLS = {1: 200, 1_000: 200, 1_000_000: 5}  # calls per trial


class GraphCase:
    """One accumulator of ``size`` float32 in a graph of ``v1`` (either backend's
    ``compat.v1``), with a session, an apply fed by a placeholder, and a take."""

    def __init__(self, v1: ModuleType, size: int) -> None:
        self.gradient = np.random.default_rng(size).random(size, dtype=np.float32)
        graph = v1.Graph()
        with graph.as_default():
            accumulator = v1.ConditionalAccumulator(v1.float32, shape=[size])
            self.placeholder = v1.placeholder(v1.float32, shape=[size])
            self.apply_op = accumulator.apply_grad(
                self.placeholder, local_step=v1.constant(AHEAD, v1.int64)
            )
            self.take_op = accumulator.take_grad(1)
        self.session = v1.Session(graph=graph)
        self.feed = {self.placeholder: self.gradient}
        self.apply()
        self.take()

    def apply(self) -> None:
        self.session.run(self.apply_op, feed_dict=self.feed)

    def take(self) -> None:
        self.session.run(self.take_op)

    def apply_seconds(self, number: int) -> float:
        """Seconds per apply, over ``number`` applies."""
        return median_seconds(self.apply, number, 1)

    def take_seconds(self, number: int) -> float:
        """Seconds per take of a ready round (one apply, not timed, before each)."""
        total = 0.0
        for _ in range(number):
            self.apply()
            start = time.perf_counter()
            self.take()
            total += time.perf_counter() - start
        return total / number

    def close(self) -> None:
        self.session.close()


def alternate(measures: list[Callable[[], float]], repeat: int) -> list[float]:
    """The median of each measure (a trial returning seconds per call), trials in turn."""
    trials: list[list[float]] = [[] for _ in measures]
    for _ in range(repeat):
        for found, measure in zip(trials, measures, strict=True):
            found.append(measure())
    return [statistics.median(t) for t in trials]


def eager_apply_speed(repeat: int) -> tuple[float, float]:
    """Median seconds of a 1-element eager raw apply, and of the function it wraps
    (the op without the wrapper that reads graph mode's flag), alternating."""
    raw = tfa.raw_ops
    handle = raw.ResourceConditionalAccumulator(dtype=tfa.float32, shape=[1])
    gradient = np.ones(1, np.float32)
    op = raw.ResourceAccumulatorApplyGradient
    bare = op.__wrapped__

    def wrapped() -> None:
        op(handle=handle, local_step=0, gradient=gradient)

    def unwrapped() -> None:
        bare(handle=handle, local_step=0, gradient=gradient)

    try:
        found = alternate(
            [lambda: median_seconds(wrapped, 2000, 1), lambda: median_seconds(unwrapped, 2000, 1)],
            repeat,
        )
    finally:
        raw.DestroyResourceOp(resource=handle)
    return found[0], found[1]


def eager_while_building(repeat: int) -> tuple[float, float]:
    """:func:`eager_apply_speed` while another thread is inside ``Graph().as_default()``."""
    inside, leave = threading.Event(), threading.Event()

    def builder() -> None:
        with tfa_v1.Graph().as_default():
            inside.set()
            leave.wait(600)

    thread = threading.Thread(target=builder, daemon=True)
    thread.start()
    inside.wait(60)
    try:
        return eager_apply_speed(repeat)
    finally:
        leave.set()
        thread.join(60)


def eager_in_new_thread(repeat: int) -> tuple[float, float]:
    """:func:`eager_apply_speed` in a thread that never built a graph (as a worker
    thread of a program whose main thread built one)."""
    found: list[tuple[float, float]] = []
    thread = threading.Thread(target=lambda: found.append(eager_apply_speed(repeat)))
    thread.start()
    thread.join()
    return found[0]


class NumpyCase:
    """What an apply and a take cost in bare numpy: adding into a buffer, and a
    new array holding the mean."""

    def __init__(self, size: int) -> None:
        self.gradient = np.random.default_rng(size).random(size, dtype=np.float32)
        self.buffer = np.zeros(size, np.float32)

    def apply_seconds(self, number: int) -> float:
        return median_seconds(
            lambda: np.add(self.buffer, self.gradient, out=self.buffer), number, 1
        )

    def take_seconds(self, number: int) -> float:
        return median_seconds(lambda: np.divide(self.buffer, 1), number, 1)


def graph_rows(repeat: int, tf_v1: ModuleType | None, figures: Figures) -> list[list[str]]:
    rows = []
    for size in SIZES:
        ours = GraphCase(tfa_v1, size)
        theirs = GraphCase(tf_v1, size) if tf_v1 is not None else None
        cases = [c for c in (ours, NumpyCase(size), theirs) if c is not None]
        limit = 0.25 if size < 1_000_000 else 1.0
        number = CALLS[size]
        for what in ("apply", "take"):
            times = alternate(
                [functools.partial(getattr(c, f"{what}_seconds"), number) for c in cases], repeat
            )
            ratio = times[2] / times[0] if len(times) > 2 else None
            met = "n/a" if ratio is None else ("yes" if times[0] <= limit * times[2] else "NO")
            name = f"{what} {SIZE_NAMES[size]} float32"
            for column, seconds in zip(["tf_accum", "bare numpy", "TF graph"], times, strict=False):
                figures.add(name, column, seconds)
            rows.append(
                [
                    name,
                    fmt_time(times[0]),
                    fmt_time(times[1]),
                    fmt_time(times[2]) if len(times) > 2 else "n/a",
                    fmt_ratio(ratio),
                    fmt_ratio(times[0] / times[1]),
                    f"ours <= {limit:g} x TF",
                    met,
                ]
            )
        ours.close()
        if theirs is not None:
            theirs.close()
    return rows


def run(repeat: int, with_tensorflow: bool, json_path: str | None = None) -> None:
    # Measured first, while this process has never used graph mode.
    before = eager_apply_speed(repeat)
    tf = load_tensorflow() if with_tensorflow else None
    figures = Figures()
    rows = graph_rows(repeat, tf.compat.v1 if tf is not None else None, figures)
    after = eager_apply_speed(repeat)
    new_thread = eager_in_new_thread(repeat)
    building = eager_while_building(repeat)
    print_table(
        f"Session.run in graph mode, median of {repeat} alternating trials (per call)",
        ["case", "tf_accum", "bare numpy", "TF graph", "TF/ours", "ours/numpy", "target", "met"],
        rows,
    )
    eager = [
        ("before any graph was built", before),
        ("after graphs were built and run", after),
        ("after that, in a thread that never built one", new_thread),
        ("while another thread builds a graph", building),
    ]
    print_table(
        f"Eager 1-element raw apply, median of {repeat} alternating trials of 2000 calls",
        ["when", "raw op", "bare function", "raw op / bare", "raw op / before"],
        [
            [label, fmt_time(op), fmt_time(bare), fmt_ratio(op / bare), fmt_ratio(op / before[0])]
            for label, (op, bare) in eager
        ],
    )
    for label, (op, bare) in eager:
        figures.add(f"eager apply {label}", "tf_accum", op)
        figures.add(f"eager apply {label}", "bare function", bare)
    figures.write(json_path)


def main() -> None:
    args = command_line(__doc__, repeat=15).parse_args()
    run(args.repeat, not args.no_tensorflow, args.json)


if __name__ == "__main__":
    main()
