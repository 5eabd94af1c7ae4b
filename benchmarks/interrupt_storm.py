"""Ctrl-C at random times against a take loop: rounds lost and rounds half-applied.

Run: ``python -m benchmarks.interrupt_storm [--runs N] [--storms N] [--seconds S]``.

Every accumulator here is a MEAN of float64 ones, so a round's result is
exactly 1.0 unless its count and its sum disagree (a half-applied gradient);
``takes_served`` (the accumulator's statistics, which leave out a take whose
round was given back) against the rounds the loop stored gives the rounds
lost between the accumulator and the caller's list.

- ``single``: N runs. In each, a thread applies ones as fast as it can while
  the main thread runs ``results.append(acc.take_grad(1))``; one SIGINT
  (``os.kill`` of this process, from a third thread) arrives after a random
  0-20 ms, and the loop stops at its KeyboardInterrupt.
- ``storm``: for S seconds SIGINTs arrive every 0.5-5 ms (uniform) while the
  main thread applies and takes (``apply_grad`` then
  ``results.append(acc.take_grad(1))``) and a thread applies too; each
  KeyboardInterrupt is caught and the loop goes on.

Each mode runs plain, with cProfile profiling the main thread, and inside
``deferred_interrupts()`` (the opt-in of tf_accum.accumulators.interrupts). The table
gives interrupts seen, rounds lost, and rounds whose mean was not 1.0
(including the round left at the end).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import random
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import tf_accum as tfa
from benchmarks.harness import print_table
from tf_accum.accumulators.interrupts import deferred_interrupts

FRESH = 2**40  # a local step no take catches up with
ONES = np.ones(4)


def _accumulator() -> Any:
    return tfa.compat.v1.ConditionalAccumulator(tfa.float64, shape=[4], reduction_type="MEAN")


def _applier(acc: Any, stop: threading.Event) -> threading.Thread:
    def run() -> None:
        while not stop.is_set():
            acc.apply_grad(ONES, local_step=FRESH)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _settle() -> int:
    """Let signals still on their way arrive; returns the interrupts they raised."""
    seen = 0
    for _ in range(20):
        try:
            time.sleep(0.005)
        except KeyboardInterrupt:
            seen += 1
    return seen


def _tally(acc: Any, results: list[Any]) -> tuple[int, int]:
    """Rounds lost and rounds half-applied (the round left at the end included)."""
    left = acc.num_accumulated()
    bad = sum(not np.array_equal(r, ONES) for r in results)
    served = tfa.accumulator_stats(acc.accumulator_ref)["takes_served"]
    if left:
        bad += not np.array_equal(acc.take_grad(left, timeout=5), ONES)
    return served - len(results), bad


def single(runs: int) -> tuple[int, int, int]:
    interrupts = lost = bad = 0
    rng = random.Random(28)
    for _ in range(runs):
        acc = _accumulator()
        stop = threading.Event()
        results: list[Any] = []
        applier = _applier(acc, stop)
        delay = rng.uniform(0.0, 0.02)
        killer = threading.Timer(delay, os.kill, (os.getpid(), signal.SIGINT))
        try:
            killer.start()
            while True:
                results.append(acc.take_grad(1))
        except KeyboardInterrupt:
            interrupts += 1
        stop.set()
        killer.join()
        applier.join()
        run_lost, run_bad = _tally(acc, results)
        lost, bad = lost + run_lost, bad + run_bad
    return interrupts, lost, bad


def storm(seconds: float) -> tuple[int, int, int]:
    acc = _accumulator()
    stop, go = threading.Event(), threading.Event()
    results: list[Any] = []
    rng = random.Random(28)

    def signals() -> None:
        go.wait()
        while not stop.is_set():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(rng.uniform(0.0005, 0.005))

    applier = _applier(acc, stop)
    sender = threading.Thread(target=signals, daemon=True)
    interrupts = 0
    deadline = time.monotonic() + seconds
    sender.start()
    while not stop.is_set():
        # an interrupt may land anywhere in the loop, the handler included
        try:
            go.set()
            while time.monotonic() < deadline:
                try:
                    acc.apply_grad(ONES, local_step=FRESH)
                    results.append(acc.take_grad(1))
                except KeyboardInterrupt:
                    interrupts += 1
            stop.set()
            for thread in (sender, applier):
                thread.join()
        except KeyboardInterrupt:
            interrupts += 1
    interrupts += _settle()
    lost, bad = _tally(acc, results)
    return interrupts, lost, bad


def _deferred(run: Callable[[], tuple[int, int, int]]) -> tuple[int, int, int]:
    with deferred_interrupts():
        return run()


def _profiled(run: Callable[[], tuple[int, int, int]]) -> tuple[int, int, int]:
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        return run()
    finally:
        profiler.disable()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1000, help="single Ctrl-C runs")
    parser.add_argument("--storms", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0, help="length of one storm")
    args = parser.parse_args()
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:  # started as a background job
        signal.signal(signal.SIGINT, signal.default_int_handler)
    rows = []
    modes: list[tuple[str, Callable[[Callable[[], Any]], Any]]] = [
        ("", lambda run: run()),
        (" (cProfile)", _profiled),
        (" (deferred)", _deferred),
    ]
    for label, wrap in modes:
        seen, lost, bad = wrap(lambda: single(args.runs))
        rows.append([f"single Ctrl-C x{args.runs}{label}", str(seen), str(lost), str(bad)])
        for i in range(args.storms):
            seen, lost, bad = wrap(lambda: storm(args.seconds))
            rows.append(
                [f"storm {i + 1}, {args.seconds:g} s{label}", str(seen), str(lost), str(bad)]
            )
    print_table(
        "Ctrl-C against a take loop (MEAN of float64 ones)",
        ["run", "interrupts", "rounds lost", "half-applied rounds"],
        rows,
    )


if __name__ == "__main__":
    main()
