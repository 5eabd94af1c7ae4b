"""What adding through stripes (tf_accum/accumulators/stripes.py) gains and costs.

Run: ``python -m benchmarks.bench_stripes``. For each size, dense float32
applies into one round through the raw op, by one thread and by two threads
at once, with the stripes in use and with them off (every add under the
accumulator's lock, as before them), alternately; figures are medians of the
time per gradient. ``stripes.MIN_ELEMENTS`` is set from this table: below it
a lone applier loses more than two gain.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from collections.abc import Callable

import numpy as np

import tf_accum as tfa
from benchmarks.harness import fmt_ratio, fmt_time, print_table
from tf_accum.accumulators import stripes

raw = tfa.raw_ops
FRESH = 2**40  # no take follows: every gradient stays fresh


def per_gradient(size: int, threads: int, number: int) -> Callable[[], float]:
    handle = raw.ResourceConditionalAccumulator(dtype=tfa.float32, shape=[size])
    gradients = [np.random.default_rng(i).random(size, dtype=np.float32) for i in range(threads)]
    raw.ResourceAccumulatorApplyGradient(handle=handle, local_step=FRESH, gradient=gradients[0])

    def worker(gradient: np.ndarray) -> None:  # type: ignore[type-arg]
        for _ in range(number):
            raw.ResourceAccumulatorApplyGradient(handle=handle, local_step=FRESH, gradient=gradient)

    def trial() -> float:
        workers = [threading.Thread(target=worker, args=(g,)) for g in gradients]
        start = time.perf_counter()
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        return (time.perf_counter() - start) / (threads * number)

    return trial


def run(repeat: int, sizes: list[int]) -> None:
    default = stripes.MIN_ELEMENTS
    rows = []
    for size in sizes:
        number = max(10, 20_000_000 // size)
        cases = {threads: per_gradient(size, threads, number) for threads in (1, 2)}
        figures: dict[tuple[int, bool], list[float]] = {}
        for _ in range(repeat):
            for threads, trial in cases.items():
                for on in (True, False):
                    stripes.MIN_ELEMENTS = 0 if on else 2**62
                    figures.setdefault((threads, on), []).append(trial())
        stripes.MIN_ELEMENTS = default
        m = {key: statistics.median(v) for key, v in figures.items()}
        rows.append([
            f"{size:,}",
            fmt_time(m[1, False]), fmt_time(m[1, True]), fmt_ratio(m[1, True] / m[1, False]),
            fmt_time(m[2, False]), fmt_time(m[2, True]), fmt_ratio(m[2, True] / m[2, False]),
        ])  # fmt: skip
    print_table(
        f"Dense float32 applies, time per gradient (medians of {repeat}; stripes from "
        f"{default:,} elements by default)",
        ["elements", "1 thread: off", "on", "on/off", "2 threads: off", "on", "on/off"],
        rows,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument(
        "--sizes", type=int, nargs="+", default=[262_144, 524_288, 1_000_000, 2_000_000]
    )
    args = parser.parse_args()
    run(args.repeat, args.sizes)


if __name__ == "__main__":
    main()
