"""Where splitting a copy into a new array over threads starts to pay.

Run: ``python -m benchmarks.bench_threads``. For each size, a copy into a new
array by one thread and split over the pool are timed alternately
(medians); ``COPY_PARALLEL_MIN_ELEMENTS`` in
``tf_accum/accumulators/pool.py`` is set from this table (page faults of the
new memory run in parallel).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks.harness import fmt_time, print_table
from tf_accum.accumulators import pool


def timed(fn: Callable[[], Any], number: int) -> float:
    start = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - start) / number


def copy_into_new(source: np.ndarray[Any, Any], split: bool) -> Callable[[], Any]:
    def copy() -> Any:
        out = np.empty_like(source)
        pool.split_elementwise(np.copyto, (out, source), 1 if split else source.size + 1)
        return out

    return copy


def run(repeat: int, sizes: list[int]) -> None:
    rows = []
    for size in sizes:
        number = max(1, 2_000_000 // size)
        source = np.random.default_rng(0).random(size, dtype=np.float32)
        one, split = copy_into_new(source, False), copy_into_new(source, True)
        figures: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(repeat):
            figures[False].append(timed(one, number))
            figures[True].append(timed(split, number))
        a, b = statistics.median(figures[False]), statistics.median(figures[True])
        rows.append([f"{size:,}", fmt_time(a), fmt_time(b), f"{a / b:.2f}"])
    print_table(
        f"A float32 copy into a new array, one thread vs {pool.WORKERS} "
        f"(medians of {repeat} alternating trials)",
        ["elements", "1 thread", "split", "speed-up"],
        rows,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--sizes", type=int, nargs="*",
                        default=[262_144, 1_000_000, 2_000_000, 4_000_000, 10_000_000])  # fmt: skip
    args = parser.parse_args()
    run(args.repeat, args.sizes)


if __name__ == "__main__":
    main()
