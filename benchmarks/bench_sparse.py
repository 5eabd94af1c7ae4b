"""Sparse accumulator speed and memory, against numpy's sort-and-copy and TensorFlow.

Run: ``python -m benchmarks.bench_sparse`` (TensorFlow needs the ``oracle`` extra).
Accumulator [1e6, 64] float32. One trial = one round: ``APPLIES`` gradients of
k rows (random unique indices, sorted, as TensorFlow needs them to merge
correctly), then a take. Targets (issue: sparse accumulators): apply and take
no slower than TensorFlow graph mode in every case; an apply of 1e4 rows within
3x of numpy's time to sort the indices and copy the rows; the state holds only
the touched rows.
"""

from __future__ import annotations

import statistics
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np

import tf_accum as tfa
from benchmarks.harness import (
    Figures,
    command_line,
    fmt_ratio,
    fmt_time,
    load_tensorflow,
    median_seconds,
    print_table,
)

raw = tfa.raw_ops
ROWS, WIDTH = 1_000_000, 64
APPLIES = 8
AHEAD = 2**40  # a step no take ever catches up with


def make_gradients(k: int, pool: int | None, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """APPLIES gradients of k sorted unique rows, from all rows or from a small pool."""
    rng = np.random.default_rng(seed)
    grads = []
    for _ in range(APPLIES):
        if pool is None:
            indices = rng.choice(ROWS, size=k, replace=False)
        else:
            indices = rng.choice(pool, size=k, replace=False)
        indices = np.sort(indices).astype(np.int64)
        grads.append((indices, rng.standard_normal((k, WIDTH), dtype=np.float32)))
    return grads


def time_rounds(
    apply: Callable[[int], None], take: Callable[[], None], repeat: int
) -> tuple[float, float]:
    """Median over rounds of (mean apply time, take time)."""
    applies, takes = [], []
    for _ in range(repeat):
        start = time.perf_counter()
        for i in range(APPLIES):
            apply(i)
        applies.append((time.perf_counter() - start) / APPLIES)
        start = time.perf_counter()
        take()
        takes.append(time.perf_counter() - start)
    return statistics.median(applies), statistics.median(takes)


def ours(
    grads: list[tuple[np.ndarray, np.ndarray]], repeat: int, shuffle: bool = False
) -> tuple[float, float]:
    h = raw.SparseConditionalAccumulator(dtype=tfa.float32, shape=[ROWS, WIDTH])
    if shuffle:
        rng = np.random.default_rng(7)
        grads = [(i[p], v[p]) for i, v in grads for p in [rng.permutation(len(i))]]

    def apply(i: int) -> None:
        indices, values = grads[i]
        raw.SparseAccumulatorApplyGradient(
            handle=h, local_step=AHEAD, gradient_indices=indices, gradient_values=values,
            gradient_shape=np.array([ROWS, WIDTH], np.int64), has_known_shape=True,
        )  # fmt: skip

    def take() -> None:
        raw.SparseAccumulatorTakeGradient(handle=h, num_required=APPLIES, dtype=tfa.float32)

    result = time_rounds(apply, take, repeat)
    raw.DestroyResourceOp(resource=h)
    return result


def tensorflow(
    tf: Any, grads: list[tuple[np.ndarray, np.ndarray]], repeat: int
) -> tuple[float, float]:
    graph = tf.Graph()
    with graph.as_default():
        handle = tf.raw_ops.SparseConditionalAccumulator(dtype=tf.float32, shape=[ROWS, WIDTH])
        applies = [
            tf.raw_ops.SparseAccumulatorApplyGradient(
                handle=handle, local_step=tf.constant(AHEAD, tf.int64),
                gradient_indices=tf.constant(i), gradient_values=tf.constant(v),
                gradient_shape=tf.constant([ROWS, WIDTH], tf.int64), has_known_shape=True,
            )
            for i, v in grads
        ]  # fmt: skip
        take_op = tf.raw_ops.SparseAccumulatorTakeGradient(
            handle=handle, num_required=APPLIES, dtype=tf.float32
        )
    with tf.compat.v1.Session(graph=graph) as session:
        session.run(applies)  # one whole round to warm up
        session.run(take_op)
        return time_rounds(lambda i: session.run(applies[i]), lambda: session.run(take_op), repeat)


def sort_and_copy(grads: list[tuple[np.ndarray, np.ndarray]], repeat: int) -> float:
    """numpy alone: argsort the indices and gather the rows in that order."""
    rng = np.random.default_rng(3)
    shuffled = [(i[p], v[p]) for i, v in grads for p in [rng.permutation(len(i))]]
    state = {"n": 0}

    def once() -> None:
        indices, values = shuffled[state["n"] % APPLIES]
        state["n"] += 1
        order = np.argsort(indices)
        values[order]

    return median_seconds(once, APPLIES, repeat)


def state_memory(grads: list[tuple[np.ndarray, np.ndarray]]) -> tuple[float, float]:
    """(bytes held after a round / bytes of the touched rows, peak / touched rows)."""
    h = raw.SparseConditionalAccumulator(dtype=tfa.float32, shape=[ROWS, WIDTH])
    touched = len(np.unique(np.concatenate([i for i, _ in grads]))) * WIDTH * 4
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    for indices, values in grads:
        raw.SparseAccumulatorApplyGradient(
            handle=h, local_step=0, gradient_indices=indices, gradient_values=values,
            gradient_shape=[], has_known_shape=False,
        )  # fmt: skip
    held, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    raw.DestroyResourceOp(resource=h)
    return (held - base) / touched, (peak - base) / touched


def run(repeat: int, with_tensorflow: bool, json_path: str | None = None) -> None:
    tf = load_tensorflow() if with_tensorflow else None
    figures = Figures()
    cases = [
        ("1e2 random rows", make_gradients(100, None, 1)),
        ("1e3 random rows", make_gradients(1_000, None, 2)),
        ("1e4 random rows", make_gradients(10_000, None, 3)),
        ("1e4 rows from a pool of 2e4 (heavy overlap)", make_gradients(10_000, 20_000, 4)),
    ]
    rows = []
    for name, grads in cases:
        apply_ours, take_ours = ours(grads, repeat)
        apply_shuffled, _ = ours(grads, repeat, shuffle=True)
        baseline = sort_and_copy(grads, repeat)
        apply_tf = take_tf = None
        if tf is not None:
            apply_tf, take_tf = tensorflow(tf, grads, repeat)
        for column, seconds in [
            ("apply", apply_ours), ("apply unsorted", apply_shuffled), ("numpy", baseline),
            ("take", take_ours), ("TF graph apply", apply_tf), ("TF graph take", take_tf),
        ]:  # fmt: skip
            figures.add(name, column, seconds)
        rows.append([
            name, fmt_time(apply_ours), fmt_time(apply_shuffled), fmt_time(baseline),
            fmt_time(apply_tf), fmt_time(take_ours), fmt_time(take_tf),
            fmt_ratio(apply_ours / baseline),
            fmt_ratio(None if apply_tf is None else apply_tf / apply_ours),
            fmt_ratio(None if take_tf is None else take_tf / take_ours),
            fmt_ratio(None if apply_tf is None or take_tf is None
                      else (APPLIES * apply_tf + take_tf) / (APPLIES * apply_ours + take_ours)),
        ])  # fmt: skip
    print_table(
        f"Sparse accumulator [1e6, 64] float32, {APPLIES} applies then a take; "
        f"median of {repeat} rounds",
        ["case", "apply", "apply unsorted", "numpy sort+copy", "TF graph apply", "take",
         "TF graph take", "apply/numpy", "TF/ours apply", "TF/ours take", "TF/ours round"],
        rows,
    )  # fmt: skip
    held, peak = state_memory(cases[2][1])
    print_table(
        "Sparse memory, 8 applies of 1e4 random rows (tracemalloc)",
        ["case", "value"],
        [
            ["state held / bytes of the touched rows", f"{held:.2f}"],
            ["peak / bytes of the touched rows", f"{peak:.2f}"],
            ["a dense [1e6, 64] float32 buffer / bytes of the touched rows",
             f"{ROWS * WIDTH * 4 / (len(np.unique(np.concatenate([i for i, _ in cases[2][1]]))) * WIDTH * 4):.1f}"],
        ],
    )  # fmt: skip
    figures.write(json_path)


def main() -> None:
    args = command_line(__doc__, repeat=9).parse_args()
    run(args.repeat, not args.no_tensorflow, args.json)


if __name__ == "__main__":
    main()
