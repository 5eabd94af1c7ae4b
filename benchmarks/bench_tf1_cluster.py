"""A TF1 parameter-server step on a cluster: tf_accum on Ray against TensorFlow's gRPC runtime.

    python -m benchmarks.bench_tf1_cluster [--configs 2,1 4,2 8,2] [--steps 30] [--repeat 3] [--cpu]

The same program runs on both, only its import changed: K ps tasks
(``tf.train.Server`` processes) hold the global step and 20
ConditionalAccumulators placed by ``replica_device_setter(cluster=...)``;
W worker processes each wait for a token (an accumulator of their own on ps
task 0), then apply 20 fed gradients (19 of 1,000 float32 elements and one of
1,000,000) in one ``Session.run``; the chief takes all 20 (W gradients each)
in one run and sets the step, handing out the next tokens, in another.
TensorFlow's tasks listen on localhost gRPC ports; tf_accum's join a local
Ray cluster this process starts. The floor is the same step made of bare
Ray actor calls carrying the same bytes, one actor per ps task: per worker
a gate call (to ps task 0's actor, where the job keeps its tokens) and one
call per ps actor, per step K take calls and a gate call from the chief;
the ps actors sum what they are sent and a take returns the means, and the
chief copies what it took into arrays it owns (as Session.run hands back):
work the job cannot skip. The bare floor (``bare_floor``) is the same calls
without that work (applies only count, takes return zeros of the same
sizes): Ray's bare calls alone, the floor as the project's issue 24 states it.

Figures are steps per second of the chief (after ``--warmup`` steps), medians
over ``--repeat`` runs that alternate the four. Every process is ended by pid.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

SIZES = [1000] * 19 + [1_000_000]
AHEAD = 2**40  # a local step no take makes stale
PROCESS_WAIT = 300.0  # seconds; generous, for a loaded machine
RUNTIMES = ("tensorflow", "tf_accum", "floor", "bare_floor")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cluster_spec(runtime: str, workers: int, ps_tasks: int) -> dict[str, list[str]]:
    """Real localhost ports for TensorFlow; for tf_accum the addresses are only names."""
    count = ps_tasks + workers + 1
    if runtime == "tensorflow":
        addresses = [f"localhost:{_free_port()}" for _ in range(count)]
    else:
        tag = os.urandom(4).hex()
        addresses = [f"task{i}-{tag}:2222" for i in range(count)]
    return {"ps": addresses[:ps_tasks], "worker": addresses[ps_tasks:]}


def host_of_accumulator(index: int, ps_tasks: int) -> int:
    """The ps task replica_device_setter gives accumulator ``index`` (the step took task 0)."""
    return (index + 1) % ps_tasks


# --- the program (tf: tensorflow.compat.v1 or tf_accum.compat.v1) -------------------


class Program:
    def __init__(self, tf: Any, spec: Any, workers: int) -> None:
        self.graph = tf.Graph()
        with self.graph.as_default(), tf.device(tf.train.replica_device_setter(cluster=spec)):
            self.step = tf.train.get_or_create_global_step()
            accumulators = [
                tf.ConditionalAccumulator(tf.float32, shape=[n], shared_name=f"g{i}")
                for i, n in enumerate(SIZES)
            ]
            with tf.device("/job:ps/task:0"):
                tokens = [
                    tf.ConditionalAccumulator(tf.float32, shape=[], shared_name=f"token{w}")
                    for w in range(workers)
                ]
            self.grads = [tf.placeholder(tf.float32, [n]) for n in SIZES]
            self.applies = [
                a.apply_grad(g, local_step=AHEAD)
                for a, g in zip(accumulators, self.grads, strict=True)
            ]
            self.takes = [a.take_grad(workers) for a in accumulators]
            self.new_step = tf.placeholder(tf.int64, [])
            with tf.control_dependencies([self.step.assign(self.new_step)]):
                self.release = tf.group(
                    *[t.apply_grad(np.float32(1), local_step=AHEAD) for t in tokens]
                )
            self.token_takes = [t.take_grad(1) for t in tokens]
            self.init = tf.global_variables_initializer()


def _compat(runtime: str) -> Any:
    if runtime == "tensorflow":
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        import tensorflow.compat.v1 as tf

        tf.disable_eager_execution()
        return tf
    import tf_accum.compat.v1 as tfa_v1

    return tfa_v1


def role_main(args: dict[str, Any]) -> dict[str, Any]:
    """One task's process of the program (or of the floor)."""
    runtime, spec, workers, total = args["runtime"], args["spec"], args["workers"], args["total"]
    if runtime in FLOORS:
        return _floor_role(args)
    tf = _compat(runtime)
    server = tf.train.Server(spec, job_name=args["job"], task_index=args["task"])
    if args["job"] == "ps":
        server.join()  # on tf_accum, returns once every worker has ended
        return {}
    program = Program(tf, spec, workers)
    sess = tf.Session(server.target, graph=program.graph)
    if args["task"] > 0:  # a worker
        index = args["task"] - 1
        feed = {
            g: np.full(n, index + 1, np.float32) for g, n in zip(program.grads, SIZES, strict=True)
        }
        for _ in range(total):
            sess.run(program.token_takes[index])
            sess.run(program.applies, feed)
        return {}
    sess.run(program.init)
    sess.run(program.release, {program.new_step: 0})
    started = 0.0
    window = [0.0, 0.0]
    for step in range(total):
        if step == args["warmup"]:
            started = time.perf_counter()
            window[0] = time.time()
        sess.run(program.takes)
        sess.run(program.release, {program.new_step: step + 1})
    window[1] = time.time()
    rate = (total - args["warmup"]) / (time.perf_counter() - started)
    return {"steps_per_second": rate, "window": window}


# --- the floor: bare Ray calls ------------------------------------------------------------


FLOORS = ("floor", "bare_floor")


class PsFloor:
    """A ps task reduced to Ray calls carrying the job's bytes. With ``work`` (the
    "floor") applies sum the arrays and a take returns their means, the numeric work
    the job cannot skip; without it (the "bare_floor", Ray's bare calls alone) applies
    only count and a take returns zeros of the same sizes. Ps task 0's also keeps the
    step gate, as the job keeps its workers' tokens on ps task 0."""

    def __init__(self, sizes: list[int], work: bool) -> None:
        self.work = work
        self.sums = [np.zeros(n, np.float32) for n in sizes]
        self.count = 0
        self.event: asyncio.Event | None = None
        self.step = 0
        self.changed: asyncio.Event | None = None

    async def apply(self, arrays: list[Any]) -> None:
        if self.work:
            for total, array in zip(self.sums, arrays, strict=True):
                if self.count:
                    np.add(total, array, out=total)
                else:
                    np.copyto(total, array)
        self.count += 1
        if self.event is not None:
            self.event.set()

    async def take(self, required: int) -> list[Any]:
        while self.count < required:
            self.event = asyncio.Event()
            await self.event.wait()
        self.count -= required
        if not self.work:
            return [np.zeros_like(total) for total in self.sums]
        return [np.divide(total, np.float32(required)) for total in self.sums]

    async def wait(self, step: int) -> None:
        """Returns once the step reaches ``step`` (a worker's token)."""
        while self.step < step:
            self.changed = self.changed or asyncio.Event()
            await self.changed.wait()

    async def advance(self, step: int) -> None:
        self.step = step
        if self.changed is not None:
            self.changed.set()
            self.changed = None


def _floor_role(args: dict[str, Any]) -> dict[str, Any]:
    import ray

    ray.init(address=os.environ["TF_ACCUM_RAY_ADDRESS"], log_to_driver=False)
    ps_tasks, tag, total = args["ps_tasks"], args["tag"], args["total"]
    work = args["runtime"] == "floor"
    by_host = [
        [n for i, n in enumerate(SIZES) if host_of_accumulator(i, ps_tasks) == k]
        for k in range(ps_tasks)
    ]
    options = {
        "namespace": "tf_accum_floor",
        "lifetime": "detached",
        "get_if_exists": True,
        "num_cpus": 0,
    }
    sinks: list[Any] = [
        ray.remote(PsFloor).options(name=f"{tag}/ps{k}", **options).remote(by_host[k], work)
        for k in range(ps_tasks)
    ]
    gate = sinks[0]
    if args["task"] > 0:
        index = args["task"] - 1
        arrays = [[np.full(n, index + 1, np.float32) for n in sizes] for sizes in by_host]
        for step in range(total):
            ray.get(gate.wait.remote(step))
            ray.get([sink.apply.remote(arrays[k]) for k, sink in enumerate(sinks)])
        return {}
    started = 0.0
    window = [0.0, 0.0]
    for step in range(total):
        if step == args["warmup"]:
            started = time.perf_counter()
            window[0] = time.time()
        taken = ray.get([sink.take.remote(args["workers"]) for sink in sinks])
        if work:  # a Session.run hands back arrays the caller owns (Ray's are read-only views)
            _ = [np.array(array) for arrays in taken for array in arrays]
        ray.get(gate.advance.remote(step + 1))
    elapsed = time.perf_counter() - started
    window[1] = time.time()
    for actor in sinks:
        ray.kill(actor)
    return {"steps_per_second": (total - args["warmup"]) / elapsed, "window": window}


# --- CPU accounting (--cpu) ----------------------------------------------------------------

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _label(pid: int) -> str | None:
    """What a process below this one is, for the CPU table (None: not ours to count)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return None
    if "--role" in raw:
        role = json.loads(raw.split("--role", 1)[1].strip())
        if role["job"] == "ps":
            return "ps process"
        return "chief" if role["task"] == 0 else "worker"
    executable = raw.split(" ", 1)[0]
    if executable.startswith("ray::"):
        name = executable[5:].split(".")[0]
        return "ps actor" if name in ("ResourceHost", "PsFloor", "SyncPsFloor") else "ray other"
    for daemon in ("raylet", "gcs_server"):
        if executable.endswith(f"/{daemon}"):
            return daemon
    return "ray other"


class CpuSampler:
    """Samples the CPU time of every process below this one (Linux /proc), so a run's
    CPU per step can be split by kind of process: what a CPU-bound machine pays."""

    def __init__(self) -> None:
        import threading

        self.samples: dict[int, list[tuple[float, float]]] = {}
        self.labels: dict[int, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> CpuSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        from tf_accum.examples.processes import descendants

        while not self._stop.wait(0.05):
            for pid in descendants(os.getpid()):
                try:
                    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                if self.labels.get(pid, "ray other") == "ray other":
                    # a Ray worker takes its actor's name once the actor starts
                    label = _label(pid)
                    if label is None:
                        continue
                    self.labels[pid] = label
                used = (int(fields[11]) + int(fields[12])) / _TICKS
                self.samples.setdefault(pid, []).append((time.time(), used))

    def per_step(self, window: list[float], steps: int) -> dict[str, float]:
        """Milliseconds of CPU per step in ``window``, by kind of process."""
        found: dict[str, float] = {}
        for pid, samples in self.samples.items():
            used = _at(samples, window[1]) - _at(samples, window[0])
            label = self.labels[pid]
            found[label] = found.get(label, 0.0) + 1000.0 * used / steps
        return found


def _at(samples: list[tuple[float, float]], moment: float) -> float:
    """CPU time at ``moment``, interpolated between samples."""
    before = [s for s in samples if s[0] <= moment]
    after = [s for s in samples if s[0] > moment]
    if not before:
        return samples[0][1] if after else 0.0
    if not after:
        return before[-1][1]
    (t0, c0), (t1, c1) = before[-1], after[0]
    return c0 + (c1 - c0) * (moment - t0) / (t1 - t0)


# --- running it ------------------------------------------------------------------------


def run_once(
    runtime: str, workers: int, ps_tasks: int, steps: int, warmup: int, address: str
) -> dict[str, Any]:
    """One run of the program on ``runtime``: the chief's result (steps per second, and
    the wall-clock window of the timed steps)."""
    spec = cluster_spec(runtime, workers, ps_tasks)
    base = {
        "runtime": runtime,
        "spec": spec,
        "workers": workers,
        "ps_tasks": ps_tasks,
        "total": steps + warmup,
        "warmup": warmup,
        "tag": os.urandom(4).hex(),
    }
    env = dict(os.environ, TF_ACCUM_RAY_ADDRESS=address, TF_CPP_MIN_LOG_LEVEL="3")
    roles = [] if runtime in FLOORS else [("ps", k) for k in range(ps_tasks)]
    roles += [("worker", w + 1) for w in range(workers)] + [("worker", 0)]
    started: list[subprocess.Popen[str]] = []
    try:
        for job, task in roles:
            started.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "benchmarks.bench_tf1_cluster",
                        "--role",
                        json.dumps(dict(base, job=job, task=task)),
                    ],
                    env=env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
            )
        chief = started[-1]
        out, err = chief.communicate(timeout=PROCESS_WAIT)
        if chief.returncode != 0:
            raise RuntimeError(f"{runtime} chief failed:\n{err[-3000:]}")
        # the result is the last line that is a JSON object (Ray may print after it)
        for line in reversed(out.strip().splitlines()):
            if line.startswith("{"):
                found: dict[str, Any] = json.loads(line)
                return found
        raise RuntimeError(f"{runtime} chief printed no result:\n{out[-3000:]}")
    finally:
        end_processes(started)


def end_processes(started: list[subprocess.Popen[str]]) -> None:
    """Kill the task processes a run started that are still running, and reap them (by pid)."""
    for process in started:
        if process.poll() is None:
            process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired, ValueError, OSError):
            process.communicate(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", nargs="*", default=["2,1", "4,2", "8,2"], help="W,K pairs")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--runtimes", default=",".join(RUNTIMES))
    parser.add_argument(
        "--cpu", action="store_true", help="also print CPU ms per step by process kind (Linux)"
    )
    parser.add_argument("--role", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role:
        print(json.dumps(role_main(json.loads(args.role))), flush=True)
        return
    from tf_accum.examples import processes

    runtimes = args.runtimes.split(",")
    configs = [tuple(int(x) for x in c.split(",")) for c in args.configs]
    figures: dict[tuple[int, int, str], list[float]] = {}
    with processes.cluster("local") as address:
        for _ in range(args.repeat):
            for workers, ps_tasks in configs:
                for runtime in runtimes:  # alternating, so drifts of the machine hit all
                    with CpuSampler() if args.cpu else contextlib.nullcontext() as sampler:
                        result = run_once(
                            runtime, workers, ps_tasks, args.steps, args.warmup, address
                        )
                    rate = float(result["steps_per_second"])
                    figures.setdefault((workers, ps_tasks, runtime), []).append(rate)
                    print(f"  W={workers} K={ps_tasks} {runtime}: {rate:.2f} steps/s", flush=True)
                    if sampler is not None:
                        cpu = sampler.per_step(result["window"], args.steps)
                        parts = ", ".join(f"{k} {v:.1f}" for k, v in sorted(cpu.items()))
                        print(f"    CPU ms/step: total {sum(cpu.values()):.1f}: {parts}")
    print("\nsteps per second (median of runs; the machine's load shows in every figure)")
    header = "W  K  " + "  ".join(f"{r:>11}" for r in runtimes)
    print(header)
    for workers, ps_tasks in configs:
        medians = [statistics.median(figures[(workers, ps_tasks, r)]) for r in runtimes]
        row = f"{workers:<2} {ps_tasks:<2} " + "  ".join(f"{m:>11.2f}" for m in medians)
        found = dict(zip(runtimes, medians, strict=True))
        if "tf_accum" in found and "tensorflow" in found:
            row += f"  tf_accum/TF {found['tf_accum'] / found['tensorflow']:.2f}x"
        for floor in FLOORS:
            if "tf_accum" in found and floor in found:
                row += f"  {floor}/tf_accum {found[floor] / found['tf_accum']:.2f}x"
        print(row)


if __name__ == "__main__":
    main()
