"""The two small models the synchronous-replicas job trains.

Both follow one protocol, :class:`Model`: a model owns its parameters' initial
value, knows how to compute one worker's gradient for one step, how to push it
into its accumulator and how the chief turns a take into an update.

Every gradient carries a count: a trailing 1 (dense) or a row of ones at an
extra index (sparse), and the accumulators sum (reduction_type "SUM"). A take
consumes *all* the gradients accepted so far, which may be more than
``replicas_to_aggregate``; the summed count tells the chief how many there
were, so it can divide by exactly that number and report it.

A worker's gradient depends only on (seed, worker, step): its mini-batch is
drawn from a generator seeded with those three numbers.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

import tf_accum as tfa

Array = np.ndarray[Any, Any]


class Model(Protocol):
    """What the job needs from a model."""

    name: str
    description: str
    learning_rate: float

    def initial_params(self) -> Array:
        """A fresh copy of the starting parameters."""

    def loss(self, params: Array) -> float:
        """The training objective at ``params``."""

    def gradient(self, params: Array, worker: int, step: int) -> Any:
        """Worker ``worker``'s gradient at ``step`` (from its own data shard)."""

    def make_accumulator(self, shared_name: str | None = None) -> Any:
        """A new accumulator for this model's gradients (reduction_type SUM).

        With ``shared_name``, the accumulator of that name (other processes
        reach it on the distributed table).
        """

    def apply(self, accumulator: Any, gradient: Any, local_step: int) -> None:
        """Push ``gradient``, computed at ``local_step``, into ``accumulator``."""

    def take(self, accumulator: Any, num_required: int, timeout: float) -> tuple[Any, int]:
        """Take at least ``num_required`` gradients: (their sum, how many there were)."""

    def unpack(self, taken: Any) -> tuple[Any, int]:
        """What ``take_grad`` returned, as (the gradients' sum, how many there were)."""

    def update(self, params: Array, total: Any, count: int) -> None:
        """Move ``params`` in place by ``-learning_rate`` times the mean gradient."""


def simulate_compute(seed: int, worker: int, step: int, compute_ms: float) -> None:
    """Sleep as long as worker ``worker``'s gradient at ``step`` takes to compute.

    Worker ``i`` takes ``1 + i/2`` times ``compute_ms`` milliseconds, with seeded jitter.
    """
    if compute_ms:
        jitter = np.random.default_rng([seed, worker, step, 1]).uniform(0.7, 1.3)
        time.sleep(compute_ms / 1000.0 * (1 + worker / 2) * jitter)


def _batch_rng(seed: int, worker: int, step: int) -> np.random.Generator:
    return np.random.default_rng([seed, worker, step])


@dataclass
class LinearRegression:
    """Least squares on ``features`` inputs; each worker holds its own shard."""

    seed: int
    workers: int
    features: int = 8
    shard_size: int = 256
    batch_size: int = 32
    learning_rate: float = 0.1
    name: str = "dense"

    def __post_init__(self) -> None:
        rng = np.random.default_rng(self.seed)
        self.true_weights = rng.normal(size=self.features).astype(np.float32)
        self.shards: list[tuple[Array, Array]] = []
        for _ in range(self.workers):
            x = rng.normal(size=(self.shard_size, self.features)).astype(np.float32)
            noise = 0.01 * rng.normal(size=self.shard_size).astype(np.float32)
            self.shards.append((x, x @ self.true_weights + noise))
        self.description = (
            f"linear regression, {self.features} weights, "
            "gradients through a ConditionalAccumulator"
        )

    def initial_params(self) -> Array:
        return np.zeros(self.features, np.float32)

    def loss(self, params: Array) -> float:
        return float(np.mean([np.mean((x @ params - y) ** 2) for x, y in self.shards]))

    def gradient(self, params: Array, worker: int, step: int) -> Array:
        x, y = self.shards[worker]
        rows = _batch_rng(self.seed, worker, step).choice(len(y), self.batch_size, replace=False)
        xb, yb = x[rows], y[rows]
        gradient = np.empty(self.features + 1, np.float32)
        gradient[:-1] = 2.0 * xb.T @ (xb @ params - yb) / self.batch_size
        gradient[-1] = 1.0  # the count
        return gradient

    def make_accumulator(
        self, shared_name: str | None = None
    ) -> tfa.compat.v1.ConditionalAccumulator:
        return tfa.compat.v1.ConditionalAccumulator(
            tfa.float32,
            shape=[self.features + 1],
            shared_name=shared_name,
            name="gradients",
            reduction_type="SUM",
        )

    def apply(self, accumulator: Any, gradient: Any, local_step: int) -> None:
        accumulator.apply_grad(gradient, local_step=local_step)

    def take(self, accumulator: Any, num_required: int, timeout: float) -> tuple[Array, int]:
        return self.unpack(accumulator.take_grad(num_required, timeout=timeout))

    def unpack(self, taken: Any) -> tuple[Array, int]:
        total = np.asarray(taken)
        return total[:-1], int(round(float(total[-1])))

    def update(self, params: Array, total: Array, count: int) -> None:
        params -= (self.learning_rate / count) * total


@dataclass
class EmbeddingFit:
    """An embedding table fitted to per-token targets from Zipf-distributed tokens.

    Each worker's mini-batch is ``batch_size`` token ids drawn with Zipf
    frequencies, so a gradient touches a few dozen rows of the table: those of
    the distinct ids drawn. The loss is the squared distance to the targets,
    weighted by token frequency.
    """

    seed: int
    workers: int
    vocabulary: int = 1000
    dim: int = 16
    batch_size: int = 64
    learning_rate: float = 0.4
    name: str = "sparse"

    def __post_init__(self) -> None:
        rng = np.random.default_rng(self.seed)
        self.targets = rng.normal(size=(self.vocabulary, self.dim)).astype(np.float32)
        weights = 1.0 / np.arange(1, self.vocabulary + 1)
        self.frequency = weights / weights.sum()
        self.count_row = self.vocabulary  # the extra row that counts gradients
        self.description = (
            f"embedding table [{self.vocabulary}, {self.dim}], "
            "gradients through a SparseConditionalAccumulator"
        )

    def initial_params(self) -> Array:
        return np.zeros((self.vocabulary, self.dim), np.float32)

    def loss(self, params: Array) -> float:
        squared = np.sum((params - self.targets) ** 2, axis=1)
        return float(self.frequency @ squared)

    def gradient(self, params: Array, worker: int, step: int) -> tfa.IndexedSlices:
        rng = _batch_rng(self.seed, worker, step)
        ids = np.unique(rng.choice(self.vocabulary, self.batch_size, p=self.frequency))
        rows = 2.0 * (params[ids] - self.targets[ids])
        return tfa.IndexedSlices(
            values=np.concatenate([rows, np.ones((1, self.dim), np.float32)]),
            indices=np.append(ids, self.count_row),
            dense_shape=np.array([self.vocabulary + 1, self.dim]),
        )

    def make_accumulator(
        self, shared_name: str | None = None
    ) -> tfa.compat.v1.SparseConditionalAccumulator:
        return tfa.compat.v1.SparseConditionalAccumulator(
            tfa.float32,
            shape=[self.vocabulary + 1, self.dim],
            shared_name=shared_name,
            name="embedding_gradients",
            reduction_type="SUM",
        )

    def apply(self, accumulator: Any, gradient: Any, local_step: int) -> None:
        accumulator.apply_indexed_slices_grad(gradient, local_step=local_step)

    def take(
        self, accumulator: Any, num_required: int, timeout: float
    ) -> tuple[tuple[Array, Array], int]:
        return self.unpack(accumulator.take_grad(num_required, timeout=timeout))

    def unpack(self, taken: Any) -> tuple[tuple[Array, Array], int]:
        indices, values = np.asarray(taken[0]), np.asarray(taken[1])
        # the indices come back sorted, so the count row is the last one
        count = int(round(float(values[-1, 0])))
        return (indices[:-1], values[:-1]), count

    def update(self, params: Array, total: tuple[Array, Array], count: int) -> None:
        indices, values = total
        params[indices] -= (self.learning_rate / count) * values


MODELS: dict[str, type[LinearRegression] | type[EmbeddingFit]] = {
    "dense": LinearRegression,
    "sparse": EmbeddingFit,
}
