"""What ``import tf_accum`` costs, as a ratio to numpy's own import.

Run: ``python -m benchmarks.bench_import [--repeat N]``. Each trial starts two
fresh interpreters in turn, one importing numpy and one importing tf_accum
(which imports numpy and ml_dtypes), each timing its import with
``time.perf_counter`` around the import statement alone (the interpreter's
own start-up is left out). Figures are medians over the trials; the ratio is
the median of the trials' ratios, so that a noisy neighbour slows both sides
of a trial alike. The project's goal is a ratio under 1.8.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys

from benchmarks.harness import fmt_time, print_table

_TIMED = (
    "import time\n"
    "start = time.perf_counter()\n"
    "import {module}\n"
    "print(time.perf_counter() - start)\n"
)


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
    args = parser.parse_args()
    import_seconds("tf_accum")  # compiles and caches the bytecode first
    numpy_times, ours, ratios = [], [], []
    for _ in range(args.repeat):
        numpy_time, tf_accum_time = import_seconds("numpy"), import_seconds("tf_accum")
        numpy_times.append(numpy_time)
        ours.append(tf_accum_time)
        ratios.append(tf_accum_time / numpy_time)
    print_table(
        f"import time (medians of {args.repeat} alternating trials, fresh interpreters)",
        ["numpy", "tf_accum", "tf_accum / numpy", "goal"],
        [
            [
                fmt_time(statistics.median(numpy_times)),
                fmt_time(statistics.median(ours)),
                f"{statistics.median(ratios):.2f}x",
                "< 1.80x",
            ]
        ],
    )


if __name__ == "__main__":
    main()
