"""The messages between a process and a host actor: requests, outcomes, failures.

Errors travel as values: a Ray task that raises reaches its caller wrapped in
a Ray exception class (with the actor's traceback), and a user must only ever
see ``tf_accum.errors`` classes. A failure names its error class and carries
the message; a few kinds need the caller's knowledge to be spelled out.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

from tf_accum import errors
from tf_accum.distributed.bulk import Bulk

# Failure kinds that are not an error class name.
MISSING = "missing"  # the accumulator was destroyed (by any process)
RESTARTED = "restarted"  # the host restarted since the handle was made: its state is lost
WITHDRAWN = "withdrawn"  # the take was withdrawn on its caller's request

# The actor is named after the container, in a namespace of its own, so every
# process attached to the cluster finds the same one (a detached actor made
# without a namespace is unreachable from other jobs).
NAMESPACE = "tf_accum"


def host_name(container: str) -> str:
    """The Ray actor name of the host of ``container``."""
    return f"tf_accum/{container}"


@dataclass(frozen=True)
class Failure:
    kind: str
    message: str = ""

    @classmethod
    def of(cls, error: errors.OpError) -> Failure:
        return cls(type(error).__name__, error.message)

    def error(self) -> errors.OpError:
        """The ``tf_accum.errors`` exception of an error-class failure."""
        error_class = getattr(errors, self.kind, None)
        if not (isinstance(error_class, type) and issubclass(error_class, errors.OpError)):
            error_class = errors.InternalError
        found: errors.OpError = error_class(None, None, self.message)  # type: ignore[call-arg]
        return found


CANCELLED = Failure("CancelledError", "TakeGrad operation was cancelled")
TIMED_OUT = Failure("DeadlineExceededError", "Timed out waiting for notification")


class Request(NamedTuple):
    """A batch of steps for a host to run (one ``Session.run``'s ops on one task).

    ``steps`` is the steps and the indices of those whose outputs the answer
    leaves out, pickled (a session sends the same ones every run, so the host
    decodes them once); their SLOT sources read ``values``. ``life`` is the
    caller's life token, sent with its first request only; ``remaining`` the
    seconds left of the run's deadline (None: none); ``answer_pieces`` how many
    results the caller asked Ray for (above 1, the answer comes pickled and
    split into that many).

    Reads ahead (see tf_accum.graph.remote_run): ``read_ahead`` is the pickled
    steps of a request of variable reads to run once the steps have run, whose
    outputs the answer carries for the caller's next run; ``reads_from`` names
    the earlier request whose reads ahead this request's run used: the host runs
    nothing (``ReadsChanged``) unless every variable they read still holds the
    value they read.

    ``room``: the caller's shared-memory buffer (see tf_accum.distributed.bulk),
    when it shares the host's machine: the values that are descriptors are in
    it, and the answer's large outputs go into it from the room's offset on.
    """

    instance: str
    session: str
    caller: str
    life: list[Any] | None
    request_id: str
    steps: bytes
    values: list[Any]
    remaining: float | None
    answer_pieces: int
    read_ahead: bytes | None = None
    reads_from: str | None = None
    room: Bulk | None = None


class Done(NamedTuple):
    """Every step ran: its outputs, per step (and those of the reads ahead, if asked)."""

    outputs: list[tuple[Any, ...]]
    read_ahead: list[tuple[Any, ...]] | None = None


def answer_values(done: Done) -> Iterator[Any]:
    """Every value a ``Done`` answer carries."""
    for outputs in done.outputs:
        yield from outputs
    for outputs in done.read_ahead or ():
        yield from outputs


class ReadsChanged(NamedTuple):
    """Nothing ran: a variable that the reads ahead of ``reads_from`` read has changed
    since (or the host no longer holds them)."""

    reads_from: str


class StepFailed(NamedTuple):
    """Step ``step`` failed (the steps after it did not run)."""

    step: int
    failure: Failure


class StepRefused(NamedTuple):
    """Step ``step`` refused its arguments with a Python ``TypeError`` or ``ValueError``."""

    step: int
    error_class: str
    message: str

    def error(self) -> TypeError | ValueError:
        return (
            TypeError(self.message) if self.error_class == "TypeError" else ValueError(self.message)
        )


# What a host answers a Request with.
Outcome = Done | StepFailed | StepRefused | ReadsChanged


class Joined(NamedTuple):
    """A TF1 task's host accepted a process: the host's incarnation and where it and
    the process that owns it (whose end ends it) run."""

    instance: str
    pid: int
    node: str
    owner_pid: int
    owner_node: str


class SpecRefused(NamedTuple):
    """A TF1 task's host refused a process whose ClusterSpec cannot be its job's."""

    reason: str
    host_spec: str


class TaskTaken(NamedTuple):
    """A TF1 task's host refused a process: another live one (``where``) serves the task."""

    where: str


# What a TF1 task's host answers a process that joins it.
JoinAnswer = Joined | SpecRefused | TaskTaken
