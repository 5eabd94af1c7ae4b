"""TensorFlow's error classes, with the same names, hierarchy and error codes.

Every error an accumulator op raises for bad input or a failed wait is one of
these, so code that catches ``tf.errors.InvalidArgumentError`` keeps working
after switching the import to ``tf_accum.errors``.
"""

from __future__ import annotations

from typing import Any

OK = 0
CANCELLED = 1
UNKNOWN = 2
INVALID_ARGUMENT = 3
DEADLINE_EXCEEDED = 4
NOT_FOUND = 5
ALREADY_EXISTS = 6
PERMISSION_DENIED = 7
RESOURCE_EXHAUSTED = 8
FAILED_PRECONDITION = 9
ABORTED = 10
OUT_OF_RANGE = 11
UNIMPLEMENTED = 12
INTERNAL = 13
UNAVAILABLE = 14
DATA_LOSS = 15
UNAUTHENTICATED = 16


class OpError(Exception):
    """The base of every error raised by an op.

    Args:
        node_def: kept for TensorFlow compatibility; tf_accum has no graph, so
            it is normally None.
        op: likewise; normally None.
        message: what went wrong and what was expected.
        error_code: one of the integer codes of this module.
    """

    def __init__(self, node_def: Any, op: Any, message: str, error_code: int, *args: Any) -> None:
        super().__init__(message, *args)
        self._node_def = node_def
        self._op = op
        self._message = message
        self._error_code = error_code

    @property
    def message(self) -> str:
        """The error message."""
        return self._message

    @property
    def op(self) -> Any:
        """The op that failed (None: tf_accum runs ops eagerly)."""
        return self._op

    @property
    def node_def(self) -> Any:
        """The node definition of the failed op (None in tf_accum)."""
        return self._node_def

    @property
    def error_code(self) -> int:
        """The integer error code, one of this module's constants."""
        return self._error_code

    def __str__(self) -> str:
        return self._message

    def __reduce__(self) -> tuple[Any, ...]:
        # Subclasses take (node_def, op, message); keep them picklable so that
        # errors can cross process boundaries (a distributed backend needs it).
        if type(self) is OpError:
            return (OpError, (self._node_def, self._op, self._message, self._error_code))
        return (type(self), (self._node_def, self._op, self._message))


class _CodedError(OpError):
    """An OpError whose code is fixed by its class, as TensorFlow's subclasses are."""

    code: int = UNKNOWN

    def __init__(self, node_def: Any, op: Any, message: str, *args: Any) -> None:
        super().__init__(node_def, op, message, self.code, *args)


class CancelledError(_CodedError):
    """An operation was cancelled."""

    code = CANCELLED


class UnknownError(_CodedError):
    """An unknown error."""

    code = UNKNOWN


class InvalidArgumentError(_CodedError):
    """An op received an invalid argument."""

    code = INVALID_ARGUMENT


class DeadlineExceededError(_CodedError):
    """A deadline expired before the op completed."""

    code = DEADLINE_EXCEEDED


class NotFoundError(_CodedError):
    """A requested resource was not found."""

    code = NOT_FOUND


class AlreadyExistsError(_CodedError):
    """An entity already exists."""

    code = ALREADY_EXISTS


class PermissionDeniedError(_CodedError):
    """The caller may not run the op."""

    code = PERMISSION_DENIED


class ResourceExhaustedError(_CodedError):
    """Some resource has been exhausted."""

    code = RESOURCE_EXHAUSTED


class FailedPreconditionError(_CodedError):
    """The system is not in a state to run the op."""

    code = FAILED_PRECONDITION


class AbortedError(_CodedError):
    """The operation was aborted."""

    code = ABORTED


class OutOfRangeError(_CodedError):
    """An index or value is out of range."""

    code = OUT_OF_RANGE


class UnimplementedError(_CodedError):
    """The op is not implemented."""

    code = UNIMPLEMENTED


class InternalError(_CodedError):
    """An internal invariant was broken."""

    code = INTERNAL


class UnavailableError(_CodedError):
    """The runtime is unavailable."""

    code = UNAVAILABLE


class DataLossError(_CodedError):
    """Unrecoverable data loss."""

    code = DATA_LOSS


class UnauthenticatedError(_CodedError):
    """The request has no valid credentials."""

    code = UNAUTHENTICATED


__all__ = [
    "OpError",
    "CancelledError",
    "UnknownError",
    "InvalidArgumentError",
    "DeadlineExceededError",
    "NotFoundError",
    "AlreadyExistsError",
    "PermissionDeniedError",
    "ResourceExhaustedError",
    "FailedPreconditionError",
    "AbortedError",
    "OutOfRangeError",
    "UnimplementedError",
    "InternalError",
    "UnavailableError",
    "DataLossError",
    "UnauthenticatedError",
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
]
