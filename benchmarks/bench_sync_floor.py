"""The sync-replicas MLP job's messages as bare Ray actor calls: what Ray alone allows.

    python -m benchmarks.bench_sync_floor [--workers 2 4] [--steps 300] [--repeat 3]
                                          [--reads-with-token] [--cpu]

The job of ``benchmarks.bench_sync_replicas`` with one ps task, reduced to
what it cannot skip: one actor (the ps task) holds the 784-100-10 MLP's
variables and Adam's slots; W worker processes each, per global step, read
the variables (one call), compute the gradients of their batch of 100 with
numpy, and send them with their wait for the next token (one call, answered
once the chief's update is done); the chief (worker 0) also runs the queue
runner's loop on a thread: one call that waits for the W gradients, averages
them and runs Adam on the actor. That is 2W + 1 calls per global step, the
requests tf_accum's job sends. With ``--reads-with-token`` the token's answer
carries the updated variables, so a worker reads once at its start: W + 1
calls per global step (a figure for what fewer round trips would buy; the
job itself must read the variables in each run).

Arrays travel inside Ray's messages rather than through its object store
(this process raises ``RAY_max_direct_call_object_size`` for the cluster it
starts), as tf_accum's requests do. The figure is global steps per second
seen by the chief after ``--warmup`` steps, medians over ``--repeat`` runs;
``--cpu`` also prints each run's CPU milliseconds per global step by kind of
process (see ``bench_tf1_cluster.CpuSampler``). Every process is ended by pid.
"""

from __future__ import annotations

import argparse
import asyncio
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


class SyncPsFloor:
    """The ps task: the variables, Adam's slots, the gradients sent this step."""

    def __init__(self, workers: int, piggyback: bool) -> None:
        self.workers = workers
        self.piggyback = piggyback
        self.variables = start_weights()
        self.first = [np.zeros_like(v) for v in self.variables]
        self.second = [np.zeros_like(v) for v in self.variables]
        self.powers = [BETA1, BETA2]
        self.sums: Arrays | None = None
        self.count = 0
        self.step = 0
        self.applied: asyncio.Event | None = None
        self.advanced: asyncio.Event | None = None

    async def read(self) -> tuple[Arrays, int]:
        return self.variables, self.step

    async def apply(self, gradients: Arrays, step: int) -> tuple[Arrays | None, int]:
        """Add a worker's gradients, then wait for the update after ``step`` (its token)."""
        if self.sums is None:
            self.sums = [g.copy() for g in gradients]
        else:
            for total, g in zip(self.sums, gradients, strict=True):
                total += g
        self.count += 1
        if self.applied is not None:
            self.applied.set()
        while self.step <= step:
            self.advanced = self.advanced or asyncio.Event()
            await self.advanced.wait()
        return (self.variables if self.piggyback else None), self.step

    async def take_and_update(self) -> int:
        """The chief's queue runner: the mean of the W gradients, then Adam."""
        while self.count < self.workers:
            self.applied = asyncio.Event()
            await self.applied.wait()
        assert self.sums is not None
        means = [total / np.float32(self.count) for total in self.sums]
        self.sums, self.count = None, 0
        beta1_power, beta2_power = self.powers
        alpha = np.float32(LEARNING_RATE) * np.sqrt(ONE - beta2_power) / (ONE - beta1_power)
        fresh = []
        for i, g in enumerate(means):
            m = self.first[i] + (g - self.first[i]) * (ONE - BETA1)
            v = self.second[i] + (np.square(g) - self.second[i]) * (ONE - BETA2)
            fresh.append(self.variables[i] - m * alpha / (np.sqrt(v) + EPSILON))
            self.first[i], self.second[i] = m, v
        self.variables = fresh
        self.powers = [beta1_power * BETA1, beta2_power * BETA2]
        self.step += 1
        if self.advanced is not None:
            self.advanced.set()
            self.advanced = None
        return self.step


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
    ps = ray.get_actor(args["actor"], namespace="tf_accum_floor")
    total, task = args["total"], args["task"]
    images, labels = batch(task)
    if task == 0:

        def queue_runner() -> None:
            while ray.get(ps.take_and_update.remote()) < total:
                pass

        threading.Thread(target=queue_runner, daemon=True).start()
    variables, step = ray.get(ps.read.remote())
    while step < total:
        if variables is None:
            variables, _ = ray.get(ps.read.remote())
        sent, step = ray.get(ps.apply.remote(gradients_of(variables, images, labels), step))
        variables = sent
        if task == 0:
            print(json.dumps({"step": step, "t": time.time()}), flush=True)
    # the parent ends every process once the chief has printed the last step
    time.sleep(PROCESS_WAIT)


def run_once(
    workers: int, steps: int, warmup: int, piggyback: bool, cpu: bool, address: str
) -> dict[str, Any]:
    import ray

    name = f"ps-{os.urandom(4).hex()}"
    options = {"name": name, "namespace": "tf_accum_floor", "num_cpus": 0}
    ps: Any = ray.remote(SyncPsFloor).options(**options).remote(workers, piggyback)
    ray.get(ps.read.remote())
    total = warmup + steps
    env = dict(os.environ, TF_ACCUM_RAY_ADDRESS=address, OPENBLAS_NUM_THREADS="1")
    started: list[subprocess.Popen[str]] = []
    sampler = CpuSampler() if cpu else None
    try:
        with sampler if sampler is not None else contextlib.nullcontext():
            for task in range(workers):
                role = {"job": "worker", "task": task, "total": total, "actor": name}
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
        ray.kill(ps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", nargs="*", type=int, default=[2, 4])
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

    figures: dict[int, list[float]] = {}
    calls = "W + 1" if args.reads_with_token else "2W + 1"
    with processes.cluster("local") as address:
        for _ in range(args.repeat):
            for workers in args.workers:
                result = run_once(
                    workers, args.steps, args.warmup, args.reads_with_token, args.cpu, address
                )
                rate = float(result["steps_per_second"])
                figures.setdefault(workers, []).append(rate)
                print(f"  W={workers} floor ({calls} calls per step): {rate:.2f} steps/s")
                if "cpu" in result:
                    cpu = result["cpu"]
                    parts = ", ".join(f"{k} {v:.2f}" for k, v in sorted(cpu.items()))
                    print(f"    CPU ms/step: total {sum(cpu.values()):.2f}: {parts}")
                sys.stdout.flush()
    print(f"\nglobal steps per second, median of {args.repeat} runs ({calls} calls per step)")
    for workers, rates in figures.items():
        print(f"W={workers} K=1  {statistics.median(rates):.2f}")


if __name__ == "__main__":
    main()
