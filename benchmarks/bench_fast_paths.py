"""What each dense fast path buys on its row of the performance table.

Run: ``python -m benchmarks.bench_fast_paths [--repeat N] [--no-tensorflow]``.
Each row of ``benchmarks/bench_table.py`` that a fast path serves is timed
with the path in use and switched off (module settings changed for the
trial only), trial after trial in turn, with TensorFlow's figures for the
same row when it is installed; figures are medians. A path is kept where it
buys at least 1.3x on its row (docs/performance.md):

- the float32 image of a float16/bfloat16 sum, with the compiled loops (the
  ``fast`` extra; a MEAN take narrowing and dividing it in one pass, or one
  after the other), with numpy's passes instead (no numba), and without both
  (numpy's and ml_dtypes' own narrow adds; a MEAN's division compiled or not);
- the helper thread that runs an add of several calls applied from the main
  thread (numpy's passes), against running it where it is (it buys no speed:
  it keeps such an add whole when Ctrl-C lands, see docs/interrupts.md).
"""

from __future__ import annotations

import contextlib
import statistics
import threading
import types
from collections.abc import Iterator
from typing import Any

import tf_accum as tfa
from benchmarks import bench_table as table
from benchmarks.harness import command_line, fmt_time, load_tensorflow, print_table
from tf_accum.accumulators import dense, half_kernel, narrow_sum, running_sum, threads

NEVER = 2**62
NO_NUMBA = ((half_kernel.LOADER, "kernels", None), (half_kernel.LOADER, "tried", True))
NO_IMAGE = ((running_sum, "NARROW_MIN_ELEMENTS", NEVER),)
_ELSEWHERE = types.SimpleNamespace(**vars(threading))
_ELSEWHERE.main_thread = lambda: None  # every caller looks like another thread
# a MEAN take of the float32 image narrows it, then divides (not in one pass)
NO_FUSED_DIVISION = ((narrow_sum.NarrowSum, "divided", lambda self, count: None),)
NO_HELPER = ((dense, "threading", _ELSEWHERE), (threads, "threading", _ELSEWHERE))

Change = tuple[Any, str, Any]


@contextlib.contextmanager
def changed(changes: tuple[Change, ...]) -> Iterator[None]:
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in changes]
    for owner, name, value in changes:
        setattr(owner, name, value)
    try:
        yield
    finally:
        for owner, name, value in saved:
            setattr(owner, name, value)


class Case:
    """One way of running a row: its timing and the settings it runs under."""

    def __init__(self, name: str, timed: table.Timed, changes: tuple[Change, ...] = ()) -> None:
        self.name, self.timed, self.changes = name, timed, changes

    def trial(self) -> None:
        with changed(self.changes):
            self.timed.trial()


def measure(title: str, cases: list[Case], repeat: int) -> list[list[str]]:
    for case in cases:  # warm-up, not recorded
        case.trial()
        case.timed.trials.clear()
    for _ in range(repeat):
        for case in cases:
            case.trial()
    first = statistics.median(cases[0].timed.trials)
    rows = []
    for case in cases:
        median = statistics.median(case.timed.trials)
        rows.append([title, case.name, fmt_time(median), f"{median / first:.2f}"])
    return rows


def started(dtype: Any, changes: tuple[Change, ...]) -> table.Timed:
    """The bench_table apply of 1e6 elements into a round started under ``changes``."""
    acc = table.Dense(None, 1_000_000, dtype)
    with changed(changes):
        acc.apply()
    return table.Timed(acc.apply, 10)


def tensorflow_cases(acc: table.Dense | None, apply: bool) -> list[Case]:
    if acc is None or acc.tf is None:
        return []
    if apply:
        acc.eager_apply()
        acc.graph_apply()
        return [
            Case("TensorFlow eager", table.Timed(acc.eager_apply, 10)),
            Case("TensorFlow graph", table.Timed(acc.graph_apply, 10)),
        ]
    return [
        Case("TensorFlow eager",
             table.Timed(acc.eager_take, setup=table.repeat_calls(acc.eager_apply, 4))),
        Case("TensorFlow graph",
             table.Timed(acc.graph_take, setup=table.repeat_calls(acc.graph_apply, 4))),
    ]  # fmt: skip


def narrow_rows(tf: Any, repeat: int) -> list[list[str]]:
    half_kernel.load()
    rows = []
    for dtype in (tfa.float16, tfa.bfloat16):
        cases = [
            Case("float32 image, compiled loops", started(dtype, ())),
            Case("float32 image, numpy's passes", started(dtype, NO_NUMBA), NO_NUMBA),
            Case("float32 image, numpy's passes, no helper thread",
                 started(dtype, NO_NUMBA), NO_NUMBA + NO_HELPER),
            Case("the dtype's own adds", started(dtype, NO_NUMBA + NO_IMAGE), NO_NUMBA + NO_IMAGE),
        ]  # fmt: skip
        if dtype == tfa.float16 and tf is not None:
            cases += tensorflow_cases(table.Dense(tf, 1_000_000, dtype), apply=True)
        if dtype == tfa.bfloat16:
            cases.append(Case("(float32 apply)", started(tfa.float32, ())))
        rows += measure(f"{dtype.name} apply, 1e6", cases, repeat)
    for name, scale in [("float16 take, 1e6", 1.0), ("float16 take, 1e6 subnormal", 1e-5)]:
        acc = table.Dense(tf, 1_000_000, tfa.float16, scale=scale)
        four = table.repeat_calls(acc.apply, 4)
        cases = [
            Case("float32 image, compiled loops", table.Timed(acc.take, setup=four)),
            Case("float32 image, compiled loops, narrowed then divided",
                 table.Timed(acc.take, setup=four), NO_FUSED_DIVISION),
            Case("float32 image, numpy's passes", table.Timed(acc.take, setup=four), NO_NUMBA),
            Case("the dtype's own adds, compiled division",
                 table.Timed(acc.take, setup=four), NO_IMAGE),
            Case("the dtype's own adds and division",
                 table.Timed(acc.take, setup=four), NO_NUMBA + NO_IMAGE),
            *tensorflow_cases(acc, apply=False),
        ]  # fmt: skip
        rows += measure(name, cases, repeat)
    return rows


def main() -> None:
    parser = command_line(__doc__, repeat=15)
    args = parser.parse_args()
    tf = None if args.no_tensorflow else load_tensorflow()
    rows = narrow_rows(tf, args.repeat)
    print_table(
        f"Fast paths on their rows (medians of {args.repeat} alternating trials; "
        "relative: over the row's first line)",
        ["row", "way", "time", "relative"],
        rows,
    )


if __name__ == "__main__":
    main()
