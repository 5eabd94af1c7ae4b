"""The main job's settings, as its command line gives them (``python -m tf_accum --help``)."""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_PLOT = "sync_replicas.png"


@dataclass(frozen=True)
class JobConfig:
    """Everything a run depends on (the command-line options)."""

    workers: int = 4
    replicas_to_aggregate: int = 3
    steps: int = 100
    sparse: bool = False
    seed: int = 0
    compute_ms: float = 2.0
    plot: str | None = DEFAULT_PLOT
    quiet: bool = False
    processes: int = 0  # workers as processes on Ray (0: threads)
    address: str = "local"  # the Ray cluster of --processes
    graph: bool = False  # the TF1 graph-mode program (tf_accum.compat.v1)
    tf1_cluster: bool = False  # the TF1 program as a cluster, one process per task, on Ray
    take_timeout: float = 30.0  # seconds; only reached when something is broken

    @property
    def worker_kind(self) -> str:
        """How the workers run, as the summary says it."""
        if self.tf1_cluster:
            return "processes (TF1 cluster on Ray)"
        if self.processes:
            # on a cluster this process did not start, the workers are actors on its nodes
            return "processes (Ray)" if self.address == "local" else "Ray actors"
        return "threads (TF1 graph)" if self.graph else "threads"

    def check(self) -> None:
        """Raises ValueError for settings that cannot train."""
        if self.processes < 0:
            raise ValueError(f"--processes must be at least 1, got {self.processes}")
        if self.workers < 1:
            raise ValueError(f"--workers must be at least 1, got {self.workers}")
        if not 1 <= self.replicas_to_aggregate <= self.workers:
            raise ValueError(
                "--replicas-to-aggregate must be between 1 and --workers "
                f"({self.workers}), got {self.replicas_to_aggregate}: the chief would wait "
                "for more gradients than there are workers"
            )
        if self.steps < 1:
            raise ValueError(f"--steps must be at least 1, got {self.steps}")
        if self.processes and self.workers != self.processes:
            raise ValueError("--processes N sets the number of workers: leave --workers out")
        if self.processes and self.graph:
            raise ValueError("--processes and --graph cannot be combined")
        if self.tf1_cluster and (self.processes or self.graph):
            raise ValueError("--tf1-cluster cannot be combined with --processes or --graph")
        if self.compute_ms < 0:
            raise ValueError(f"--compute-ms must not be negative, got {self.compute_ms}")
