"""What ``import tf_accum`` costs, as a ratio to numpy's own import.

Run: ``python -m benchmarks.bench_import [--repeat N] [--json PATH]``. Each
trial starts fresh interpreters in turn, one per statement below, each timing
its statement with ``time.perf_counter`` (the interpreter's own start-up is
left out):

- ``import numpy``, the yardstick;
- ``import tf_accum``, which loads numpy, the dtypes and the errors; the
  project's goal is a ratio to numpy under 1.8;
- ``import tf_accum.raw_ops`` and ``import tf_accum.compat.v1``: what a
  program pays once it first uses the raw ops (the accumulators; ml_dtypes
  waits for the first bfloat16) or the TF1 classes (graph mode too), for
  information.

Figures are medians over the trials; a ratio is the median of the trials'
ratios, so that a noisy neighbour slows both sides of a trial alike.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys

from benchmarks.harness import Figures, fmt_time, print_table

_TIMED = (
    "import time\n"
    "start = time.perf_counter()\n"
    "import {module}\n"
    "print(time.perf_counter() - start)\n"
)

# (what the row is called, the module imported, the goal for its ratio to numpy)
STATEMENTS = [
    ("import tf_accum", "tf_accum", "< 1.80x"),
    ("import tf_accum.raw_ops (first raw op)", "tf_accum.raw_ops", "-"),
    ("import tf_accum.compat.v1 (first TF1 class)", "tf_accum.compat.v1", "-"),
]


def import_seconds(module: str) -> float:
    """Seconds ``import module`` took in a fresh interpreter (bytecode cached)."""
    out = subprocess.run(
        [sys.executable, "-c", _TIMED.format(module=module)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return float(out.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeat", type=int, default=21)
    parser.add_argument("--json", metavar="PATH", help="also write the figures to PATH")
    args = parser.parse_args()
    for _, module, _ in STATEMENTS:
        import_seconds(module)  # compiles and caches the bytecode first
    numpy_times: list[float] = []
    times: list[list[float]] = [[] for _ in STATEMENTS]
    ratios: list[list[float]] = [[] for _ in STATEMENTS]
    for _ in range(args.repeat):
        numpy_time = import_seconds("numpy")
        numpy_times.append(numpy_time)
        for found, ratio, (_, module, _) in zip(times, ratios, STATEMENTS, strict=True):
            found.append(import_seconds(module))
            ratio.append(found[-1] / numpy_time)
    figures = Figures()
    figures.add("import numpy", "numpy", statistics.median(numpy_times))
    rows = [["import numpy", fmt_time(statistics.median(numpy_times)), "1.00x", "-"]]
    for found, ratio, (name, _, goal) in zip(times, ratios, STATEMENTS, strict=True):
        figures.add(name, "tf_accum", statistics.median(found))
        rows.append(
            [name, fmt_time(statistics.median(found)), f"{statistics.median(ratio):.2f}x", goal]
        )
    print_table(
        f"import time (medians of {args.repeat} alternating trials, fresh interpreters)",
        ["statement", "time", "/ numpy", "goal"],
        rows,
    )
    figures.write(args.json)


if __name__ == "__main__":
    main()
