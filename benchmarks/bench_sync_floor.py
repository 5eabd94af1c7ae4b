"""The sync-replicas MLP job's messages as bare Ray actor calls: what Ray alone allows.

    python -m benchmarks.bench_sync_floor [--configs 2,1 4,2] [--steps 300] [--repeat 3]
                                          [--reads-with-token] [--cpu]

The job of ``benchmarks.bench_sync_replicas`` with W workers and K ps tasks,
reduced to what it cannot skip, in the calls tf_accum's job makes. K Ray
actors (the ps tasks; their calls run on threads of their own, as tf_accum's
hosts' do) hold the 784-100-10 MLP's variables, spread as
``replica_device_setter`` spreads them, with Adam's slots; task 0 also holds
the step, Adam's beta powers and the tokens. Each of W worker processes, per
global step, reads the variables (one call per ps task, at once), computes
the gradients of its batch of 100 with numpy, sends each ps task but task 0
its share (at once), then task 0 its share with its wait for the next token
(one call, answered once the chief's update is done): 2K calls. The chief
(worker 0) also runs the queue runner's loop on a thread: on one ps task one
call that waits for the W gradients, averages them and runs Adam; on
several, Adam's step size from task 0, each task's update at once, and the
next step on task 0: K + 2 calls. With ``--reads-with-token`` the token's
answer carries task 0's variables, so a worker reads them only at its start:
a call fewer per worker step (with K = 1, the W + 1 calls tf_accum's job
makes on one ps task).

Arrays travel inside Ray's messages rather than through its object store
(this process raises ``RAY_max_direct_call_object_size`` for the cluster it
starts), as tf_accum's requests do. The figure is global steps per second
seen by the chief after ``--warmup`` steps, medians over ``--repeat`` runs;
``--cpu`` also prints each run's CPU milliseconds per global step by kind of
process (see ``bench_tf1_cluster.CpuSampler``). Every process is ended by pid.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from typing import Any

import numpy as np

from benchmarks.bench_sync_replicas import LEARNING_RATE, batch, start_weights
from benchmarks.bench_tf1_cluster import CpuSampler, end_processes

Arrays = list[np.ndarray[Any, Any]]
PROCESS_WAIT = 300.0  # seconds; generous, for a loaded machine
INLINE_BYTES = 4 * 2**20  # the largest array that travels inside a message
BETA1, BETA2, EPSILON = np.float32(0.9), np.float32(0.999), np.float32(1e-7)
ONE = np.float32(1)
VARIABLES = ("w1", "b1", "w2", "b2")  # as start_weights gives them


class SyncPsFloor:
    """A ps task: its share of the variables and their Adam slots, the gradients
    sent to it this step; the token ps task (task 0) also the step and Adam's
    beta powers."""

    def __init__(self, workers: int, piggyback: bool, held: list[int]) -> None:
        self.workers = workers
        self.piggyback = piggyback
        weights = start_weights()
        self.variables = [weights[i] for i in held]
        self.first = [np.zeros_like(v) for v in self.variables]
        self.second = [np.zeros_like(v) for v in self.variables]
        self.powers = [BETA1, BETA2]
        self.sums: Arrays | None = None
        self.count = 0
        self.step = 0
        # the actor's calls run on threads of its own, as tf_accum's hosts' do
        self.changed = threading.Condition()

    def read(self) -> tuple[Arrays, int]:
        with self.changed:
            return self.variables, self.step

    def apply(self, gradients: Arrays, step: int, token: bool = True) -> tuple[Arrays | None, int]:
        """Add a worker's gradients; with ``token``, then wait for the update after
        ``step`` (its token)."""
        with self.changed:
            if self.sums is None:
                self.sums = [g.copy() for g in gradients]
            else:
                for total, g in zip(self.sums, gradients, strict=True):
                    total += g
            self.count += 1
            self.changed.notify_all()
            if not token:
                return None, step
            while self.step <= step:
                self.changed.wait()
            return (self.variables if self.piggyback else None), self.step

    def alpha(self) -> np.float32:
        """Adam's step size for the next update, from the beta powers."""
        with self.changed:
            return self._alpha()

    def _alpha(self) -> np.float32:
        beta1_power, beta2_power = self.powers
        found: np.float32 = (
            np.float32(LEARNING_RATE) * np.sqrt(ONE - beta2_power) / (ONE - beta1_power)
        )
        return found

    def take_and_update(self, alpha: np.float32 | None = None, finish: bool = True) -> int:
        """The chief's queue runner: the mean of the W gradients, then Adam (with
        ``alpha``, else this task's own); with ``finish``, then the next step."""
        with self.changed:
            return self._take_and_update(alpha, finish)

    def _take_and_update(self, alpha: np.float32 | None, finish: bool) -> int:
        while self.count < self.workers:
            self.changed.wait()
        assert self.sums is not None
        means = [total / np.float32(self.count) for total in self.sums]
        self.sums, self.count = None, 0
        alpha = self._alpha() if alpha is None else alpha
        fresh = []
        for i, g in enumerate(means):
            m = self.first[i] + (g - self.first[i]) * (ONE - BETA1)
            v = self.second[i] + (np.square(g) - self.second[i]) * (ONE - BETA2)
            fresh.append(self.variables[i] - m * alpha / (np.sqrt(v) + EPSILON))
            self.first[i], self.second[i] = m, v
        self.variables = fresh
        return self._finish() if finish else self.step

    def finish(self) -> int:
        """The beta powers and the step move on; the tokens go out."""
        with self.changed:
            return self._finish()

    def _finish(self) -> int:
        beta1_power, beta2_power = self.powers
        self.powers = [beta1_power * BETA1, beta2_power * BETA2]
        self.step += 1
        self.changed.notify_all()
        return self.step


def held_by(task: int, ps_tasks: int) -> list[int]:
    """The variables (indices into start_weights) on ps task ``task``: round robin
    after the global step, which goes to task 0, as replica_device_setter places
    them."""
    return [i for i in range(len(VARIABLES)) if (i + 1) % ps_tasks == task]


def gradients_of(variables: Arrays, images: Any, labels: Any) -> Arrays:
    """The MLP's gradients of the mean softmax cross entropy, with numpy."""
    w1, b1, w2, b2 = variables
    hidden = images @ w1 + b1
    relu = np.maximum(hidden, 0)
    logits = relu @ w2 + b2
    shifted = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(shifted)
    delta = (e / e.sum(axis=1, keepdims=True) - labels) / np.float32(len(images))
    back = (delta @ w2.T) * (hidden > 0)
    return [images.T @ back, back.sum(axis=0), relu.T @ delta, delta.sum(axis=0)]


def role_main(args: dict[str, Any]) -> None:
    """A worker task's process (task 0 is the chief); the chief prints each step's time."""
    import ray

    ray.init(address=os.environ["TF_ACCUM_RAY_ADDRESS"], log_to_driver=False)
    ps = [ray.get_actor(name, namespace="tf_accum_floor") for name in args["actors"]]
    tokens, others = ps[0], ps[1:]
    held = [held_by(k, len(ps)) for k in range(len(ps))]
    total, task = args["total"], args["task"]
    images, labels = batch(task)
    if task == 0:

        def queue_runner() -> None:
            if not others:
                while ray.get(tokens.take_and_update.remote()) < total:
                    pass
                return
            while True:
                alpha = ray.get(tokens.alpha.remote())
                ray.get([p.take_and_update.remote(alpha, False) for p in ps])
                if ray.get(tokens.finish.remote()) >= total:
                    return

        threading.Thread(target=queue_runner, daemon=True).start()
    found = ray.get([p.read.remote() for p in ps])
    parts, step = [variables for variables, _ in found], found[0][1]
    while step < total:
        if parts[0] is None:
            parts = [variables for variables, _ in ray.get([p.read.remote() for p in ps])]
        elif others:
            parts[1:] = [variables for variables, _ in ray.get([p.read.remote() for p in others])]
        variables: Arrays = [np.empty(0)] * len(VARIABLES)
        for indices, values in zip(held, parts, strict=True):
            for i, value in zip(indices, values, strict=True):
                variables[i] = value
        gradients = gradients_of(variables, images, labels)
        share = [[gradients[i] for i in indices] for indices in held]
        ray.get([p.apply.remote(g, step, False) for p, g in zip(others, share[1:], strict=True)])
        sent, step = ray.get(tokens.apply.remote(share[0], step))
        parts[0] = sent
        if task == 0:
            print(json.dumps({"step": step, "t": time.time()}), flush=True)
    # the parent ends every process once the chief has printed the last step
    time.sleep(PROCESS_WAIT)


def run_once(
    workers: int,
    ps_tasks: int,
    steps: int,
    warmup: int,
    piggyback: bool,
    cpu: bool,
    address: str,
) -> dict[str, Any]:
    import ray

    names = [f"ps{k}-{os.urandom(4).hex()}" for k in range(ps_tasks)]
    ps: list[Any] = [
        ray.remote(SyncPsFloor)
        .options(name=name, namespace="tf_accum_floor", num_cpus=0, max_concurrency=workers + 4)
        .remote(workers, piggyback, held_by(k, ps_tasks))
        for k, name in enumerate(names)
    ]
    ray.get([p.read.remote() for p in ps])
    total = warmup + steps
    env = dict(os.environ, TF_ACCUM_RAY_ADDRESS=address, OPENBLAS_NUM_THREADS="1")
    started: list[subprocess.Popen[str]] = []
    sampler = CpuSampler() if cpu else None
    try:
        with sampler if sampler is not None else contextlib.nullcontext():
            for task in range(workers):
                role = {"job": "worker", "task": task, "total": total, "actors": names}
                started.append(
                    subprocess.Popen(
                        [sys.executable, "-m", "benchmarks.bench_sync_floor", "--role"]
                        + [json.dumps(role)],
                        env=env,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.DEVNULL,
                        text=True,
                    )
                )
            first = last = None
            give_up = time.monotonic() + PROCESS_WAIT
            assert started[0].stdout is not None
            for line in started[0].stdout:
                if time.monotonic() > give_up:
                    raise RuntimeError("the floor's job did not finish in time")
                record = json.loads(line)
                if first is None and record["step"] >= warmup:
                    first = record
                if record["step"] >= total:
                    last = record
                    break
        if first is None or last is None:
            raise RuntimeError("the floor's chief ended early")
        counted = last["step"] - first["step"]
        found: dict[str, Any] = {"steps_per_second": counted / (last["t"] - first["t"])}
        if sampler is not None:
            found["cpu"] = sampler.per_step([first["t"], last["t"]], counted)
        return found
    finally:
        end_processes(started)
        for p in ps:
            ray.kill(p)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--configs",
        nargs="*",
        default=["2,1", "4,2"],
        help="W,K pairs: workers and ps tasks (the variables spread over them)",
    )
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--reads-with-token",
        action="store_true",
        help="the token's answer carries the variables (W + 1 calls per global step)",
    )
    parser.add_argument("--cpu", action="store_true", help="also print CPU ms per global step")
    parser.add_argument("--role", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role:
        role_main(json.loads(args.role))
        return
    # Ray reads its settings from the environment, under their own (lowercase) names
    os.environ["RAY_max_direct_call_object_size"] = str(INLINE_BYTES)  # noqa: SIM112
    from tf_accum.examples import processes

    configs = [tuple(int(n) for n in pair.split(",")) for pair in args.configs]
    figures: dict[tuple[int, ...], list[float]] = {}
    with processes.cluster("local") as address:
        for _ in range(args.repeat):
            for workers, ps_tasks in configs:
                result = run_once(
                    workers,
                    ps_tasks,
                    args.steps,
                    args.warmup,
                    args.reads_with_token,
                    args.cpu,
                    address,
                )
                rate = float(result["steps_per_second"])
                figures.setdefault((workers, ps_tasks), []).append(rate)
                calls = calls_per_step(workers, ps_tasks, args.reads_with_token)
                print(
                    f"  W={workers} K={ps_tasks} floor ({calls} calls per step): {rate:.2f} steps/s"
                )
                if "cpu" in result:
                    cpu = result["cpu"]
                    parts = ", ".join(f"{k} {v:.2f}" for k, v in sorted(cpu.items()))
                    print(f"    CPU ms/step: total {sum(cpu.values()):.2f}: {parts}")
                sys.stdout.flush()
    print(f"\nglobal steps per second, median of {args.repeat} runs")
    for (workers, ps_tasks), rates in figures.items():
        calls = calls_per_step(workers, ps_tasks, args.reads_with_token)
        print(f"W={workers} K={ps_tasks}  {statistics.median(rates):.2f}  ({calls} calls per step)")


def calls_per_step(workers: int, ps_tasks: int, piggyback: bool) -> int:
    """Calls per global step: each worker's reads (one per ps task, but the token
    task's with --reads-with-token), its applies (the token task's with its
    token), and the chief's update (one call on one ps task; on several, the
    step size, an update per task, and the next step)."""
    worker = 2 * ps_tasks - (1 if piggyback else 0)
    chief = 1 if ps_tasks == 1 else ps_tasks + 2
    return workers * worker + chief


if __name__ == "__main__":
    main()
