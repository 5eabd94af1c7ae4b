"""A PyTorch model trained by several worker processes through one accumulator, on Ray.

    python -m tf_accum.examples.torch_ray --workers 3 --steps 60

Needs the ``ray`` extra and PyTorch (CPU is enough). The chief (this process)
starts a loopback-only Ray cluster (or joins ``--address``), makes one
``ConditionalAccumulator`` with a shared_name, holding every parameter's
gradient as one flat float32 vector, and starts the workers as Ray actors:
separate OS processes, each with its own copy of the model and its own shard
of the data. Each step:

1. the chief sends the current parameters to every worker;
2. each worker loads them, runs forward and ``backward()`` on its shard,
   flattens the parameters' ``.grad`` into one vector and applies it to the
   accumulator (by shared_name) tagged with the step;
3. the chief takes the mean of all the workers' gradients (``take_grad``
   blocks until they are in), writes it back into the parameters' ``.grad``
   and lets its optimizer step.

Every process the run started (the actors and Ray's own) is ended with it.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

SHARED_NAME = "tf_accum_torch_ray_gradients"


@dataclass
class TorchJob:
    workers: int = 3
    steps: int = 60
    samples_per_worker: int = 64
    learning_rate: float = 0.1
    seed: int = 0
    address: str = "local"
    quiet: bool = False


@dataclass
class TorchOutcome:
    losses: list[float] = field(default_factory=list)  # the mean of the workers' losses, per step
    accepted: int = 0  # gradients the accumulator took in
    stale: int = 0


def make_model(seed: int) -> Any:
    """A small regression network; the same seed gives the same starting weights."""
    import torch

    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))


def make_shard(seed: int, worker: int, samples: int) -> tuple[Any, Any]:
    """Worker ``worker``'s data: inputs and targets of one shared smooth function."""
    import torch

    generator = torch.Generator().manual_seed(seed * 1000 + worker + 1)
    inputs = torch.randn(samples, 4, generator=generator)
    targets = torch.sin(inputs[:, :1]) + 0.5 * inputs[:, 1:2] * inputs[:, 2:3] - 0.3 * inputs[:, 3:]
    return inputs, targets


def flat_parameters(model: Any) -> np.ndarray[Any, Any]:
    import torch

    with torch.no_grad():
        flat: np.ndarray[Any, Any] = torch.cat([p.reshape(-1) for p in model.parameters()]).numpy()
        return np.array(flat, copy=True)


def load_flat(model: Any, flat: np.ndarray[Any, Any]) -> None:
    import torch

    with torch.no_grad():
        offset = 0
        for parameter in model.parameters():
            size = parameter.numel()
            parameter.copy_(torch.from_numpy(flat[offset : offset + size]).view_as(parameter))
            offset += size


class GradientWorker:
    """One worker process (a Ray actor): its model, its shard, the shared accumulator."""

    def __init__(self, worker: int, job: TorchJob, size: int) -> None:
        import torch

        import tf_accum as tfa

        torch.set_num_threads(1)
        # in a Ray worker Ray is attached already: this installs tf_accum's Ray table
        tfa.distributed.connect(job.address)
        self.model = make_model(job.seed)
        self.inputs, self.targets = make_shard(job.seed, worker, job.samples_per_worker)
        self.accumulator = tfa.compat.v1.ConditionalAccumulator(
            tfa.float32, shape=[size], shared_name=SHARED_NAME
        )

    def step(self, flat: np.ndarray[Any, Any], step: int) -> float:
        """Load the parameters, compute the gradient, apply it; returns the loss."""
        import torch

        load_flat(self.model, flat)
        self.model.zero_grad()
        loss: Any = torch.nn.functional.mse_loss(self.model(self.inputs), self.targets)
        loss.backward()
        gradient = torch.cat([p.grad.reshape(-1) for p in self.model.parameters()])
        # a CPU tensor of the accumulator's dtype is read where it is (no copy)
        self.accumulator.apply_grad(gradient, local_step=step)
        return float(loss)


def train(job: TorchJob) -> TorchOutcome:
    """Run the job (see the module docstring); every process it started is ended."""
    import torch

    import tf_accum as tfa
    from tf_accum.examples.processes import cluster

    torch.set_num_threads(1)
    outcome = TorchOutcome()
    with cluster(job.address, job.quiet) as address:
        import ray  # after cluster(): connect sets Ray's environment before Ray is imported

        model = make_model(job.seed)
        optimizer = torch.optim.SGD(model.parameters(), lr=job.learning_rate)
        size = sum(p.numel() for p in model.parameters())
        accumulator = tfa.compat.v1.ConditionalAccumulator(
            tfa.float32, shape=[size], shared_name=SHARED_NAME
        )
        worker_job = TorchJob(**{**job.__dict__, "address": address})
        actor: Any = ray.remote(num_cpus=0)(GradientWorker)
        workers: list[Any] = [actor.remote(i, worker_job, size) for i in range(job.workers)]
        try:
            for step in range(job.steps):
                flat = ray.put(flat_parameters(model))
                losses = [w.step.remote(flat, step) for w in workers]
                mean = accumulator.take_grad(job.workers)  # blocks until every worker applied
                offset = 0
                for parameter in model.parameters():
                    size_of = parameter.numel()
                    chunk = torch.from_numpy(mean[offset : offset + size_of].copy())
                    parameter.grad = chunk.view_as(parameter)
                    offset += size_of
                optimizer.step()
                outcome.losses.append(float(np.mean(ray.get(losses))))
                if not job.quiet and (step % 10 == 0 or step == job.steps - 1):
                    print(f"step {step:4d}  loss {outcome.losses[-1]:.5f}", flush=True)
            stats = accumulator.stats()
            outcome.accepted, outcome.stale = int(stats["accepted"] or 0), int(stats["stale"] or 0)
        finally:
            for worker in workers:
                ray.kill(worker)
            accumulator.close()
    return outcome


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=3, help="worker processes (default 3)")
    parser.add_argument("--steps", type=int, default=60, help="training steps (default 60)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--address",
        default=os.environ.get("TF_ACCUM_RAY_ADDRESS") or "local",
        help="a running Ray cluster's address (default: a fresh loopback-only one)",
    )
    parser.add_argument("--quiet", action="store_true", help="print only the summary")
    args = parser.parse_args(argv)
    if args.workers < 1 or args.steps < 1:
        parser.error("--workers and --steps must be at least 1")
    job = TorchJob(
        workers=args.workers, steps=args.steps, seed=args.seed, address=args.address,
        quiet=args.quiet,
    )  # fmt: skip
    outcome = train(job)
    print(
        f"{job.workers} workers, {job.steps} steps: loss {outcome.losses[0]:.5f} -> "
        f"{outcome.losses[-1]:.5f}; {outcome.accepted} gradients accepted, {outcome.stale} stale"
    )


if __name__ == "__main__":
    main()
