"""What the compiled sparse row adds cost and save, by gradient size.

Run: ``python -m benchmarks.bench_sparse_kernel`` (needs the ``fast`` extra).
Prints the time to import numba and compile the loops (once per process),
then, for gradients of k rows of 64 float32 all held by the round (the heavy
overlap case) and with a quarter new rows, one sparse apply on the numpy path
and with the compiled loop, timed alternately (medians), and how many applies
repay the one-off cost. ``sparse_kernel.MIN_ELEMENTS`` is set from this table.
"""

from __future__ import annotations

import argparse
import statistics
import time
from unittest import mock

import numpy as np

import tf_accum as tfa
from benchmarks.harness import fmt_time, print_table
from tf_accum.accumulators import sparse_kernel

raw = tfa.raw_ops
WIDTH = 64
ROWS = [16, 256, 1_000, 4_096, 10_000]


def timed_applies(k: int, new_share: float, repeat: int, kernels: object) -> dict[bool, float]:
    """Median time of one apply of ``k`` rows, numpy path (False) and compiled (True)."""
    rng = np.random.default_rng(k)
    shape = [4 * k, WIDTH]
    held = np.sort(rng.choice(4 * k, k, replace=False))
    fresh = int(k * new_share)
    values = rng.standard_normal((k, WIDTH), dtype=np.float32)
    trials: dict[bool, list[float]] = {False: [], True: []}
    number = max(1, 200_000 // (k * 4))
    for _ in range(repeat):
        for loops in (False, True):
            h = raw.SparseConditionalAccumulator(dtype=tfa.float32, shape=shape)
            others = np.setdiff1d(np.arange(4 * k), held)
            gradients = []
            for _ in range(number):  # each keeps k - fresh of the held rows, adds fresh new ones
                picked = np.sort(np.concatenate((held[fresh:], rng.choice(others, fresh, False))))
                gradients.append(picked)
            apply = raw.SparseAccumulatorApplyGradient
            with (
                mock.patch.object(sparse_kernel.LOADER, "tried", True),
                mock.patch.object(sparse_kernel.LOADER, "kernels", kernels if loops else None),
            ):
                apply(handle=h, local_step=0, gradient_indices=held, gradient_values=values,
                      gradient_shape=shape, has_known_shape=True)  # fmt: skip
                start = time.perf_counter()
                for indices in gradients:
                    apply(handle=h, local_step=0, gradient_indices=indices,
                          gradient_values=values, gradient_shape=shape,
                          has_known_shape=True)  # fmt: skip
                trials[loops].append((time.perf_counter() - start) / number)
            raw.DestroyResourceOp(resource=h)
    return {loops: statistics.median(times) for loops, times in trials.items()}


def run(repeat: int) -> None:
    start = time.perf_counter()
    kernels = sparse_kernel.load()
    one_off = time.perf_counter() - start
    if kernels is None:
        raise SystemExit("numba is not installed or the loops do not compile")
    print(f"import numba and compile the loops: {fmt_time(one_off)}")
    rows = []
    for new_share in (0.0, 0.25):
        for k in ROWS:
            medians = timed_applies(k, new_share, repeat, kernels)
            slow, fast = medians[False], medians[True]
            saved = slow - fast
            repay = f"{one_off / saved:.0f}" if saved > 0 else "never"
            rows.append([f"{k:,} x {WIDTH}", f"{new_share:.0%}", fmt_time(slow), fmt_time(fast),
                         f"{slow / fast:.1f}x", repay])  # fmt: skip
    print_table(
        f"One sparse apply onto held rows: medians of {repeat} alternating trials",
        ["rows", "new rows", "numpy path", "compiled", "speed-up", "applies to repay"],
        rows,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeat", type=int, default=9)
    run(parser.parse_args().repeat)


if __name__ == "__main__":
    main()
