"""The interface every resource table implements, and the process's current table."""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from tf_accum.accumulators.base import AccumulatorBase, AccumulatorSpec


class ResourceTable(ABC):
    """Maps integer handles to accumulators and (container, shared_name) to handles.

    Handles are never reused, so a stale handle can only ever be NotFound, never
    somebody else's accumulator.
    """

    @abstractmethod
    def create(
        self,
        container: str,
        shared_name: str,
        private_name: str,
        spec: AccumulatorSpec,
        factory: Callable[[AccumulatorSpec, str], AccumulatorBase[Any]],
    ) -> int:
        """Create an accumulator, or find the live one shared under the same name.

        Args:
            container: the container ("" means the default, "localhost").
            shared_name: "" makes a private accumulator that nothing else finds.
            private_name: the base of a private accumulator's generated name.
            spec: the kind, dtype, declared shape and reduction wanted.
            factory: builds the accumulator from the spec and its label.

        Returns:
            The handle.

        Raises:
            InvalidArgumentError: a live accumulator with that name has another spec.
        """

    @abstractmethod
    def lookup(self, handle: int) -> AccumulatorBase[Any]:
        """The accumulator of a handle.

        Raises:
            NotFoundError: the handle was destroyed or never issued.
        """

    @abstractmethod
    def destroy_soon(self, handle: int) -> None:
        """Destroy ``handle`` at the table's next operation; never blocks.

        Safe to call from a finalizer, which the garbage collector may run in
        the middle of any operation, with any lock held.
        """

    @abstractmethod
    def destroy(self, handle: int, ignore_lookup_error: bool = True) -> None:
        """Destroy an accumulator: waiting takes fail with CancelledError.

        Raises:
            NotFoundError: the handle is not live and ``ignore_lookup_error`` is False.
        """


_current: ResourceTable | None = None
_current_lock = threading.Lock()


def current_table() -> ResourceTable:
    """The table the raw ops use (an in-process one unless another was set)."""
    table = _current
    if table is None:
        with _current_lock:
            if _current is None:
                from tf_accum.resources.local import LocalResourceTable

                set_table(LocalResourceTable())
            table = _current
    assert table is not None
    return table


def set_table(table: ResourceTable) -> ResourceTable | None:
    """Install ``table`` for the raw ops; returns the one it replaces."""
    global _current
    previous, _current = _current, table
    return previous
