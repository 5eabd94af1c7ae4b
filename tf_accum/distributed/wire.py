"""What the host actor sends back instead of raising.

Errors travel as values: a Ray task that raises reaches its caller wrapped in
a Ray exception class (with the actor's traceback), and a user must only ever
see ``tf_accum.errors`` classes. A failure names its error class and carries
the message; a few kinds need the caller's knowledge to be spelled out.
"""

from __future__ import annotations

from dataclasses import dataclass

from tf_accum import errors

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
