"""Where splitting element-wise work over threads starts to pay.

Run: ``python -m benchmarks.bench_threads``. For each operation and size, one
thread and the pool are timed alternately (medians); the thresholds in
``tf_accum/accumulators/pool.py`` and ``float32_shadow.py`` are set from this table:
``PARALLEL_MIN_ELEMENTS`` for adds and divisions of float32,
``COPY_PARALLEL_MIN_ELEMENTS`` for copies into new arrays (a round's first
gradient, a sparse take's gather), ``NARROW_PARALLEL_MIN_ELEMENTS`` for
float16/bfloat16 sums.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any
from unittest import mock

import ml_dtypes
import numpy as np

from benchmarks.harness import fmt_time, print_table
from tf_accum.accumulators import division, float32_shadow, pool, running_sum


def timed(fn: Callable[[], Any], number: int) -> float:
    start = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - start) / number


def operations(size: int) -> dict[str, Callable[[], Any]]:
    rng = np.random.default_rng(0)
    total = rng.random(size, dtype=np.float32)
    gradient = rng.random(size, dtype=np.float32)
    half = running_sum.start_sum(gradient.astype(np.float16), np.dtype(np.float16))
    half_gradient = gradient.astype(np.float16)
    brain = running_sum.start_sum(gradient.astype(ml_dtypes.bfloat16),
                                 np.dtype(ml_dtypes.bfloat16))  # fmt: skip
    brain_gradient = gradient.astype(ml_dtypes.bfloat16)
    return {
        "float32 add": lambda: pool.add_in_place(total, gradient),
        "float32 divide": lambda: division.divide_in_place(total, 1),
        "float32 copy (new array)": lambda: pool.parallel_copy(gradient, gradient.dtype),
        "float16 sum add": lambda: half.add(half_gradient),  # type: ignore[union-attr]
        "bfloat16 sum add": lambda: brain.add(brain_gradient),  # type: ignore[union-attr]
    }


def run(repeat: int, sizes: list[int]) -> None:
    rows = []
    for size in sizes:
        number = max(1, 2_000_000 // size)
        one: dict[str, list[float]] = {}
        pool: dict[str, list[float]] = {}
        with mock.patch.object(pool, "WORKERS", 1):
            single = operations(size)
        with (
            mock.patch.object(pool, "PARALLEL_MIN_ELEMENTS", 1),
            mock.patch.object(pool, "COPY_PARALLEL_MIN_ELEMENTS", 1),
            mock.patch.object(float32_shadow, "NARROW_PARALLEL_MIN_ELEMENTS", 1),
        ):
            split = operations(size)
        for _ in range(repeat):
            for name in single:
                with mock.patch.object(pool, "WORKERS", 1):
                    one.setdefault(name, []).append(timed(single[name], number))
                with (
                    mock.patch.object(pool, "PARALLEL_MIN_ELEMENTS", 1),
                    mock.patch.object(pool, "COPY_PARALLEL_MIN_ELEMENTS", 1),
                    mock.patch.object(float32_shadow, "NARROW_PARALLEL_MIN_ELEMENTS", 1),
                ):
                    pool.setdefault(name, []).append(timed(split[name], number))
        for name in single:
            a, b = statistics.median(one[name]), statistics.median(pool[name])
            rows.append([f"{size:,}", name, fmt_time(a), fmt_time(b), f"{a / b:.2f}"])
    print_table(
        f"One thread vs {pool.WORKERS} (medians of {repeat} alternating trials)",
        ["elements", "operation", "1 thread", "split", "speed-up"],
        rows,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--sizes", type=int, nargs="*",
                        default=[65_536, 262_144, 1_000_000, 4_000_000, 10_000_000])  # fmt: skip
    args = parser.parse_args()
    run(args.repeat, args.sizes)


if __name__ == "__main__":
    main()
