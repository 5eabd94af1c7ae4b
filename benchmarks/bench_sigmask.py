"""Would blocking SIGINT around tf_accum's critical statements pay?

Run: ``python -m benchmarks.bench_sigmask``. Issue 28 suggested keeping a few
statements whole by blocking SIGINT for the main thread with
``signal.pthread_sigmask`` around them. This measures what that costs per
call, against a one-element apply through the raw op (median of repeats), and
whether it holds a SIGINT back at all: a process-directed signal that the
main thread blocks goes to another thread, whose C handler still marks it for
the main thread's interpreter, so the Python handler runs inside the blocked
stretch anyway (at the main thread's next switch of the GIL). Importing numpy is enough for
this: its BLAS library starts threads of its own. (There is no ``pthread_sigmask`` on Windows.)
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import threading
import time
import timeit

import numpy as np

import tf_accum as tfa
from benchmarks.harness import fmt_time, print_table

raw = tfa.raw_ops
SIGINT_ONLY = {signal.SIGINT}


def _mask_pair() -> None:
    old = signal.pthread_sigmask(signal.SIG_BLOCK, SIGINT_ONLY)
    signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _per_call(fn: object, number: int, repeat: int) -> float:
    return statistics.median(t / number for t in timeit.repeat(fn, number=number, repeat=repeat))  # type: ignore[arg-type]


def held_back(with_other_thread: bool) -> bool:
    """Whether a SIGINT sent while the main thread blocks SIGINT waits until it unblocks."""
    release = threading.Event()

    def busy() -> None:  # runs Python code, as a program's other threads do
        while not release.is_set():
            pass

    other = threading.Thread(target=busy) if with_other_thread else None
    if other is not None:
        other.start()
    old = signal.pthread_sigmask(signal.SIG_BLOCK, SIGINT_ONLY)
    inside = False
    try:
        try:
            os.kill(os.getpid(), signal.SIGINT)
            deadline = time.monotonic() + 0.2
            while time.monotonic() < deadline:  # chances for the handler to run
                pass
        except KeyboardInterrupt:
            inside = True
        finally:
            release.set()
            if other is not None:
                other.join()
    finally:
        try:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)
            for _ in range(1000):
                pass
        except KeyboardInterrupt:
            pass
    return not inside


def _os_threads() -> str:
    try:
        return f"{len(os.listdir('/proc/self/task'))} OS threads"
    except OSError:  # no /proc
        return "OS threads unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--number", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    if not hasattr(signal, "pthread_sigmask"):
        print("no signal.pthread_sigmask on this platform")
        return
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:  # started as a background job
        signal.signal(signal.SIGINT, signal.default_int_handler)
    handle = raw.ResourceConditionalAccumulator(dtype=tfa.float32, shape=[1])
    gradient = np.ones(1, np.float32)

    def apply() -> None:
        raw.ResourceAccumulatorApplyGradient(handle=handle, local_step=0, gradient=gradient)

    mask = _per_call(_mask_pair, args.number, args.repeat)
    applied = _per_call(apply, args.number, args.repeat)
    print_table(
        "pthread_sigmask, block and restore SIGINT (median per call)",
        ["what", "time"],
        [
            ["block + restore", fmt_time(mask)],
            ["one-element apply (raw op)", fmt_time(applied)],
            ["block + restore / apply", f"{mask / applied:.2f}x"],
        ],
    )
    tries = 20
    alone = sum(held_back(False) for _ in range(tries))
    threaded = sum(held_back(True) for _ in range(tries))
    print_table(
        f"Is a SIGINT held back while the main thread blocks it? ({tries} tries each)",
        ["process", "held back"],
        [
            [
                f"as it is ({threading.active_count()} Python thread, {_os_threads()})",
                f"{alone} of {tries}",
            ],
            ["plus a thread running Python", f"{threaded} of {tries}"],
        ],
    )


if __name__ == "__main__":
    main()
