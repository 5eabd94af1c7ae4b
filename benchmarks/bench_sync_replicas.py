"""A synchronous-replicas MLP job on a cluster: tf_accum on Ray against TensorFlow's gRPC runtime.

    python -m benchmarks.bench_sync_replicas [--configs 2,1 4,2] [--steps 150] [--repeat 3] [--cpu]

The same TF1 program runs on both, only its import changed: a 784-100-10 MLP
(relu hidden layer, softmax cross entropy) on batches of 100, trained by
``tf.train.SyncReplicasOptimizer`` over Adam, aggregating every worker's
gradients (``replicas_to_aggregate = total_num_replicas = W``). Its
variables are spread over K ps tasks by ``replica_device_setter``; W worker
tasks each run ``sess.run([train_op, global_step], feed)`` in a loop, as
TensorFlow's mnist_replica.py does, and worker 0 (the chief) also runs the
optimizer's queue runner through its session hook. One process per task;
TensorFlow's tasks listen on localhost gRPC ports, tf_accum's join a local
Ray cluster this process starts.

The figure is global steps per second: the chief prints the time at which
each run saw the global step, and the rate is taken between the first run
that saw ``--warmup`` and the first that saw ``--warmup + --steps``. Runs
alternate between the runtimes; the table gives the medians. For tf_accum,
each run also gives the requests its ps tasks' hosts served per global step
and, measured by the chief right after the timed steps, the round trip of one
bare call to a host (the floor of one request). ``--cpu`` also prints each
run's CPU milliseconds per global step by kind of process (ps host, chief,
workers, Ray's daemons; see ``bench_tf1_cluster.CpuSampler``). Every process
is ended by pid.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import queue
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

import numpy as np

from benchmarks.bench_tf1_cluster import CpuSampler, _compat, cluster_spec, end_processes

BATCH = 100
SIZES = (784, 100, 10)
LEARNING_RATE = 1e-3
PROCESS_WAIT = 300.0  # seconds; generous, for a loaded machine
RUNTIMES = ("tensorflow", "tf_accum")
ROUND_TRIPS = 50  # bare calls timed for the floor


def start_weights() -> list[np.ndarray[Any, Any]]:
    """The same initial weights for both runtimes (fed as constants)."""
    rng = np.random.default_rng(0)
    return [
        (rng.standard_normal((784, 100)) * 0.05).astype(np.float32),
        np.zeros(100, np.float32),
        (rng.standard_normal((100, 10)) * 0.1).astype(np.float32),
        np.zeros(10, np.float32),
    ]


def batch(task: int) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """A worker's synthetic batch (images in [0, 1), one-hot labels)."""
    rng = np.random.default_rng(100 + task)
    images = rng.random((BATCH, SIZES[0]), dtype=np.float32)
    labels = np.eye(SIZES[2], dtype=np.float32)[rng.integers(0, SIZES[2], BATCH)]
    return images, labels


class Program:
    """The job's graph, as a worker task builds it (``tf``: either runtime's compat.v1)."""

    def __init__(self, tf: Any, spec: Any, task: int, workers: int) -> None:
        self.graph = tf.Graph()
        device = tf.train.replica_device_setter(
            cluster=spec, worker_device=f"/job:worker/task:{task}"
        )
        with self.graph.as_default(), tf.device(device):
            self.global_step = tf.train.get_or_create_global_step()
            self.images = tf.placeholder(tf.float32, [None, SIZES[0]], name="images")
            self.labels = tf.placeholder(tf.float32, [None, SIZES[2]], name="labels")
            w1, b1, w2, b2 = (
                tf.Variable(value, name=name)
                for value, name in zip(start_weights(), ("w1", "b1", "w2", "b2"), strict=True)
            )
            hidden = tf.nn.relu(tf.matmul(self.images, w1) + b1)
            logits = tf.matmul(hidden, w2) + b2
            self.loss = tf.reduce_mean(
                tf.nn.softmax_cross_entropy_with_logits_v2(labels=self.labels, logits=logits)
            )
            self.opt = tf.train.SyncReplicasOptimizer(
                tf.train.AdamOptimizer(LEARNING_RATE),
                replicas_to_aggregate=workers,
                total_num_replicas=workers,
            )
            self.train_op = self.opt.minimize(self.loss, global_step=self.global_step)
            self.hook = self.opt.make_session_run_hook(is_chief=task == 0)
            self.hook.begin()
            self.init = tf.global_variables_initializer()
            self.local_init = tf.local_variables_initializer()


def role_main(args: dict[str, Any]) -> None:
    """One task's process; a worker prints one JSON line per run (time, global step)."""
    runtime, spec, job, task = args["runtime"], args["spec"], args["job"], args["task"]
    tf = _compat(runtime)
    server = tf.train.Server(spec, job_name=job, task_index=task)
    if job == "ps":
        server.join()
        return
    program = Program(tf, spec, task, args["workers"])
    sess = tf.Session(server.target, graph=program.graph)
    if task == 0:
        sess.run([program.init, program.local_init])
        coord = tf.train.Coordinator()
        program.hook.after_create_session(sess, coord)
    else:
        give_up = time.monotonic() + PROCESS_WAIT
        while len(sess.run(program.opt.ready_for_local_init_op)):
            if time.monotonic() > give_up:
                raise TimeoutError("the chief never initialised the variables")
            time.sleep(0.05)
        sess.run(program.local_init)
        program.hook.after_create_session(sess, None)
    images, labels = batch(task)
    feed = {program.images: images, program.labels: labels}
    fetches = [program.train_op, program.global_step]
    counted = runtime == "tf_accum" and task == 0
    window_started = False
    while True:
        _, step = sess.run(fetches, feed)
        record: dict[str, Any] = {"step": int(step), "t": time.time()}
        if counted and step >= args["total"]:  # the window's end: counted after its time
            record["requests"] = _requests(server, spec)
            record["round_trip"] = _round_trip(server)
        elif counted and step >= args["warmup"] and not window_started:
            record["requests"] = _requests(server, spec)
            record["t"] = time.time()  # its start: counted before its time
            window_started = True
        print(json.dumps(record), flush=True)
        if step >= args["total"]:
            break
    # the parent ends every process once the chief has printed the last step
    time.sleep(PROCESS_WAIT)


def _requests(server: Any, spec: dict[str, list[str]]) -> int:
    """Requests the job's ps hosts have run so far (tf_accum)."""
    return sum(server.runtime.counts("ps", k)["requests"] for k in range(len(spec["ps"])))


def _round_trip(server: Any) -> float:
    """Seconds of one bare call to ps task 0's host (median of a few)."""
    import ray

    actor = server.runtime.link("ps", 0).actor
    times = []
    for _ in range(ROUND_TRIPS):
        start = time.perf_counter()
        ray.get(actor.ping.remote())
        times.append(time.perf_counter() - start)
    return statistics.median(times)


# --- running it ------------------------------------------------------------------------


def _lines(stream: Any, into: queue.Queue[str | None]) -> None:
    for line in stream:
        into.put(line)
    into.put(None)


def run_once(
    runtime: str,
    workers: int,
    ps_tasks: int,
    steps: int,
    warmup: int,
    address: str,
    blas_threads: str = "1",
) -> dict[str, Any]:
    """One run of the job on ``runtime``: global steps per second over the timed steps
    (and, for tf_accum, requests per step and the bare round trip)."""
    spec = cluster_spec(runtime, workers - 1, ps_tasks)  # it counts the chief apart
    base = {
        "runtime": runtime,
        "spec": spec,
        "workers": workers,
        "total": warmup + steps,
        "warmup": warmup,
    }
    env = dict(os.environ, TF_ACCUM_RAY_ADDRESS=address, TF_CPP_MIN_LOG_LEVEL="3")
    if blas_threads:  # numpy's matrix products (TensorFlow's thread pools ignore it)
        env["OPENBLAS_NUM_THREADS"] = blas_threads
    roles = [("ps", k) for k in range(ps_tasks)] + [("worker", 0)]
    roles += [("worker", w) for w in range(1, workers)]
    started: list[subprocess.Popen[str]] = []
    errors = tempfile.TemporaryFile()  # noqa: SIM115 - closed below
    try:
        for job, task in roles:
            started.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "benchmarks.bench_sync_replicas",
                        "--role",
                        json.dumps(dict(base, job=job, task=task)),
                    ],
                    env=env,
                    # only the chief's lines are read: a worker's unread pipe would fill
                    # (after some 1,600 steps) and stop the job
                    stdout=subprocess.PIPE if (job, task) == ("worker", 0) else subprocess.DEVNULL,
                    stderr=errors,
                    text=True,
                )
            )
        chief = started[ps_tasks]
        lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=_lines, args=(chief.stdout, lines), daemon=True).start()
        give_up = time.monotonic() + PROCESS_WAIT
        first: dict[str, Any] | None = None
        while True:
            try:
                line = lines.get(timeout=max(0.0, give_up - time.monotonic()))
            except queue.Empty:
                raise RuntimeError(f"{runtime}: the job did not finish in time") from None
            if line is None:
                errors.seek(0)
                error = errors.read().decode(errors="replace")[-3000:]
                raise RuntimeError(f"{runtime}: the chief ended early:\n{error}")
            if not line.startswith("{"):
                continue
            record = json.loads(line)
            if first is None and record["step"] >= warmup:
                first = record
            if record["step"] >= warmup + steps:
                assert first is not None
                found = {
                    "steps_per_second": (record["step"] - first["step"])
                    / (record["t"] - first["t"]),
                    "window": [first["t"], record["t"]],
                    "steps": record["step"] - first["step"],
                }
                if "round_trip" in record:
                    found["round_trip"] = record["round_trip"]
                    found["requests_per_step"] = (record["requests"] - first["requests"]) / (
                        record["step"] - first["step"]
                    )
                return found
    finally:
        end_processes(started)
        errors.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", nargs="*", default=["2,1", "4,2"], help="W,K pairs")
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--runtimes", default=",".join(RUNTIMES))
    parser.add_argument(
        "--blas-threads",
        default="1",
        help="OPENBLAS_NUM_THREADS of the tasks' processes ('' leaves it alone); one suits "
        "a busy machine (see docs/performance.md)",
    )
    parser.add_argument(
        "--cpu",
        action="store_true",
        help="also print CPU ms per global step by process kind (Linux)",
    )
    parser.add_argument("--role", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role:
        role_main(json.loads(args.role))
        return
    from tf_accum.examples import processes

    runtimes = args.runtimes.split(",")
    configs = [tuple(int(x) for x in c.split(",")) for c in args.configs]
    figures: dict[tuple[int, int, str], list[float]] = {}
    extras: dict[tuple[int, int], list[tuple[float, float]]] = {}
    with processes.cluster("local") as address:
        for _ in range(args.repeat):
            for workers, ps_tasks in configs:
                for runtime in runtimes:  # alternating, so drifts of the machine hit all
                    with CpuSampler() if args.cpu else contextlib.nullcontext() as sampler:
                        result = run_once(
                            runtime,
                            workers,
                            ps_tasks,
                            args.steps,
                            args.warmup,
                            address,
                            args.blas_threads,
                        )
                    rate = float(result["steps_per_second"])
                    figures.setdefault((workers, ps_tasks, runtime), []).append(rate)
                    note = ""
                    if "round_trip" in result:
                        extra = (result["requests_per_step"], result["round_trip"])
                        extras.setdefault((workers, ps_tasks), []).append(extra)
                        note = (
                            f" ({extra[0]:.1f} host requests per global step; "
                            f"bare round trip {1000 * extra[1]:.2f} ms)"
                        )
                    print(f"  W={workers} K={ps_tasks} {runtime}: {rate:.2f} steps/s{note}")
                    if sampler is not None:
                        cpu = sampler.per_step(result["window"], result["steps"])
                        parts = ", ".join(f"{k} {v:.2f}" for k, v in sorted(cpu.items()))
                        print(f"    CPU ms per global step: total {sum(cpu.values()):.2f}: {parts}")
                    sys.stdout.flush()
    blas = args.blas_threads or "not set"
    print(
        f"\nglobal steps per second, median of {args.repeat} runs of {args.steps} steps "
        f"(OPENBLAS_NUM_THREADS {blas}; the machine's load shows in every figure)"
    )
    print("W  K  " + "  ".join(f"{r:>11}" for r in runtimes))
    for workers, ps_tasks in configs:
        medians = [statistics.median(figures[(workers, ps_tasks, r)]) for r in runtimes]
        row = f"{workers:<2} {ps_tasks:<2} " + "  ".join(f"{m:>11.2f}" for m in medians)
        found = dict(zip(runtimes, medians, strict=True))
        if "tf_accum" in found and "tensorflow" in found:
            # and the median of each round's own ratio (the two ran back to back)
            rounds = [
                a / t
                for a, t in zip(
                    figures[(workers, ps_tasks, "tf_accum")],
                    figures[(workers, ps_tasks, "tensorflow")],
                    strict=True,
                )
            ]
            row += (
                f"  tf_accum/TF {found['tf_accum'] / found['tensorflow']:.2f}x"
                f" (rounds {min(rounds):.2f}-{max(rounds):.2f}x,"
                f" median {statistics.median(rounds):.2f}x)"
            )
        if (workers, ps_tasks) in extras:
            per_step = statistics.median(e[0] for e in extras[(workers, ps_tasks)])
            trip = statistics.median(e[1] for e in extras[(workers, ps_tasks)])
            row += f"  requests/step {per_step:.1f}, round trip {1000 * trip:.2f} ms"
        print(row)


if __name__ == "__main__":
    main()
