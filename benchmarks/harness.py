"""Timing helpers: medians of repeated trials, and a plain-text table.

The machines are shared and noisy, so every figure is the median over
``repeat`` trials of the mean time of ``number`` calls, and comparisons are
ratios measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def median_seconds(
    fn: Callable[[], Any],
    number: int,
    repeat: int,
    setup: Callable[[], Any] | None = None,
) -> float:
    """Median over ``repeat`` trials of the per-call time of ``number`` calls."""
    trials = []
    for _ in range(repeat):
        if setup is not None:
            setup()
        start = time.perf_counter()
        for _ in range(number):
            fn()
        trials.append((time.perf_counter() - start) / number)
    return statistics.median(trials)


def load_tensorflow() -> Any:
    """TensorFlow if the oracle extra is installed, else None."""
    try:
        import tensorflow as tf
    except ImportError:
        return None
    return tf


def fmt_time(seconds: float | None) -> str:
    if seconds is None:
        return "n/a"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} us"
    return f"{seconds * 1e3:.3f} ms"


def fmt_ratio(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}x"


def print_table(title: str, header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    print(f"\n{title}")
    print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)))


def command_line(doc: str | None, repeat: int) -> argparse.ArgumentParser:
    """The options every TensorFlow-comparing benchmark takes: ``--repeat``, ``--no-tensorflow``."""
    parser = argparse.ArgumentParser(description=(doc or "").splitlines()[0])
    parser.add_argument("--repeat", type=int, default=repeat)
    parser.add_argument("--no-tensorflow", action="store_true")
    parser.add_argument(
        "--json",
        metavar="PATH",
        help="also write the figures (seconds, per row and column) to PATH, for benchmarks.ab",
    )
    return parser


class Figures:
    """The figures a benchmark printed, in seconds, kept for ``--json``:
    ``add(row, column, seconds)`` per cell, then ``write(path)``."""

    def __init__(self) -> None:
        self.cells: list[dict[str, Any]] = []

    def add(self, row: str, column: str, seconds: float | None) -> None:
        if seconds is not None:
            self.cells.append({"row": row, "column": column, "seconds": seconds})

    def write(self, path: str | None) -> None:
        """Write ``{"tf_accum": <the package's file>, "cells": [...]}`` to ``path``
        (nothing when ``path`` is None)."""
        if path is None:
            return
        import tf_accum

        with open(path, "w") as out:
            json.dump({"tf_accum": tf_accum.__file__, "cells": self.cells}, out, indent=1)
