"""One model spread over K hosts: applies per second from 8 workers, against Ray's bare calls.

    python -m benchmarks.bench_hosts [--repeat 3] [--seconds 2] [--workers 8]

A local Ray cluster started by this process; the workers are Ray actors
(processes attached to it, using no CPU slot). Each worker loops over the
model's variables, applying one gradient to each (tiny: 2 float32; big: 4 MB)
and waiting for each apply, as a training loop does. The model's
accumulators live in one container placed over K = 1, 2, 4 hosts
(``tfa.distributed.place``), with shared names chosen so every host holds as
many of them. Beside it, in the same run and interleaved with it, Ray's bare
cost: the same workers calling a no-op method of K plain async actors with
the same request and bytes. Every figure is the median over ``--repeat``
trials of ``--seconds`` each.

From the figures it prints a paper estimate of synchronous training with 100
workers over 1, 4 and 16 hosts (the model is stated with the table).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from typing import Any

import numpy as np

from benchmarks.harness import print_table

BIG = 1_000_000  # float32: 4 MB
TINY = 2
AHEAD = 2**40  # a local step no take makes stale
VARIABLES = {"tiny": 8, "4 MB": 4}  # variables of the model, per gradient size
SIZES = {"tiny": TINY, "4 MB": BIG}
HOST_COUNTS = (1, 2, 4)


def balanced_names(count: int, hosts: int) -> list[str]:
    """``count`` shared names, as many on every host of ``hosts`` (by the digest rule)."""
    from tf_accum.distributed.placement import HostGroup

    group = HostGroup("names", hosts, lambda: None, lambda index: ())
    per_host = {i: 0 for i in range(hosts)}
    names = []
    candidate = 0
    while len(names) < count:
        name = f"var{candidate}"
        candidate += 1
        index = group.index_for(name)
        if per_host[index] < count // hosts:
            per_host[index] += 1
            names.append(name)
    return names


class Worker:
    """One training process (a Ray actor): applies a gradient to every variable, in turn."""

    def prepare(self, container: str, hosts: int, names: list[str], size: int) -> None:
        import tf_accum as tfa

        tfa.distributed.connect("auto")  # Ray is attached already: its connection is used
        tfa.distributed.place(container, hosts=hosts)
        raw = tfa.raw_ops
        self._apply = raw.ResourceAccumulatorApplyGradient
        self._handles = [
            raw.ResourceConditionalAccumulator(
                dtype=tfa.float32,
                shape=[size],
                container=container,
                shared_name=name,
                reduction_type="SUM",
            )
            for name in names
        ]
        self._gradient = np.ones(size, np.float32)

    def prepare_bare(self, actors: list[Any], variables: int, size: int) -> None:
        self._actors = actors
        self._variables = variables
        self._gradient = np.ones(size, np.float32)

    def run(self, start_at: float, seconds: float) -> tuple[int, float, float]:
        """Steps until ``seconds`` passed; (applies, start, end)."""
        while time.time() < start_at:
            time.sleep(0.001)
        start = time.time()
        applies = 0
        while time.time() - start < seconds:
            for h in self._handles:
                self._apply(handle=h, local_step=AHEAD, gradient=self._gradient)
            applies += len(self._handles)
        return applies, start, time.time()

    def run_bare(self, start_at: float, seconds: float) -> tuple[int, float, float]:
        import ray

        while time.time() < start_at:
            time.sleep(0.001)
        start = time.time()
        applies = 0
        while time.time() - start < seconds:
            for j in range(self._variables):
                actor = self._actors[j % len(self._actors)]
                ray.get(actor.run.remote(("apply_dense", "instance", j, AHEAD, self._gradient)))
            applies += self._variables
        return applies, start, time.time()


class NoOp:
    """Ray alone: an async actor that receives the request and does nothing."""

    async def run(self, request: Any) -> None:
        return None


def progress(what: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {what}", file=sys.stderr, flush=True)


def rate(spans: list[tuple[int, float, float]]) -> float:
    """Applies per second of all the workers together."""
    applies = sum(s[0] for s in spans)
    return applies / (max(s[2] for s in spans) - min(s[1] for s in spans))


def measure(workers: list[Any], method: str, seconds: float) -> float:
    import ray

    start_at = time.time() + 0.3
    return rate(ray.get([getattr(w, method).remote(start_at, seconds) for w in workers]))


def chief_seconds(size: int, repeat: int) -> tuple[float, float]:
    """This process alone on an idle host: (apply, take of a ready accumulator), medians."""
    import tf_accum as tfa

    raw = tfa.raw_ops
    h = raw.ResourceConditionalAccumulator(dtype=tfa.float32, shape=[size])
    gradient = np.ones(size, np.float32)
    applies, takes = [], []
    for _ in range(repeat * 5):
        start = time.perf_counter()
        raw.ResourceAccumulatorApplyGradient(handle=h, local_step=AHEAD, gradient=gradient)
        middle = time.perf_counter()
        raw.ResourceAccumulatorTakeGradient(handle=h, num_required=1, dtype=tfa.float32)
        applies.append(middle - start)
        takes.append(time.perf_counter() - middle)
    raw.DestroyResourceOp(resource=h, ignore_lookup_error=True)
    return statistics.median(applies), statistics.median(takes)


WORKERS_ON_PAPER, VARIABLES_ON_PAPER = 100, 10


def estimate(
    per_call: float, per_byte: float, alone: dict[str, tuple[float, float]]
) -> tuple[list[list[str]], list[str]]:
    """Steps per second of synchronous training on paper, and where adding hosts stops helping.

    A step: each of the workers applies one gradient to each variable, one
    apply after another; a host serves its share of all those applies one at a
    time, each costing ``per_call`` plus ``per_byte`` per byte; then the chief
    takes every variable, one after another. A step lasts max(busiest host,
    one worker's own applies) + the chief's takes.
    """
    rows, limits = [], []
    workers, variables = WORKERS_ON_PAPER, VARIABLES_ON_PAPER
    for label, kind in ((f"{variables} tiny variables", "tiny"), (f"{variables} x 4 MB", "4 MB")):
        nbytes = SIZES[kind] * 4
        apply, take = alone[kind]
        one_call = per_call + per_byte * nbytes
        worker = variables * apply
        chief = variables * take
        for hosts in (1, 4, 16):
            host = workers * variables / hosts * one_call
            step = max(host, worker) + chief
            bound = "hosts" if host > worker else "workers' own applies"
            rows.append([label, str(hosts), f"{1 / step:,.1f}", f"{chief / step:.0%}", bound])
        # past this many hosts the busiest host is no longer the slowest part of a step
        limits.append(f"{label}: {workers * variables * one_call / worker:.1f} hosts")
    return rows, limits


def run(repeat: int, seconds: float, count: int) -> None:
    import tf_accum as tfa

    # before Ray is imported: connect then keeps the cluster's token out of the home directory
    tfa.distributed.connect("local", object_store_memory=2 << 30, log_to_driver=False)
    import ray

    remote_worker = ray.remote(num_cpus=0)(Worker)
    remote_noop = ray.remote(num_cpus=0, max_concurrency=1000)(NoOp)
    workers = [remote_worker.remote() for _ in range(count)]
    rows = []
    rates: dict[tuple[str, int], float] = {}
    try:
        for kind, size in SIZES.items():
            variables = VARIABLES[kind]
            for hosts in HOST_COUNTS:
                progress(f"{kind} gradients, {hosts} hosts")
                container = f"bench-hosts-{uuid.uuid4().hex[:8]}"
                names = balanced_names(variables, hosts)
                ray.get([w.prepare.remote(container, hosts, names, size) for w in workers])
                noops = [remote_noop.remote() for _ in range(hosts)]
                ray.get([a.run.remote(None) for a in noops])
                ray.get([w.prepare_bare.remote(noops, variables, size) for w in workers])
                ours, bare = [], []
                for _ in range(repeat):
                    ours.append(measure(workers, "run", seconds))
                    bare.append(measure(workers, "run_bare", seconds))
                for actor in noops:
                    ray.kill(actor)
                o, b = statistics.median(ours), statistics.median(bare)
                rates[kind, hosts] = o
                nbytes = size * 4
                rows.append(
                    [
                        kind,
                        str(hosts),
                        f"{o:,.0f}",
                        f"{b:,.0f}",
                        f"{o / b:.2f}",
                        f"{o * nbytes / 1e6:,.0f}",
                        f"{o / count / variables:,.1f}",
                    ]
                )
        progress("one apply and one take alone")
        alone = {kind: chief_seconds(size, repeat) for kind, size in SIZES.items()}
    finally:
        for w in workers:
            ray.kill(w)
    print_table(
        f"{count} workers applying to one model over K hosts "
        f"(median of {repeat} x {seconds:g} s; tiny = {VARIABLES['tiny']} variables of "
        f"{TINY} float32, 4 MB = {VARIABLES['4 MB']} variables of {BIG:,} float32)",
        ["gradient", "K", "applies/s", "bare Ray/s", "ratio", "MB/s", "steps/s per worker"],
        rows,
    )
    # one host saturated by the workers: its cost per call, and per byte beyond that
    per_call = 1 / rates["tiny", 1]
    per_byte = max(1 / rates["4 MB", 1] - per_call, 0.0) / (BIG * 4)
    print(
        f"\none host: {per_call * 1e6:,.0f} us per call + {per_byte * 1e9:.3f} ns per byte "
        f"({1 / per_call:,.0f} tiny calls/s, {1 / per_byte / 1e6 if per_byte else 0:,.0f} MB/s); "
        "one process alone, apply / take: "
        + ", ".join(f"{k} {a * 1e3:.2f} / {t * 1e3:.2f} ms" for k, (a, t) in alone.items())
    )
    rows, limits = estimate(per_call, per_byte, alone)
    print_table(
        f"On paper: synchronous training, {WORKERS_ON_PAPER} workers, each step every worker "
        "applies to every variable, then the chief takes each variable (each host on a core "
        "of its own)",
        ["model", "hosts", "steps/s", "chief's share", "bound by"],
        rows,
    )
    print("more hosts stop helping past: " + "; ".join(limits))


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--workers", type=int, default=8)
    options = parser.parse_args()
    run(options.repeat, options.seconds, options.workers)


if __name__ == "__main__":
    main()
