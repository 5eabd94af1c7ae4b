"""Soak test: many threads applying, taking, timing out, setting the step and
destroying, on dense and sparse accumulators of several dtypes, for a while.

At the end: every gradient accepted is accounted for (taken, or drained from
the accumulator before it was destroyed), per element for dense and per row
for sparse; no thread is left alive; RSS at start and end is printed.

    python -m benchmarks.soak            # 60 seconds
    python -m benchmarks.soak 600        # ten minutes

The test suite runs a few seconds of it (tests/test_soak.py).
"""

from __future__ import annotations

import logging
import random
import resource
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import tf_accum as tfa
from tf_accum import errors

raw = tfa.raw_ops
DTYPES = (tfa.float32, tfa.float64, tfa.int32, tfa.int64)
ROWS = 16  # sparse dense-shape rows
WIDTH = 3
JOIN_WAIT = 30.0


def rss_mb() -> float:
    """Resident set size now, in MB (peak RSS where /proc is missing)."""
    try:
        with open("/proc/self/statm") as statm:
            pages = int(statm.read().split()[1])
        return pages * resource.getpagesize() / 2**20
    except OSError:  # pragma: no cover - not Linux
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class Slot:
    """One accumulator at a time; replaced (drained, then destroyed) by the destroyer.

    ``applied``/``taken`` are per-row integer ledgers (dense: one row).
    Users hold a lease while they use the current handle, so the destroyer can
    drain what is left exactly before destroying it.
    """

    def __init__(self, kind: str, dtype: Any) -> None:
        self.kind, self.dtype = kind, dtype
        self.lock = threading.Lock()
        self.leases = 0
        self.handle = self._create()
        rows = ROWS if kind == "sparse" else 1
        self.applied = np.zeros(rows, np.int64)
        self.taken = np.zeros(rows, np.int64)

    def _create(self) -> int:
        if self.kind == "sparse":
            return raw.SparseConditionalAccumulator(
                dtype=self.dtype, shape=[ROWS, WIDTH], reduction_type="SUM"
            )
        return raw.ResourceConditionalAccumulator(
            dtype=self.dtype, shape=[WIDTH], reduction_type="SUM"
        )

    @property
    def take_op(self) -> Any:
        if self.kind == "sparse":
            return raw.SparseAccumulatorTakeGradient
        return raw.ResourceAccumulatorTakeGradient

    def lease(self) -> int:
        with self.lock:
            self.leases += 1
            return self.handle

    def release(self, applied: np.ndarray | None = None, taken: np.ndarray | None = None) -> None:
        with self.lock:
            self.leases -= 1
            if applied is not None:
                self.applied += applied
            if taken is not None:
                self.taken += taken

    def record_take(self, result: Any) -> np.ndarray:
        counted = np.zeros(len(self.taken), np.int64)
        if self.kind == "sparse":
            np.add.at(
                counted,
                np.asarray(result.indices),
                np.asarray(result.values)[:, 0].astype(np.int64),
            )
        else:
            counted[0] = int(np.asarray(result)[0])
        return counted

    def replace(self) -> None:
        """Swap in a fresh accumulator; drain and destroy the old one."""
        with self.lock:
            old, self.handle = self.handle, self._create()
        while True:  # wait for everyone using the old handle
            with self.lock:
                if self.leases == 0:
                    break
            time.sleep(0.0005)
        if int(raw.AccumulatorNumAccumulated(handle=old)):
            drained = self.take_op(handle=old, num_required=1, dtype=self.dtype, timeout=5)
            with self.lock:
                self.taken += self.record_take(drained)
        raw.DestroyResourceOp(resource=old)


@dataclass
class Report:
    seconds: float
    applies: int = 0
    stale: int = 0
    refused: int = 0
    takes: int = 0
    timeouts: int = 0
    cancelled: int = 0
    replaced: int = 0
    races: int = 0
    rss_start_mb: float = 0.0
    rss_end_mb: float = 0.0
    conserved: bool = False
    threads_left: int = 0
    failures: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, **counts: int) -> None:
        with self.lock:
            for key, value in counts.items():
                setattr(self, key, getattr(self, key) + value)


def _applier(slots: list[Slot], report: Report, stop: threading.Event, seed: int) -> None:
    rng = random.Random(seed)
    while not stop.is_set():
        slot = rng.choice(slots)
        handle = slot.lease()
        applied = None
        k = rng.randint(1, 4)
        stale = rng.random() < 0.1
        bad = rng.random() < 0.05
        step = -(2**62) if stale else 2**40  # the global step stays within [0, 2**20]
        dtype = slot.dtype.numpy_dtype
        try:
            if slot.kind == "sparse":
                rows = np.array(sorted(rng.sample(range(ROWS), rng.randint(1, 4))), np.int64)
                if bad:
                    rows[-1] = ROWS + 5
                values = np.full((len(rows), WIDTH), k, dtype)
                raw.SparseAccumulatorApplyGradient(
                    handle=handle, local_step=step, gradient_indices=rows,
                    gradient_values=values, gradient_shape=[ROWS, WIDTH], has_known_shape=True,
                )  # fmt: skip
                if not stale:
                    applied = np.zeros(ROWS, np.int64)
                    applied[rows] = k
            else:
                gradient = np.full(WIDTH + (1 if bad else 0), k, dtype)
                raw.ResourceAccumulatorApplyGradient(
                    handle=handle, local_step=step, gradient=gradient
                )
                if not stale:
                    applied = np.array([k], np.int64)
            report.add(applies=1, stale=int(stale))
        except errors.InvalidArgumentError:
            if not bad:
                report.failures.append("a good gradient was refused")
            report.add(refused=1)
        finally:
            slot.release(applied=applied)


def _taker(slots: list[Slot], report: Report, stop: threading.Event, seed: int) -> None:
    rng = random.Random(seed)
    while not stop.is_set():
        slot = rng.choice(slots)
        handle = slot.lease()
        taken = None
        try:
            result = slot.take_op(handle=handle, num_required=rng.randint(1, 4), dtype=slot.dtype,
                          timeout=rng.choice([0, 0.001, 0.005, 0.02]))  # fmt: skip
            taken = slot.record_take(result)
            report.add(takes=1)
        except errors.DeadlineExceededError:
            report.add(timeouts=1)
        finally:
            slot.release(taken=taken)


def _stepper(slots: list[Slot], report: Report, stop: threading.Event, seed: int) -> None:
    rng = random.Random(seed)
    while not stop.is_set():
        slot = rng.choice(slots)
        step = rng.randint(0, 2**20)
        handle = slot.lease()
        try:
            raw.AccumulatorSetGlobalStep(handle=handle, new_global_step=step)
        finally:
            slot.release()
        time.sleep(0.001)


def _destroyer(slots: list[Slot], report: Report, stop: threading.Event, seed: int) -> None:
    rng = random.Random(seed)
    while not stop.is_set():
        rng.choice(slots).replace()
        report.add(replaced=1)
        # and a destroy racing a waiting take and an apply, on a throwaway accumulator
        h = raw.ResourceConditionalAccumulator(dtype=tfa.float32, shape=[1])
        waiter = threading.Thread(target=_doomed_take, args=(h, report))
        waiter.start()
        raw.ResourceAccumulatorApplyGradient(handle=h, local_step=0, gradient=[1.0])
        raw.DestroyResourceOp(resource=h)
        waiter.join(JOIN_WAIT)
        if waiter.is_alive():
            report.failures.append("a take on a destroyed accumulator hung")
        report.add(races=1)
        time.sleep(0.005)


def _doomed_take(handle: int, report: Report) -> None:
    try:
        raw.ResourceAccumulatorTakeGradient(handle=handle, num_required=2, dtype=tfa.float32)
        report.failures.append("a take of 2 completed with 1 gradient")
    except (errors.CancelledError, errors.NotFoundError):
        report.add(cancelled=1)


def run_soak(seconds: float, threads_per_role: int = 4, seed: int = 0) -> Report:
    """Run the soak for ``seconds``; the report says whether everything was conserved."""
    logging.getLogger("tf_accum").setLevel(logging.ERROR)  # lowered steps are logged
    report = Report(seconds, rss_start_mb=rss_mb())
    slots = [Slot(kind, dtype) for kind in ("dense", "sparse") for dtype in DTYPES]
    stop = threading.Event()
    roles = [_applier] * threads_per_role + [_taker] * threads_per_role + [_stepper, _destroyer]
    threads = [
        threading.Thread(target=role, args=(slots, report, stop, seed * 1000 + i), daemon=True)
        for i, role in enumerate(roles)
    ]
    for thread in threads:
        thread.start()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join(JOIN_WAIT)
    report.threads_left = sum(thread.is_alive() for thread in threads)
    for slot in slots:
        slot.replace()  # drain what is left
        raw.DestroyResourceOp(resource=slot.handle)
    report.conserved = all(np.array_equal(s.applied, s.taken) for s in slots)
    for slot in slots:
        if not np.array_equal(slot.applied, slot.taken):
            report.failures.append(
                f"{slot.kind} {slot.dtype.name}: applied {slot.applied.tolist()} but taken "
                f"{slot.taken.tolist()}"
            )
    report.rss_end_mb = rss_mb()
    return report


def main() -> None:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 60.0
    report = run_soak(seconds)
    print(f"soak: {report.seconds:.0f} s, {len(DTYPES)} dtypes, dense and sparse")
    print(f"  applies {report.applies} (stale {report.stale}), refused {report.refused}")
    print(f"  takes {report.takes}, timeouts {report.timeouts}")
    print(f"  accumulators replaced {report.replaced}, destroy races {report.races} "
          f"(takes cancelled {report.cancelled})")  # fmt: skip
    print(f"  RSS start {report.rss_start_mb:.1f} MB, end {report.rss_end_mb:.1f} MB")
    print(f"  conserved: {report.conserved}; threads left: {report.threads_left}")
    for failure in report.failures:
        print("  FAILURE:", failure)
    sys.exit(0 if report.conserved and not report.failures and not report.threads_left else 1)


if __name__ == "__main__":
    main()
