"""What a run of the synchronous-replicas job produces: one record per step."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class StepRecord:
    """One step of the chief: its take and the update it made."""

    step: int  # the global step the update produced (1 for the first take)
    loss: float  # after the update
    accepted: int  # gradients the take consumed
    stale: int  # gradients found dropped as stale since the previous take
    wait_s: float  # how long the take blocked


@dataclass
class RunResult:
    """A finished run: its settings and one record per step."""

    workers: int
    replicas_to_aggregate: int
    model_description: str
    initial_loss: float
    records: list[StepRecord]
    # gradients the workers applied (one refused because the chief had closed
    # the accumulator at the end counts too, as dropped)
    applied: int
    seconds: float
    worker_kind: str = "threads"  # how the workers ran: threads, processes (Ray), ...
    # what the chief recovered from (a lost accumulator host), in order
    recoveries: list[str] = field(default_factory=list)
    worker_nodes: int = 0  # the nodes the worker actors ran on (0: not actors)

    @property
    def accepted(self) -> int:
        return sum(r.accepted for r in self.records)

    @property
    def stale(self) -> int:
        return sum(r.stale for r in self.records)

    @property
    def unsettled(self) -> int:
        """Gradients applied after the last take: dropped as stale, refused by the
        closed accumulator, or left in it."""
        return self.applied - self.accepted - self.stale

    @property
    def final_loss(self) -> float:
        return self.records[-1].loss
