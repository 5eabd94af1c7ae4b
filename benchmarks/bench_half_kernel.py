"""What the compiled float16/bfloat16 loops cost and save, by size.

Run: ``python -m benchmarks.bench_half_kernel`` (needs the ``fast`` extra).
Prints numba's import time and the loops' compile time (both once per
process), then for each size one add into a running sum on the numpy path and
with the compiled loops, timed alternately (medians), and how many adds repay
the one-off cost. ``half_kernel.MIN_ELEMENTS`` is set from this table.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any
from unittest import mock

import ml_dtypes
import numpy as np

from benchmarks.harness import fmt_time, print_table
from tf_accum.accumulators import half_kernel
from tf_accum.accumulators.running_sum import start_sum

SIZES = [4096, 16_384, 65_536, 262_144, 1_000_000, 4_000_000]


def running_sum(gradient: Any, loops: bool) -> Any:
    if loops:
        with mock.patch.object(half_kernel, "MIN_ELEMENTS", 1):
            total = start_sum(gradient, gradient.dtype)
    else:  # as if numba were missing
        with (
            mock.patch.object(half_kernel.LOADER, "tried", True),
            mock.patch.object(half_kernel.LOADER, "kernels", None),
        ):
            total = start_sum(gradient, gradient.dtype)
    assert (total._kernels is not None) == loops
    return total


def one_off_costs() -> tuple[float, float]:
    start = time.perf_counter()
    import numba  # noqa: F401 - timed: the import half_kernel.load does

    imported = time.perf_counter()
    if half_kernel.load() is None:
        raise SystemExit("numba is not installed or the loops do not compile")
    return imported - start, time.perf_counter() - imported


def run(repeat: int) -> None:
    import_time, compile_time = one_off_costs()
    print(f"import numba: {fmt_time(import_time)}; compile the loops: {fmt_time(compile_time)}")
    rows = []
    for dtype in (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)):
        for size in SIZES:
            gradient = np.random.default_rng(0).random(size, dtype=np.float32).astype(dtype)
            sums = {loops: running_sum(gradient, loops) for loops in (False, True)}
            trials: dict[bool, list[float]] = {False: [], True: []}
            number = max(1, 1_000_000 // size)
            for _ in range(repeat):
                for loops, total in sums.items():
                    start = time.perf_counter()
                    for _ in range(number):
                        total.add(gradient)
                    trials[loops].append((time.perf_counter() - start) / number)
            slow, fast = (statistics.median(trials[loops]) for loops in (False, True))
            saved = slow - fast
            repay = f"{(import_time + compile_time) / saved:.0f}" if saved > 0 else "never"
            rows.append([dtype.name, f"{size:,}", fmt_time(slow), fmt_time(fast),
                         f"{slow / fast:.1f}x", repay])  # fmt: skip
    print_table(
        f"One add into a running sum: medians of {repeat} alternating trials",
        ["dtype", "elements", "numpy path", "compiled", "speed-up", "adds to repay import+compile"],
        rows,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    run(parser.parse_args().repeat)


if __name__ == "__main__":
    main()
