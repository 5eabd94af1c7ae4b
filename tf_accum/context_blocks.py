"""Setting a context variable for the length of a ``with`` block.

A class rather than a generator-based context manager: ``Session.run``
enters two per run, and a generator's machinery costs several times more.
"""

from __future__ import annotations

import contextvars
from typing import Any, Generic, TypeVar

Value = TypeVar("Value")


class ContextBlock(Generic[Value]):
    """``with ContextBlock(variable, value):`` sets ``variable`` to ``value`` in
    the block (and in the threads started there with its context), then puts
    back what was there. Entering gives ``value``."""

    __slots__ = ("_variable", "_value", "_token")

    def __init__(self, variable: contextvars.ContextVar[Any], value: Value) -> None:
        self._variable = variable
        self._value = value

    def __enter__(self) -> Value:
        self._token = self._variable.set(self._value)
        return self._value

    def __exit__(self, *exc: object) -> None:
        self._variable.reset(self._token)
