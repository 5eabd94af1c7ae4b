"""Dense accumulator speed and memory, against bare numpy and TensorFlow.

Run: ``python -m benchmarks.bench_dense`` (TensorFlow columns need the
``oracle`` extra). Targets (issue: dense accumulators):
  - apply of 1e6 float32: no slower than TensorFlow graph mode, and at least
    70% of the throughput of ``np.add(acc, g, out=acc)``;
  - tiny ops: per call at most a fifth of TensorFlow eager's;
  - take after 4 applies of 1e6: no slower than TensorFlow graph mode;
  - no allocation per apply after a round's first gradient.
"""

from __future__ import annotations

import tracemalloc
from typing import Any

import numpy as np

import tf_accum as tfa
from benchmarks.harness import (
    command_line,
    fmt_ratio,
    fmt_time,
    load_tensorflow,
    median_seconds,
    print_table,
)

raw = tfa.raw_ops
N = 1_000_000
# Every apply carries a step far ahead of the global step, so that takes (which
# bump the step) never make later applies stale.
AHEAD = 2**40


class TensorFlowDense:
    """Prebuilt TensorFlow ops: graph mode through one Session, and eager raw ops."""

    def __init__(self, tf: Any, size: int) -> None:
        self.tf = tf
        gradient = np.random.default_rng(1).random(size, dtype=np.float32)
        self.graph = tf.Graph()
        with self.graph.as_default():
            handle = tf.raw_ops.ResourceConditionalAccumulator(dtype=tf.float32, shape=[size])
            const = tf.constant(gradient)
            self.apply_op = tf.raw_ops.ResourceAccumulatorApplyGradient(
                handle=handle, local_step=tf.constant(AHEAD, tf.int64), gradient=const
            )
            self.take_op = tf.raw_ops.ResourceAccumulatorTakeGradient(
                handle=handle, num_required=1, dtype=tf.float32
            )
            self.num_op = tf.raw_ops.ResourceAccumulatorNumAccumulated(handle=handle)
        self.session = tf.compat.v1.Session(graph=self.graph)
        self.eager_handle = tf.raw_ops.ResourceConditionalAccumulator(
            dtype=tf.float32, shape=[size]
        )
        self.eager_gradient = tf.constant(gradient)
        self.tiny_handle = tf.raw_ops.ResourceConditionalAccumulator(dtype=tf.float32, shape=[1])
        self.tiny_gradient = tf.constant([1.0], tf.float32)
        self.tiny_numpy = np.ones(1, np.float32)

    def graph_apply(self) -> None:
        self.session.run(self.apply_op)

    def graph_take(self) -> None:
        self.session.run(self.take_op)

    def eager_apply(self) -> None:
        self.tf.raw_ops.ResourceAccumulatorApplyGradient(
            handle=self.eager_handle, local_step=AHEAD, gradient=self.eager_gradient
        )

    def eager_num(self) -> None:
        self.tf.raw_ops.ResourceAccumulatorNumAccumulated(handle=self.tiny_handle)

    def eager_tiny_apply(self) -> None:
        self.tf.raw_ops.ResourceAccumulatorApplyGradient(
            handle=self.tiny_handle, local_step=0, gradient=self.tiny_gradient
        )

    def eager_tiny_apply_numpy(self) -> None:
        # the same input tf_accum gets: a numpy array, converted by TensorFlow each call
        self.tf.raw_ops.ResourceAccumulatorApplyGradient(
            handle=self.tiny_handle, local_step=0, gradient=self.tiny_numpy
        )


def measure_memory(size: int) -> tuple[int, float]:
    """(bytes allocated by 10 applies after the first, peak / one buffer)."""
    h = raw.ResourceConditionalAccumulator(dtype=tfa.float32, shape=[size])
    gradient = np.ones(size, np.float32)
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    raw.ResourceAccumulatorApplyGradient(handle=h, local_step=AHEAD, gradient=gradient)
    after_first = tracemalloc.get_traced_memory()[0]
    for _ in range(10):
        raw.ResourceAccumulatorApplyGradient(handle=h, local_step=AHEAD, gradient=gradient)
    current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    raw.DestroyResourceOp(resource=h)
    return current - after_first, (peak - base) / gradient.nbytes


def run(repeat: int, with_tensorflow: bool) -> None:
    tf = load_tensorflow() if with_tensorflow else None
    reference = TensorFlowDense(tf, N) if tf is not None else None
    rng = np.random.default_rng(0)
    gradient = rng.random(N, dtype=np.float32)
    buffer = np.zeros(N, np.float32)
    h = raw.ResourceConditionalAccumulator(dtype=tfa.float32, shape=[N])
    tiny = raw.ResourceConditionalAccumulator(dtype=tfa.float32, shape=[1])
    tiny_gradient = np.ones(1, np.float32)

    def ours_apply() -> None:
        raw.ResourceAccumulatorApplyGradient(handle=h, local_step=AHEAD, gradient=gradient)

    def numpy_add() -> None:
        np.add(buffer, gradient, out=buffer)

    def ours_take() -> None:
        raw.ResourceAccumulatorTakeGradient(handle=h, num_required=1, dtype=tfa.float32)

    def fill_four() -> None:
        for _ in range(4):
            ours_apply()

    ours_apply()
    apply_ours = median_seconds(ours_apply, 20, repeat)
    apply_numpy = median_seconds(numpy_add, 20, repeat)
    take_ours = median_seconds(ours_take, 1, repeat * 3, setup=fill_four)
    num_ours = median_seconds(
        lambda: raw.ResourceAccumulatorNumAccumulated(handle=tiny), 2000, repeat
    )
    tiny_ours = median_seconds(
        lambda: raw.ResourceAccumulatorApplyGradient(
            handle=tiny, local_step=0, gradient=tiny_gradient
        ),
        2000,
        repeat,
    )
    apply_graph = apply_eager = take_graph = num_eager = tiny_eager = tiny_eager_numpy = None
    if reference is not None:
        reference.graph_apply()
        apply_graph = median_seconds(reference.graph_apply, 20, repeat)
        apply_eager = median_seconds(reference.eager_apply, 20, repeat)

        def graph_fill_four() -> None:
            for _ in range(4):
                reference.graph_apply()

        take_graph = median_seconds(reference.graph_take, 1, repeat * 3, setup=graph_fill_four)
        num_eager = median_seconds(reference.eager_num, 500, repeat)
        tiny_eager = median_seconds(reference.eager_tiny_apply, 500, repeat)
        tiny_eager_numpy = median_seconds(reference.eager_tiny_apply_numpy, 500, repeat)

    def ratio(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None else a / b

    rows = [
        ["apply 1e6 float32", fmt_time(apply_ours), fmt_time(apply_numpy), fmt_time(apply_graph),
         fmt_time(apply_eager), f"numpy/ours {fmt_ratio(apply_numpy / apply_ours)}; "
         f"TF graph/ours {fmt_ratio(ratio(apply_graph, apply_ours))}"],
        ["take after 4 applies 1e6", fmt_time(take_ours), "", fmt_time(take_graph), "",
         f"TF graph/ours {fmt_ratio(ratio(take_graph, take_ours))}"],
        ["num_accumulated", fmt_time(num_ours), "", "", fmt_time(num_eager),
         f"TF eager/ours {fmt_ratio(ratio(num_eager, num_ours))}"],
        ["apply 1 element (TF given an EagerTensor)", fmt_time(tiny_ours), "", "",
         fmt_time(tiny_eager), f"TF eager/ours {fmt_ratio(ratio(tiny_eager, tiny_ours))}"],
        ["apply 1 element (TF given a numpy array)", fmt_time(tiny_ours), "", "",
         fmt_time(tiny_eager_numpy),
         f"TF eager/ours {fmt_ratio(ratio(tiny_eager_numpy, tiny_ours))}"],
    ]  # fmt: skip
    print_table(
        f"Dense accumulator, median of {repeat} trials (per call)",
        ["case", "tf_accum", "bare numpy", "TF graph", "TF eager", "ratios (>1: tf_accum faster)"],
        rows,
    )
    grown, peak_ratio = measure_memory(N)
    print_table(
        "Dense memory (tracemalloc)",
        ["case", "value"],
        [
            ["bytes allocated by 10 applies after the first", str(grown)],
            ["peak / one 1e6-float32 buffer (first apply copies)", f"{peak_ratio:.2f}"],
        ],
    )


def main() -> None:
    args = command_line(__doc__, repeat=15).parse_args()
    run(args.repeat, not args.no_tensorflow)


if __name__ == "__main__":
    main()
