"""The performance table of the project's issue 10, from one alternating run.

Run: ``python -m benchmarks.bench_table`` (TensorFlow columns need the
``oracle`` extra; ``--no-tensorflow`` leaves them out). Every row times its
implementations in turn, trial after trial (tf_accum, TensorFlow eager,
TensorFlow graph, bare numpy, ...), so that a noisy neighbour slows all of them
alike; figures are medians over the trials and ratios come from the same run.

``ratio`` is tf_accum's time over the faster TensorFlow mode (lower is better),
except for bfloat16, which TensorFlow's accumulators do not support: there it
is over tf_accum's own float32 apply. ``target`` is the issue's goal for the
ratio. TensorFlow runs its sparse accumulators only in graph mode (their
handles are references, which eager execution refuses). Two rows are not in
the issue's table: the float16 take, of ordinary values and of subnormal
halves (small gradients), both held to the float16 apply's target.

``numpy`` is bare numpy doing the row's core work on one thread (for the
concurrent row: two threads adding into buffers of their own while a third
divides one for every 8 gradients, with no synchronisation at all; the sparse
cycle's also sorts every gradient, which tf_accum skips for sorted indices);
``/numpy`` is tf_accum's time over it, and ``numpy/TF`` what that bare work
reaches against TensorFlow. The concurrent row's numpy figure already uses
every core: a target below its ``numpy/TF`` cannot be met on the machine that
ran the table.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import ml_dtypes
import numpy as np

import tf_accum as tfa
from benchmarks.harness import Figures, command_line, fmt_time, load_tensorflow, print_table

raw = tfa.raw_ops
AHEAD = 2**40  # a local step no take ever catches up with: no gradient is stale
SPARSE_ROWS, WIDTH, SPARSE_APPLIES = 1_000_000, 64, 8


@dataclass
class Timed:
    """One implementation of a row: ``run`` is timed, ``setup`` (if any) is not."""

    run: Callable[[], Any]
    number: int = 1  # calls per trial; the figure is per call
    setup: Callable[[], Any] | None = None
    per: int | Callable[[], int] = 1  # the figure is divided by this too (per gradient)
    trials: list[float] = field(default_factory=list)

    def trial(self) -> None:
        if self.setup is not None:
            self.setup()
        start = time.perf_counter()
        for _ in range(self.number):
            self.run()
        elapsed = (time.perf_counter() - start) / self.number
        self.trials.append(elapsed / (self.per() if callable(self.per) else self.per))

    def median(self) -> float:
        return statistics.median(self.trials)


@dataclass
class Row:
    name: str
    ours: Timed
    target: float
    eager: Timed | None = None
    graph: Timed | None = None
    numpy: Timed | None = None
    base: Timed | None = None  # what the ratio divides by, when not TensorFlow
    base_name: str = ""

    def measure(self, repeat: int) -> None:
        timed = [t for t in (self.ours, self.eager, self.graph, self.numpy, self.base) if t]
        for t in timed:  # warm-up, not recorded
            t.trial()
            t.trials.clear()
        for _ in range(repeat):
            for t in timed:
                t.trial()

    def ratio(self) -> float | None:
        if self.base is not None:
            return self.ours.median() / self.base.median()
        modes = [t.median() for t in (self.eager, self.graph) if t is not None]
        return self.ours.median() / min(modes) if modes else None

    def figures(self, into: Figures) -> None:
        for column, timed in [
            ("tf_accum", self.ours),
            ("TF eager", self.eager),
            ("TF graph", self.graph),
            ("numpy", self.numpy),
            (self.base_name, self.base),
        ]:
            if timed is not None:
                into.add(self.name, column, timed.median())

    def cells(self) -> list[str]:
        def cell(t: Timed | None) -> str:
            return "-" if t is None else fmt_time(t.median())

        ratio = self.ratio()
        met = "" if ratio is None else ("yes" if ratio <= self.target else "NO")
        base = f" ({self.base_name} {fmt_time(self.base.median())})" if self.base else ""
        numpy = self.numpy.median() if self.numpy is not None else None
        modes = [t.median() for t in (self.eager, self.graph) if t is not None]
        return [
            self.name,
            cell(self.eager),
            cell(self.graph),
            cell(self.numpy),
            cell(self.ours) + base,
            "n/a" if ratio is None else f"{ratio:.2f}",
            f"<= {self.target}",
            met,
            "-" if numpy is None else f"{self.ours.median() / numpy:.2f}",
            "-" if numpy is None or not modes else f"{numpy / min(modes):.2f}",
        ]


# --- dense -------------------------------------------------------------------


class Dense:
    """A tf_accum dense accumulator and (optionally) TensorFlow's, same gradient."""

    def __init__(self, tf: Any, size: int, dtype: Any, seed: int = 0, scale: float = 1.0) -> None:
        gradient = np.random.default_rng(seed).random(size, dtype=np.float32) * np.float32(scale)
        self.gradient = gradient.astype(tfa.as_dtype(dtype).numpy_dtype)
        self.dtype = dtype
        self.handle = raw.ResourceConditionalAccumulator(dtype=dtype, shape=[size])
        self.tf = tf
        if tf is None:
            return
        tf_dtype = tf.as_dtype(tfa.as_dtype(dtype).name)
        self.tf_dtype = tf_dtype
        self.eager_handle = tf.raw_ops.ResourceConditionalAccumulator(dtype=tf_dtype, shape=[size])
        self.eager_gradient = tf.constant(self.gradient)
        self.graph = tf.Graph()
        with self.graph.as_default():
            handle = tf.raw_ops.ResourceConditionalAccumulator(dtype=tf_dtype, shape=[size])
            self.graph_apply_op = tf.raw_ops.ResourceAccumulatorApplyGradient(
                handle=handle,
                local_step=tf.constant(AHEAD, tf.int64),
                gradient=tf.constant(self.gradient),
            )
            self.graph_take_op = tf.raw_ops.ResourceAccumulatorTakeGradient(
                handle=handle, num_required=1, dtype=tf_dtype
            )
        self.session = tf.compat.v1.Session(graph=self.graph)

    def apply(self) -> None:
        raw.ResourceAccumulatorApplyGradient(
            handle=self.handle, local_step=AHEAD, gradient=self.gradient
        )

    def take(self) -> Any:
        return raw.ResourceAccumulatorTakeGradient(
            handle=self.handle, num_required=1, dtype=self.dtype
        )

    def eager_apply(self) -> None:
        self.tf.raw_ops.ResourceAccumulatorApplyGradient(
            handle=self.eager_handle, local_step=AHEAD, gradient=self.eager_gradient
        )

    def eager_take(self) -> Any:
        return self.tf.raw_ops.ResourceAccumulatorTakeGradient(
            handle=self.eager_handle, num_required=1, dtype=self.tf_dtype
        )

    def graph_apply(self) -> None:
        self.session.run(self.graph_apply_op)

    def graph_take(self) -> Any:
        return self.session.run(self.graph_take_op)


def repeat_calls(fn: Callable[[], Any], times: int) -> Callable[[], None]:
    def run() -> None:
        for _ in range(times):
            fn()

    return run


def dense_apply_row(tf: Any, name: str, dtype: Any, target: float) -> Row:
    acc = Dense(tf, 1_000_000, dtype)
    buffer = np.zeros_like(acc.gradient)
    for apply in (acc.apply, *((acc.eager_apply, acc.graph_apply) if tf else ())):
        apply()  # every timed apply adds to a round already started
    row = Row(name, Timed(acc.apply, 10), target)
    row.numpy = Timed(lambda: np.add(buffer, acc.gradient, out=buffer), 10)
    if tf is not None:
        row.eager = Timed(acc.eager_apply, 10)
        row.graph = Timed(acc.graph_apply, 10)
    return row


def bfloat16_row(tf: Any) -> Row:
    row = dense_apply_row(None, "bfloat16 apply, 1e6 (ratio: over our float32 apply)",
                          tfa.bfloat16, 2.0)  # fmt: skip
    row.base = dense_apply_row(None, "", tfa.float32, 0).ours
    row.base_name = "float32"
    return row


def dense_take_rows(tf: Any) -> list[Row]:
    acc = Dense(tf, 10_000_000, tfa.float32)
    buffer = np.zeros_like(acc.gradient)
    four = repeat_calls(acc.apply, 4)
    take = Row("dense take, 1e7 float32 (after 4 applies)", Timed(acc.take, setup=four), 0.8)
    cycle = Row("dense cycle (4 applies + take), 1e7", Timed(lambda: (four(), acc.take())), 0.8)
    take.numpy = Timed(lambda: np.divide(buffer, np.float32(4), out=buffer))
    cycle.numpy = Timed(lambda: (np.copyto(np.empty_like(buffer), acc.gradient),
                                 repeat_calls(lambda: np.add(buffer, acc.gradient, out=buffer), 3)(),
                                 np.divide(buffer, np.float32(4), out=buffer)))  # fmt: skip
    if tf is not None:
        eager_four = repeat_calls(acc.eager_apply, 4)
        graph_four = repeat_calls(acc.graph_apply, 4)
        take.eager = Timed(acc.eager_take, setup=eager_four)
        take.graph = Timed(acc.graph_take, setup=graph_four)
        cycle.eager = Timed(lambda: (eager_four(), acc.eager_take()))
        cycle.graph = Timed(lambda: (graph_four(), acc.graph_take()))
    return [take, cycle]


def half_take_rows(tf: Any) -> list[Row]:
    # Not in the table: a float16 MEAN round ends in a take, whose
    # division numpy does in scalar code; the target is the float16 apply's.
    # Small gradients (below 2**-14, as float16 gradients without loss scaling
    # often are) are subnormal halves, which the take must widen without a
    # subnormal float32 (half_kernel.half_quotient).
    rows = []
    for name, scale in [
        ("float16 take, 1e6 (after 4 applies)", 1.0),
        ("float16 take, 1e6 subnormal values (after 4 applies)", 1e-5),
    ]:
        acc = Dense(tf, 1_000_000, tfa.float16, scale=scale)
        row = Row(name, Timed(acc.take, setup=repeat_calls(acc.apply, 4)), 1.5)
        out = np.empty_like(acc.gradient)
        row.numpy = Timed(lambda g=acc.gradient, o=out: np.divide(g, g.dtype.type(4), out=o))
        if tf is not None:
            row.eager = Timed(acc.eager_take, setup=repeat_calls(acc.eager_apply, 4))
            row.graph = Timed(acc.graph_take, setup=repeat_calls(acc.graph_apply, 4))
        rows.append(row)
    return rows


def tiny_row(tf: Any) -> Row:
    handle = raw.ResourceConditionalAccumulator(dtype=tfa.float32, shape=[1])
    gradient = np.ones(1, np.float32)
    buffer = np.zeros(1, np.float32)
    calls = 2000

    def ours() -> None:
        raw.ResourceAccumulatorApplyGradient(handle=handle, local_step=0, gradient=gradient)

    row = Row("1-element apply (raw op, numpy array in)", Timed(ours, calls), 0.2)
    row.numpy = Timed(lambda: np.add(buffer, gradient, out=buffer), calls)
    if tf is not None:
        eager_handle = tf.raw_ops.ResourceConditionalAccumulator(dtype=tf.float32, shape=[1])
        row.eager = Timed(
            lambda: tf.raw_ops.ResourceAccumulatorApplyGradient(
                handle=eager_handle, local_step=0, gradient=gradient
            ),
            calls // 4,
        )
        graph = tf.Graph()
        with graph.as_default():
            h = tf.raw_ops.ResourceConditionalAccumulator(dtype=tf.float32, shape=[1])
            fed = tf.compat.v1.placeholder(tf.float32, [1])
            op = tf.raw_ops.ResourceAccumulatorApplyGradient(
                handle=h, local_step=tf.constant(0, tf.int64), gradient=fed
            )
        session = tf.compat.v1.Session(graph=graph)
        row.graph = Timed(lambda: session.run(op, {fed: gradient}), calls // 20)
    return row


class Concurrent:
    """Two threads apply ``per_thread`` gradients each while a third takes(8).

    ``setup`` starts the threads, untimed: the appliers wait at a start line
    and the taker already waits in its first take. ``__call__`` releases the
    appliers, and once they are done the main thread applies further gradients
    until the taker's last take is served. The figure is the wall time over
    all gradients applied.
    """

    def __init__(self, apply: Callable[[], None], take: Callable[[], Any], per_thread: int):
        self.apply, self.take, self.per_thread = apply, take, per_thread
        self.gradients: list[int] = []
        self.threads: tuple[threading.Event, threading.Event, list[threading.Thread]] | None = None

    def setup(self) -> None:
        go, done = threading.Event(), threading.Event()
        calls = repeat_calls(self.apply, self.per_thread)

        def applier() -> None:
            go.wait()
            calls()

        def taker() -> None:
            while not done.is_set():
                self.take()

        threads = [threading.Thread(target=taker)]
        threads += [threading.Thread(target=applier) for _ in range(2)]
        for t in threads:
            t.start()
        self.threads = (go, done, threads)

    def __call__(self) -> None:
        assert self.threads is not None, "setup() starts the threads"
        go, done, (taking, *appliers) = self.threads
        go.set()
        for t in appliers:
            t.join()
        done.set()
        extra = 0
        # The last round is short of 8 and only these applies can fill it;
        # between them, no sleep: the tail is work, never idle time.
        while taking.is_alive():
            self.apply()
            extra += 1
        taking.join()
        self.gradients.append(2 * self.per_thread + extra)


class BareConcurrent:
    """The least the concurrent row's work takes: two threads each add
    ``per_thread`` gradients into a buffer of their own while a third divides
    a buffer once for every 8 gradients, with no lock, no round and no copy.
    ``setup`` starts the threads at a start line, untimed."""

    def __init__(self, gradient: np.ndarray, per_thread: int) -> None:
        self.gradient, self.per_thread = gradient, per_thread
        self.buffers = [np.zeros_like(gradient) for _ in range(3)]
        self.threads: tuple[threading.Event, list[threading.Thread]] | None = None

    def setup(self) -> None:
        go = threading.Event()

        def applier(buffer: np.ndarray) -> None:
            go.wait()
            for _ in range(self.per_thread):
                np.add(buffer, self.gradient, out=buffer)

        def divider(buffer: np.ndarray) -> None:
            go.wait()
            for _ in range(2 * self.per_thread // 8):
                np.divide(buffer, np.float32(8), out=buffer)

        threads = [threading.Thread(target=applier, args=(b,)) for b in self.buffers[:2]]
        threads.append(threading.Thread(target=divider, args=(self.buffers[2],)))
        for t in threads:
            t.start()
        self.threads = (go, threads)

    def __call__(self) -> None:
        assert self.threads is not None, "setup() starts the threads"
        go, threads = self.threads
        go.set()
        for t in threads:
            t.join()


def concurrent_row(tf: Any) -> Row:
    acc = Dense(tf, 1_000_000, tfa.float32)
    per_thread = 16

    def timed(apply: Callable[[], None], take: Callable[[], Any]) -> Timed:
        # per gradient: the count of the trial's own run is known only after it
        run = Concurrent(apply, take, per_thread)
        return Timed(run, setup=run.setup, per=lambda: run.gradients[-1])

    def take8() -> Any:
        return raw.ResourceAccumulatorTakeGradient(handle=acc.handle, num_required=8,
                                                   dtype=tfa.float32)  # fmt: skip

    row = Row("concurrent: 2 threads apply 1e6 while a third takes(8), per gradient",
              timed(acc.apply, take8), 0.5)  # fmt: skip
    bare = BareConcurrent(acc.gradient, per_thread)
    row.numpy = Timed(bare, setup=bare.setup, per=2 * per_thread)
    if tf is not None:
        with acc.graph.as_default():
            handle = acc.graph_apply_op.inputs[0]
            take_op = tf.raw_ops.ResourceAccumulatorTakeGradient(
                handle=handle, num_required=8, dtype=tf.float32
            )
        row.eager = timed(
            acc.eager_apply,
            lambda: tf.raw_ops.ResourceAccumulatorTakeGradient(
                handle=acc.eager_handle, num_required=8, dtype=tf.float32
            ),
        )
        row.graph = timed(acc.graph_apply, lambda: acc.session.run(take_op))
    return row


# --- sparse ------------------------------------------------------------------


def sparse_gradients(k: int, pool: int | None, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    grads = []
    for _ in range(SPARSE_APPLIES):
        indices = np.sort(rng.choice(pool or SPARSE_ROWS, size=k, replace=False)).astype(np.int64)
        grads.append((indices, rng.standard_normal((k, WIDTH), dtype=np.float32)))
    return grads


class Sparse:
    def __init__(self, tf: Any, grads: list[tuple[np.ndarray, np.ndarray]]) -> None:
        self.grads = grads
        shape = [SPARSE_ROWS, WIDTH]
        self.handle = raw.SparseConditionalAccumulator(dtype=tfa.float32, shape=shape)
        self.dense_shape = np.array(shape, np.int64)
        touched = np.unique(np.concatenate([i for i, _ in grads]))
        self.result_rows = np.zeros((touched.size, WIDTH), np.float32)
        if tf is None:
            return
        graph = tf.Graph()
        with graph.as_default():
            handle = tf.raw_ops.SparseConditionalAccumulator(dtype=tf.float32, shape=shape)
            self.tf_applies = [
                tf.raw_ops.SparseAccumulatorApplyGradient(
                    handle=handle, local_step=tf.constant(AHEAD, tf.int64),
                    gradient_indices=tf.constant(i), gradient_values=tf.constant(v),
                    gradient_shape=tf.constant(shape, tf.int64), has_known_shape=True,
                )
                for i, v in grads
            ]  # fmt: skip
            self.tf_take_op = tf.raw_ops.SparseAccumulatorTakeGradient(
                handle=handle, num_required=SPARSE_APPLIES, dtype=tf.float32
            )
        self.session = tf.compat.v1.Session(graph=graph)

    def apply_all(self) -> None:
        for indices, values in self.grads:
            raw.SparseAccumulatorApplyGradient(
                handle=self.handle, local_step=AHEAD, gradient_indices=indices,
                gradient_values=values, gradient_shape=self.dense_shape, has_known_shape=True,
            )  # fmt: skip

    def take(self) -> Any:
        return raw.SparseAccumulatorTakeGradient(
            handle=self.handle, num_required=SPARSE_APPLIES, dtype=tfa.float32
        )

    def graph_apply_all(self) -> None:
        for op in self.tf_applies:
            self.session.run(op)

    def graph_take(self) -> Any:
        return self.session.run(self.tf_take_op)

    def numpy_take(self) -> Any:
        # the least a take that returns new rows does: write them into fresh memory
        return self.result_rows.copy()

    def numpy_cycle(self) -> Any:
        # sort each gradient's indices and gather its rows, then the fresh result
        for indices, values in self.grads:
            np.take(values, np.argsort(indices[::-1]), axis=0)
        return self.result_rows.copy()


def sparse_rows(tf: Any) -> list[Row]:
    cases = {
        "1e3": Sparse(tf, sparse_gradients(1_000, None, 2)),
        "1e4": Sparse(tf, sparse_gradients(10_000, None, 3)),
        "pool": Sparse(tf, sparse_gradients(1_000, 2_000, 4)),
    }
    rows = []
    for key, name, cycle, target in [
        ("1e3", "sparse take(8), 1e3-row gradients into [1e6, 64]", False, 0.5),
        ("1e4", "sparse take(8), 1e4 rows", False, 0.5),
        ("1e4", "sparse cycle (8 applies + take), 1e4 rows", True, 0.4),
        ("pool", "sparse cycle, 1e3 rows from a pool of 2e3 (heavy overlap)", True, 0.4),
    ]:
        acc = cases[key]
        if cycle:
            row = Row(name, Timed(lambda a=acc: (a.apply_all(), a.take())), target)
            row.numpy = Timed(acc.numpy_cycle)
            if tf is not None:
                row.graph = Timed(lambda a=acc: (a.graph_apply_all(), a.graph_take()))
        else:
            row = Row(name, Timed(acc.take, setup=acc.apply_all), target)
            row.numpy = Timed(acc.numpy_take)
            if tf is not None:
                row.graph = Timed(acc.graph_take, setup=acc.graph_apply_all)
        rows.append(row)
    return rows


def build_rows(tf: Any) -> list[Row]:
    return [
        dense_apply_row(tf, "float32 apply, 1e6 elements (for reference)", tfa.float32, 1.0),
        dense_apply_row(tf, "float16 apply, 1e6 elements", tfa.float16, 1.5),
        bfloat16_row(tf),
        *dense_take_rows(tf),
        *half_take_rows(tf),
        *sparse_rows(tf),
        tiny_row(tf),
        concurrent_row(tf),
    ]


def run(repeat: int, with_tensorflow: bool, only: str | None, json_path: str | None = None) -> None:
    tf = load_tensorflow() if with_tensorflow else None
    rows = build_rows(tf)
    if only:
        rows = [r for r in rows if only in r.name]
    for row in rows:
        row.measure(repeat)
    print_table(
        f"Issue 10 table: medians of {repeat} alternating trials; ratio = tf_accum / best TF mode",
        [
            "workload",
            "TF eager",
            "TF graph",
            "numpy",
            "tf_accum",
            "ratio",
            "target",
            "met",
            "/numpy",
            "numpy/TF",
        ],
        [row.cells() for row in rows],
    )
    print(f"(numpy {np.__version__}, ml_dtypes {ml_dtypes.__version__}, "
          f"TensorFlow {tf.__version__ if tf is not None else 'not run'})")  # fmt: skip
    figures = Figures()
    for row in rows:
        row.figures(figures)
    figures.write(json_path)


def main() -> None:
    parser = command_line(__doc__, repeat=11)
    parser.add_argument("--only", help="run only the rows whose name contains this text")
    args = parser.parse_args()
    run(args.repeat, not args.no_tensorflow, args.only, args.json)


if __name__ == "__main__":
    main()
