"""The synchronous-replicas pattern: workers push gradients, a chief averages them.

Each worker thread reads the current weights and global step, computes the
gradient of a least-squares loss on its own data shard, and applies it to a
shared ConditionalAccumulator tagged with the step it read. The chief takes the
mean of ``replicas_to_aggregate`` gradients, updates the weights, and thereby
moves the step on: gradients computed from older weights arrive stale and are
dropped by the accumulator, which is the point of the pattern.
"""

from __future__ import annotations

import argparse
import threading
from dataclasses import dataclass, field

import numpy as np

import tf_accum as tfa
from tf_accum import errors


@dataclass
class ParameterServer:
    """Weights and step, read together by workers and written by the chief."""

    weights: np.ndarray
    step: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def read(self) -> tuple[np.ndarray, int]:
        with self.lock:
            return self.weights.copy(), self.step

    def update(self, delta: np.ndarray) -> int:
        with self.lock:
            self.weights += delta
            self.step += 1
            return self.step


def run(
    workers: int = 4,
    replicas_to_aggregate: int = 3,
    steps: int = 60,
    features: int = 8,
    learning_rate: float = 0.2,
    seed: int = 0,
    report_every: int = 10,
) -> dict[str, float]:
    """Train a linear model with ``workers`` threads; returns the final loss and error."""
    rng = np.random.default_rng(seed)
    true_weights = rng.normal(size=features).astype(np.float32)
    shards = []
    for _ in range(workers):
        x = rng.normal(size=(256, features)).astype(np.float32)
        y = x @ true_weights + 0.01 * rng.normal(size=256).astype(np.float32)
        shards.append((x, y))

    server = ParameterServer(np.zeros(features, np.float32))
    accumulator = tfa.compat.v1.ConditionalAccumulator(
        tfa.float32, shape=[features], name="gradients"
    )
    applied = [0] * workers

    def worker(index: int) -> None:
        x, y = shards[index]
        while True:
            weights, step = server.read()
            gradient = 2.0 * x.T @ (x @ weights - y) / len(y)
            try:
                accumulator.apply_grad(gradient, local_step=step)
            except errors.NotFoundError:
                return  # the chief closed the accumulator: training is over
            applied[index] += 1

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(workers)]
    for t in threads:
        t.start()

    def loss(weights: np.ndarray) -> float:
        return float(np.mean([np.mean((x @ weights - y) ** 2) for x, y in shards]))

    for _ in range(steps):
        mean_gradient = accumulator.take_grad(replicas_to_aggregate, timeout=30)
        step = server.update(-learning_rate * mean_gradient)
        if step % report_every == 0 or step == steps:
            print(f"step {step:4d}  loss {loss(server.weights):.6f}")
    accumulator.close()
    for t in threads:
        t.join(timeout=30)

    final_loss = loss(server.weights)
    error = float(np.max(np.abs(server.weights - true_weights)))
    print(
        f"{workers} workers applied {sum(applied)} gradients; the chief took {steps} means "
        f"of at least {replicas_to_aggregate} fresh ones (stale ones were dropped)."
    )
    print(f"final loss {final_loss:.6f}, largest weight error {error:.4f}")
    return {"loss": final_loss, "weight_error": error, "applied": float(sum(applied))}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--replicas-to-aggregate", type=int, default=3)
    parser.add_argument("--steps", type=int, default=60)
    args = parser.parse_args(argv)
    run(args.workers, args.replicas_to_aggregate, args.steps)
