"""Accumulators across processes: tf_accum on Ray against TensorFlow's distributed runtime.

    python -m benchmarks.bench_distributed [--repeat 7]

TensorFlow's side is a ``tf.distribute.Server`` parameter-server task (its own
process, on localhost) holding ConditionalAccumulators, driven by graph-mode
sessions of worker tasks, each on its own server at ``grpc://localhost:<port>``; tf_accum's side is a local Ray
cluster started by this process. Every figure alternates the two in one run
and is a median over ``--repeat`` trials. Both sides wait for every call, as a
training loop does.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from typing import Any

import numpy as np

from benchmarks.harness import fmt_ratio, fmt_time, median_seconds, print_table

N = 1_000_000  # 4 MB of float32
AHEAD = 2**40  # a local step no take makes stale
WAITING = 2000
TWO_WORKER_APPLIES = 100


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class TensorFlowCluster:
    """A ps task in its own process and three worker tasks, all on localhost.

    Worker task 0 is this process; tasks 1 and 2 are the two worker
    processes. As in TF1 between-graph training, each worker runs its own
    server and a session on it (``grpc://localhost:<port>``); the accumulators
    are placed on the ps task.
    """

    def __init__(self) -> None:
        ports = [_free_port() for _ in range(4)]
        self.spec = {
            "ps": [f"localhost:{ports[0]}"],
            "worker": [f"localhost:{p}" for p in ports[1:]],
        }
        code = (
            "import json, sys, tensorflow as tf\n"
            "cluster = tf.train.ClusterSpec(json.loads(sys.argv[1]))\n"
            "server = tf.distribute.Server(cluster, job_name='ps', task_index=0)\n"
            "print('ready', flush=True)\n"
            "server.join()\n"
        )
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
        self.ps = subprocess.Popen(
            [sys.executable, "-c", code, json.dumps(self.spec)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert self.ps.stdout is not None and self.ps.stdout.readline().strip() == "ready"

    def close(self) -> None:
        self.ps.kill()  # by pid
        self.ps.wait()


def worker_session(spec: dict[str, list[str]], task: int, graph: Any) -> Any:
    """A session on worker ``task``'s own server, seeing only the ps and itself."""
    import tensorflow as tf

    server = tf.distribute.Server(tf.train.ClusterSpec(spec), job_name="worker", task_index=task)
    config = tf.compat.v1.ConfigProto(device_filters=["/job:ps", f"/job:worker/task:{task}"])
    session = tf.compat.v1.Session(server.target, graph=graph, config=config)
    session._tf_accum_server = server  # keep the server alive with the session
    return session


class TensorFlowRemote:
    """Accumulators on the ps task, run through one session on its grpc target."""

    def __init__(self, spec: dict[str, list[str]], task: int, name: str, size: int = N) -> None:
        import tensorflow as tf

        self.graph = tf.Graph()
        with self.graph.as_default(), tf.device("/job:ps/task:0"):
            tiny = tf.compat.v1.ConditionalAccumulator(
                tf.float32, shape=[2], shared_name=f"{name}-tiny"
            )
            big = tf.compat.v1.ConditionalAccumulator(
                tf.float32, shape=[size], shared_name=f"{name}-big"
            )
            self.tiny_feed = tf.compat.v1.placeholder(tf.float32, [2])
            self.big_feed = tf.compat.v1.placeholder(tf.float32, [size])
            self.tiny_apply_op = tiny.apply_grad(self.tiny_feed, local_step=AHEAD)
            self.num_op = tiny.num_accumulated()
            self.big_apply_op = big.apply_grad(self.big_feed, local_step=AHEAD)
            self.big_take_op = big.take_grad(1)
        self.session = worker_session(spec, task, self.graph)

    def tiny_apply(self, gradient: np.ndarray) -> None:
        self.session.run(self.tiny_apply_op, {self.tiny_feed: gradient})

    def num(self) -> None:
        self.session.run(self.num_op)

    def big_apply(self, gradient: np.ndarray) -> None:
        self.session.run(self.big_apply_op, {self.big_feed: gradient})

    def big_take(self) -> np.ndarray:
        result: np.ndarray = self.session.run(self.big_take_op)
        return result


class Ours:
    """The same accumulators through tf_accum's raw ops on the Ray table."""

    def __init__(self, name: str, size: int = N) -> None:
        import tf_accum as tfa

        self.raw = tfa.raw_ops
        self.dtype = tfa.float32
        self.tiny = self.raw.ResourceConditionalAccumulator(
            dtype=tfa.float32, shape=[2], shared_name=f"{name}-tiny"
        )
        self.big = self.raw.ResourceConditionalAccumulator(
            dtype=tfa.float32, shape=[size], shared_name=f"{name}-big"
        )

    def tiny_apply(self, gradient: np.ndarray) -> None:
        self.raw.ResourceAccumulatorApplyGradient(
            handle=self.tiny, local_step=AHEAD, gradient=gradient
        )

    def num(self) -> None:
        self.raw.ResourceAccumulatorNumAccumulated(handle=self.tiny)

    def big_apply(self, gradient: np.ndarray) -> None:
        self.raw.ResourceAccumulatorApplyGradient(
            handle=self.big, local_step=AHEAD, gradient=gradient
        )

    def big_take(self) -> np.ndarray:
        result: np.ndarray = self.raw.ResourceAccumulatorTakeGradient(
            handle=self.big, num_required=1, dtype=self.dtype
        )
        return result


# --- worker processes (for two-worker throughput) --------------------------------


def worker_main(kind: str, target: str, task: int, name: str) -> None:
    """Serve ``go <start time>`` lines: apply TWO_WORKER_APPLIES 4 MB gradients from then."""
    side: Any = TensorFlowRemote(json.loads(target), task, name) if kind == "tf" else Ours(name)
    gradient = np.ones(N, np.float32)
    side.big_apply(gradient)
    print("ready", flush=True)
    for line in sys.stdin:
        start_at = float(line.split()[1])
        while time.time() < start_at:
            time.sleep(0.001)
        start = time.time()
        for _ in range(TWO_WORKER_APPLIES):
            side.big_apply(gradient)
        print(json.dumps({"start": start, "end": time.time()}), flush=True)


class Workers:
    def __init__(self, kind: str, target: str, name: str, count: int = 2) -> None:
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
        if kind == "ray":
            env["TF_ACCUM_RAY_ADDRESS"] = target
        command = [sys.executable, "-m", "benchmarks.bench_distributed", "--worker", kind]
        self.processes = [
            subprocess.Popen(
                [*command, "--target", target, "--task", str(task), "--name", name],
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
            for task in range(1, count + 1)
        ]
        for p in self.processes:
            assert p.stdout is not None and p.stdout.readline().strip() == "ready"

    def bytes_per_second(self) -> float:
        start_at = time.time() + 0.2
        for p in self.processes:
            assert p.stdin is not None
            p.stdin.write(f"go {start_at}\n")
            p.stdin.flush()
        spans = [json.loads(p.stdout.readline()) for p in self.processes if p.stdout]
        elapsed = max(s["end"] for s in spans) - min(s["start"] for s in spans)
        return len(spans) * TWO_WORKER_APPLIES * N * 4 / elapsed

    def close(self) -> None:
        for p in self.processes:
            p.kill()  # by pid
            p.wait()


# --- measurements ------------------------------------------------------------------


def progress(what: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {what}", file=sys.stderr, flush=True)


def alternate(fns: dict[str, Any], number: int, repeat: int, setup: Any = None) -> dict[str, float]:
    """Median per-call time of each fn, trials interleaved."""
    trials: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeat):
        for key, fn in fns.items():
            trials[key].append(median_seconds(fn, number, 1, setup))
    return {k: statistics.median(v) for k, v in trials.items()}


class RayFloor:
    """Ray's own cost of a call: a no-op method on an async and on a sync actor.

    Each is called as the accumulator host is, with one packed argument and a
    wait; no tf_accum code runs on either side. What tf_accum adds to a tiny
    call is its time minus the async floor (its host is an async actor, so
    that waiting takes hold no threads).
    """

    def __init__(self) -> None:
        import ray

        class AsyncNoOp:
            async def run(self, request: Any) -> None:
                return None

        class SyncNoOp:
            def run(self, request: Any) -> None:
                return None

        self.actors = {
            "async": ray.remote(num_cpus=0, max_concurrency=1000)(AsyncNoOp).remote(),
            "sync": ray.remote(num_cpus=0)(SyncNoOp).remote(),
        }
        self.request = ("num_accumulated", "0" * 32, 1)
        for kind in self.actors:
            self.call(kind)

    def call(self, kind: str) -> None:
        import ray

        ray.get(self.actors[kind].run.remote(self.request))

    def close(self) -> None:
        import ray

        for actor in self.actors.values():
            ray.kill(actor)


def take_times(side: Any, repeat: int) -> float:
    """Median time of a take whose 4 MB mean is ready (the apply is not timed)."""
    gradient = np.ones(N, np.float32)
    times = []
    for _ in range(repeat):
        side.big_apply(gradient)
        start = time.perf_counter()
        side.big_take()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def waiters_main() -> None:
    """Serve ``submit <name>`` lines: queue WAITING takes on that shared accumulator.

    The takes come from this process (a chief's, say), not from the applier's;
    each is sent straight to the host (no thread each). Prints ``ready`` once
    all are queued, then waits until they are cancelled (the accumulator is
    destroyed) before reading the next line.
    """
    import ray

    import tf_accum as tfa
    from tf_accum.resources import current_table

    raw = tfa.raw_ops
    for trial, line in enumerate(sys.stdin):
        h = raw.ResourceConditionalAccumulator(
            dtype=tfa.float32, shape=[2], shared_name=line.split()[1]
        )
        acc: Any = current_table().lookup(h)
        link = acc.link
        refs = [
            link.actor.run.remote(
                (
                    "take",
                    link.instance,
                    acc.entry_id,
                    10**9,
                    None,
                    f"bench-{trial}-{i}",
                    link.caller,
                    None,
                )
            )
            for i in range(WAITING)
        ]
        while acc.num_waiting() < WAITING:
            time.sleep(0.05)
        print("ready", flush=True)
        ray.get(refs)


def waiting_takes_slowdown(address: str, repeat: int) -> tuple[float, float]:
    """(apply time with no take waiting, with WAITING takes waiting on the same accumulator)."""
    import tf_accum as tfa

    raw = tfa.raw_ops
    gradient = np.ones(2, np.float32)
    env = dict(os.environ, TF_ACCUM_RAY_ADDRESS=address)
    command = [sys.executable, "-m", "benchmarks.bench_distributed", "--worker", "waiters"]
    waiters = subprocess.Popen(
        command, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert waiters.stdin is not None and waiters.stdout is not None
    quiet, busy = [], []
    try:
        for trial in range(repeat):
            name = f"waiting-{trial}"
            h = raw.ResourceConditionalAccumulator(dtype=tfa.float32, shape=[2], shared_name=name)

            def apply(h: int = h) -> None:
                raw.ResourceAccumulatorApplyGradient(handle=h, local_step=AHEAD, gradient=gradient)

            quiet.append(median_seconds(apply, 200, 1))
            waiters.stdin.write(f"submit {name}\n")
            waiters.stdin.flush()
            assert waiters.stdout.readline().strip() == "ready"
            busy.append(median_seconds(apply, 200, 1))
            raw.DestroyResourceOp(resource=h)  # cancels them all
    finally:
        waiters.kill()  # by pid
        waiters.wait()
    return statistics.median(quiet), statistics.median(busy)


def run(repeat: int) -> None:
    import tf_accum as tfa

    tfa.distributed.connect("local", object_store_memory=1 << 30, log_to_driver=False)
    import ray

    address = ray.get_runtime_context().gcs_address
    cluster = TensorFlowCluster()
    try:
        theirs, ours = TensorFlowRemote(cluster.spec, 0, "one"), Ours("one")
        tiny = np.ones(2, np.float32)
        big = np.ones(N, np.float32)
        progress("warm up")
        for side in (theirs, ours):  # warm up
            side.tiny_apply(tiny)
            side.big_apply(big)
            side.big_take()
        rows = []

        def row(what: str, o: float, t: float, target_text: str, ok: bool, unit: str = "") -> None:
            show = fmt_time if not unit else (lambda v: f"{v / 1e9:.2f} GB/s")
            rows.append(
                [what, show(o), show(t), fmt_ratio(o / t), target_text, "yes" if ok else "NO"]
            )

        progress("tiny apply")
        m = alternate(
            {"o": lambda: ours.tiny_apply(tiny), "t": lambda: theirs.tiny_apply(tiny)}, 50, repeat
        )
        row("tiny apply", m["o"], m["t"], "<= 0.75x", m["o"] <= 0.75 * m["t"])
        floor = RayFloor()
        try:
            m = alternate(
                {
                    "o": ours.num,
                    "t": theirs.num,
                    "async": lambda: floor.call("async"),
                    "sync": lambda: floor.call("sync"),
                },
                50,
                repeat,
            )
        finally:
            floor.close()
        row("num_accumulated", m["o"], m["t"], "<= 0.75x", m["o"] <= 0.75 * m["t"])
        for kind in ("async", "sync"):
            rows.append(
                [
                    f"(Ray alone: a no-op call, {kind} actor)",
                    fmt_time(m[kind]),
                    f"(ours over it: {fmt_ratio(m['o'] / m[kind])})",
                    fmt_ratio(m[kind] / m["t"]),
                    "-",
                    "-",
                ]
            )
        m = alternate(
            {"o": lambda: ours.big_apply(big), "t": lambda: theirs.big_apply(big)}, 10, repeat
        )
        row("4 MB apply, 1 worker", m["o"], m["t"], "<= 0.5x", m["o"] <= 0.5 * m["t"])
        progress("takes")
        takes: dict[str, list[float]] = {"o": [], "t": []}
        for _ in range(repeat):
            takes["o"].append(take_times(ours, 5))
            takes["t"].append(take_times(theirs, 5))
        o, t = statistics.median(takes["o"]), statistics.median(takes["t"])
        row("take of a ready 4 MB mean", o, t, "<= 1x", o <= t)

        progress("two workers")
        pools = {
            "o": Workers("ray", address, "two"),
            "t": Workers("tf", json.dumps(cluster.spec), "two"),
        }
        try:
            rates: dict[str, list[float]] = {"o": [], "t": []}
            for _ in range(repeat):
                for key, pool in pools.items():
                    rates[key].append(pool.bytes_per_second())
        finally:
            for pool in pools.values():
                pool.close()
        o, t = statistics.median(rates["o"]), statistics.median(rates["t"])
        row("4 MB applies, 2 worker processes", o, t, ">= 2x", o >= 2 * t, unit="GB/s")

        progress("waiting takes")
        quiet, busy = waiting_takes_slowdown(address, repeat)
        rows.append(
            [
                f"tiny apply, {WAITING} takes waiting",
                fmt_time(busy),
                f"(none waiting: {fmt_time(quiet)})",
                fmt_ratio(busy / quiet),
                "<= 1.10x",
                "yes" if busy <= 1.10 * quiet else "NO",
            ]
        )
        print_table(
            f"tf_accum on Ray vs TensorFlow's distributed runtime (medians of {repeat} "
            "alternating trials; ratio = tf_accum / TensorFlow, for throughput higher is better)",
            ["what", "tf_accum (Ray)", "TensorFlow (grpc)", "ratio", "target", "met"],
            rows,
        )
    finally:
        cluster.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--worker", choices=["tf", "ray", "waiters"], help=argparse.SUPPRESS)
    parser.add_argument("--target", help=argparse.SUPPRESS)
    parser.add_argument("--name", help=argparse.SUPPRESS)
    parser.add_argument("--task", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker == "waiters":
        waiters_main()
    elif args.worker:
        worker_main(args.worker, args.target, args.task, args.name)
    else:
        run(args.repeat)


if __name__ == "__main__":
    main()
