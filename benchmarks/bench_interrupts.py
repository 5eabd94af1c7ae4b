"""Rounds lost to a single Ctrl-C, in six loops.

Run: ``python -m benchmarks.bench_interrupts [--runs N] [--via signal|interrupt_main]
[--no-ray] [--only-tf1-chief] [--json PATH]``.

Each run makes a fresh accumulator, starts its loop, and delivers one
KeyboardInterrupt to the main thread after a random 0-20 ms (``os.kill`` of
this process with SIGINT from a timer thread, or ``_thread.interrupt_main()``);
the loop stops at it. A round is lost when the accumulator served it
(``takes_served`` in its statistics, which leave out a round given back) but
the loop never stored it; a round is half-applied when its mean is not 1.0
(the round left at the end included).

- ``take loop``: a thread applies ones; the main thread runs
  ``results.append(acc.take_grad(1))``.
- ``apply, then take``: the main thread alone runs ``acc.apply_grad(ones)``
  then ``results.append(acc.take_grad(1))``.
- ``MEAN of N float32``: the same loop, with gradients of N elements (100k,
  1M, 4M), two applies per take.
- ``take over Ray``: the take loop, with the accumulator in a Ray host
  (``tfa.distributed.connect("local")``).
- ``Session.run take loop``: in one process, a thread runs
  ``sess.run(apply)`` while the main thread runs
  ``results.append(sess.run(take))`` (SUM; counted in gradients, as below).
- ``TF1 cluster chief``: a TF1 program's chief (worker 0) whose SUM
  accumulator lives on its ps task (a process of its own, on a local Ray
  cluster): a thread runs ``sess.run(apply)`` while the main thread runs
  ``results.append(sess.run(take))``. A gradient is lost when it was applied
  but is in no round the loop stored, nor left in the accumulator.

The figures depend on timing only, never on the seed: compare two trees
(``PYTHONPATH``) with the same ``--runs``.
"""

from __future__ import annotations

import _thread
import argparse
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

FRESH = 2**40  # a local step no take catches up with


def _settle() -> None:
    """Let an interrupt still on its way arrive, and drop it."""
    for _ in range(20):
        with contextlib.suppress(KeyboardInterrupt):
            time.sleep(0.005)


def _interrupter(via: str, delay: float) -> threading.Timer:
    if via == "signal":
        return threading.Timer(delay, os.kill, (os.getpid(), signal.SIGINT))
    return threading.Timer(delay, _thread.interrupt_main)


def _tally(
    tfa: Any, acc: Any, results: list[Any], expected: np.ndarray[Any, Any]
) -> tuple[int, int]:
    """Rounds lost and rounds half-applied (the round left at the end included)."""
    left = acc.num_accumulated()
    bad = sum(not np.array_equal(r, expected) for r in results)
    served = tfa.accumulator_stats(acc.accumulator_ref)["takes_served"]
    if left:
        bad += not np.array_equal(acc.take_grad(left, timeout=30), expected)
    return served - len(results), bad


def one_run(
    tfa: Any,
    make: Callable[[], Any],
    body: Callable[[Any, list[Any]], None],
    gradient: np.ndarray[Any, Any],
    applier: bool,
    via: str,
    rng: random.Random,
) -> tuple[int, int]:
    acc = make()
    results: list[Any] = []

    def apply() -> None:
        acc.apply_grad(gradient, local_step=FRESH)

    _until_interrupted(lambda: body(acc, results), apply if applier else None, via, rng)
    return _tally(tfa, acc, results, gradient)


def _until_interrupted(
    step: Callable[[], None], apply: Callable[[], None] | None, via: str, rng: random.Random
) -> None:
    """Run ``step`` in a loop (while a thread runs ``apply`` in one, if given) until
    the one interrupt, sent after a random 0-20 ms, stops it; then settle."""
    stop = threading.Event()

    def apply_forever() -> None:
        assert apply is not None
        while not stop.is_set():
            apply()

    thread = threading.Thread(target=apply_forever, daemon=True) if apply else None
    if thread is not None:
        thread.start()
    killer = _interrupter(via, rng.uniform(0.0, 0.02))
    try:
        killer.start()
        while True:
            step()
    except KeyboardInterrupt:
        pass
    finally:
        stop.set()
        killer.join()
        _settle()
        if thread is not None:
            thread.join()


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("localhost", 0))
        port: int = probe.getsockname()[1]
        return port


PS_TASK = """
import json, sys
import tf_accum.compat.v1 as tf
server = tf.train.Server(json.loads(sys.argv[1]), job_name="ps", task_index=0)
print("ready", flush=True)
server.join()
"""


def session_chief(runs: int, via: str, rng: random.Random) -> tuple[str, int, int, int]:
    """The one-process Session.run row: gradients lost and rounds half-applied."""
    import tf_accum.compat.v1 as tf

    lost = bad = 0
    with tf.Graph().as_default():
        acc = tf.ConditionalAccumulator(tf.float32, shape=[4], reduction_type="SUM")
        apply = acc.apply_grad(np.ones(4, np.float32), local_step=FRESH)
        take, left = acc.take_grad(1), acc.num_accumulated()
        with tf.Session() as sess:
            for _ in range(runs):
                run_lost, run_bad = _chief_run(sess, apply, take, left, acc, via, rng)
                lost, bad = lost + run_lost, bad + run_bad
    return ("Session.run take loop (gradients)", runs, lost, bad)


def tf1_chief(runs: int, via: str, rng: random.Random) -> tuple[str, int, int, int]:
    """The TF1 cluster chief's row: gradients lost and rounds half-applied over ``runs``."""
    import tf_accum.compat.v1 as tf
    from tf_accum.examples import processes

    spec = {"ps": [f"localhost:{_free_port()}"], "worker": [f"localhost:{_free_port()}"]}
    ones = np.ones(4, np.float32)
    lost = bad = 0
    with processes.cluster("local", quiet=True) as address:
        ps = subprocess.Popen(
            [sys.executable, "-c", PS_TASK, json.dumps(spec)],
            env=dict(os.environ, TF_ACCUM_RAY_ADDRESS=address),
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert ps.stdout is not None and ps.stdout.readline().strip() == "ready"
            server = tf.train.Server(spec, job_name="worker", task_index=0)
            with tf.Graph().as_default():
                with tf.device("/job:ps/task:0"):
                    acc = tf.ConditionalAccumulator(
                        tf.float32, shape=[4], reduction_type="SUM", shared_name="chief"
                    )
                apply = acc.apply_grad(ones, local_step=FRESH)
                take = acc.take_grad(1)
                left = acc.num_accumulated()
                with tf.Session(server.target) as sess:
                    for _ in range(runs):
                        run_lost, run_bad = _chief_run(sess, apply, take, left, acc, via, rng)
                        lost, bad = lost + run_lost, bad + run_bad
        finally:
            ps.kill()
            ps.wait(timeout=30)
    return ("TF1 cluster chief (gradients)", runs, lost, bad)


def _chief_run(
    sess: Any, apply: Any, take: Any, left: Any, acc: Any, via: str, rng: random.Random
) -> tuple[int, int]:
    applied = [0]
    results: list[Any] = []

    def apply_once() -> None:
        sess.run(apply)
        applied[0] += 1

    _until_interrupted(lambda: results.append(sess.run(take)), apply_once, via, rng)
    remaining = int(sess.run(left))
    if remaining:
        results.append(sess.run(acc.take_grad(remaining)))
    bad = sum(len(set(np.asarray(r).tolist())) != 1 for r in results)
    return applied[0] - int(sum(np.asarray(r)[0] for r in results)), bad


def measure(runs: int, via: str, ray: bool) -> list[tuple[str, int, int, int]]:
    import tf_accum as tfa

    rng = random.Random(38)
    rows: list[tuple[str, int, int, int]] = []

    def mean(shape: list[int], shared_name: str | None = None) -> Callable[[], Any]:
        return lambda: tfa.compat.v1.ConditionalAccumulator(
            tfa.float32, shape=shape, reduction_type="MEAN", shared_name=shared_name
        )

    def take_loop(acc: Any, results: list[Any]) -> None:
        results.append(acc.take_grad(1))

    def apply_then_take(gradient: np.ndarray[Any, Any], applies: int) -> Any:
        def body(acc: Any, results: list[Any]) -> None:
            for _ in range(applies):
                acc.apply_grad(gradient, local_step=FRESH)
            results.append(acc.take_grad(applies))

        return body

    ones4 = np.ones(4, np.float32)
    cases: list[tuple[str, Callable[[], Any], Any, np.ndarray[Any, Any], bool, int]] = [
        ("take loop", mean([4]), take_loop, ones4, True, runs),
        ("apply, then take", mean([4]), apply_then_take(ones4, 1), ones4, False, runs),
    ]
    for size in (100_000, 1_000_000, 4_000_000):
        ones = np.ones(size, np.float32)
        label = f"MEAN of {size:,} float32"
        cases.append(
            (label, mean([size]), apply_then_take(ones, 2), ones, False, max(runs // 4, 1))
        )
    for label, make, body, gradient, applier, count in cases:
        lost = bad = 0
        for _ in range(count):
            run_lost, run_bad = one_run(tfa, make, body, gradient, applier, via, rng)
            lost, bad = lost + run_lost, bad + run_bad
        rows.append((label, count, lost, bad))
        print(f"{label}: {lost} of {count} runs lost a round, {bad} half-applied", flush=True)
    row = session_chief(max(runs // 2, 1), via, rng)
    rows.append(row)
    print(f"{row[0]}: {row[2]} lost in {row[1]} runs, {row[3]} half-applied", flush=True)
    if ray:
        tfa.distributed.connect("local", object_store_memory=1 << 28, log_to_driver=False)
        import ray as ray_module

        try:
            names = iter(range(1_000_000))
            count = max(runs // 4, 1)
            lost = bad = 0
            for _ in range(count):
                make = mean([4], f"interrupts-{os.getpid()}-{next(names)}")
                run_lost, run_bad = one_run(tfa, make, take_loop, ones4, True, via, rng)
                lost, bad = lost + run_lost, bad + run_bad
            rows.append(("take over Ray (eager)", count, lost, bad))
            print(f"take over Ray: {lost} of {count} runs lost a round, {bad} half-applied")
        finally:
            ray_module.shutdown()
        row = tf1_chief(max(runs // 4, 1), via, rng)
        rows.append(row)
        print(f"{row[0]}: {row[2]} lost in {row[1]} runs, {row[3]} half-applied", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--via", choices=("signal", "interrupt_main"), default="signal")
    parser.add_argument("--no-ray", action="store_true")
    parser.add_argument("--json", help="also write the rows to this file")
    parser.add_argument(
        "--only-tf1-chief", action="store_true", help="only the TF1 cluster chief, --runs runs"
    )
    args = parser.parse_args()
    if args.only_tf1_chief:
        row = tf1_chief(args.runs, args.via, random.Random(38))
        rows = [row]
    else:
        rows = measure(args.runs, args.via, not args.no_ray)
    print()
    print("| loop | runs | rounds lost | half-applied rounds |")
    print("|---|---|---|---|")
    for label, count, lost, bad in rows:
        print(f"| {label} | {count} | {lost} | {bad} |")
    if args.json:
        with open(args.json, "w") as file:
            json.dump(rows, file)


if __name__ == "__main__":
    main()
