"""The interface every resource table implements."""

from __future__ import annotations

import collections
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from tf_accum import errors
from tf_accum.accumulators.protocol import Accumulator
from tf_accum.accumulators.spec import AccumulatorSpec
from tf_accum.resources.errors import missing_resource_error, unknown_handle_label

# How many destroyed handles keep their label for NotFound messages; older
# ones print as "<handle N>", so nothing grows with the accumulators ever made.
REMEMBERED_DESTROYED = 4096

Held = TypeVar("Held", bound=Accumulator)


class ResourceTable(ABC):
    """Maps integer handles to accumulators and (container, shared_name) to handles.

    A table creates accumulators from their spec alone, so it may hold them
    anywhere (in this process, or in another one). Handles are never reused,
    so a stale handle can only ever be NotFound, never somebody else's
    accumulator. Every method is safe to call from many threads at once.
    """

    @abstractmethod
    def create(
        self, container: str, shared_name: str, private_name: str, spec: AccumulatorSpec
    ) -> int:
        """Create an accumulator, or find the live one shared under the same name.

        Args:
            container: the container ("" means the default, "localhost").
            shared_name: "" makes a private accumulator that nothing else finds.
            private_name: the base of a private accumulator's generated name.
            spec: the kind, dtype, declared shape and reduction wanted.

        Returns:
            The handle.

        Raises:
            InvalidArgumentError: a live accumulator with that name has another spec.
        """

    def create_queue(
        self,
        container: str,
        shared_name: str,
        private_name: str,
        spec: Any,
        make: Callable[[str], Any],
    ) -> int:
        """Create a queue with ``make(label)``, or find the live one shared
        under the same name (``spec`` must then equal its ``spec``).

        Raises:
            InvalidArgumentError: a live resource with that name has another spec.
            UnimplementedError: the table keeps no queues (only in-process tables do).
        """
        raise errors.UnimplementedError(
            None, None, f"{type(self).__name__} holds accumulators only; queues live in process"
        )

    @abstractmethod
    def lookup(self, handle: int) -> Accumulator:
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

    @abstractmethod
    def live_handles(self) -> list[int]:
        """The handles not yet destroyed."""

    def close(self) -> None:
        """Destroy every accumulator of the table (a closing session's resources)."""
        for handle in self.live_handles():
            self.destroy(handle, ignore_lookup_error=True)


class HandleTable(ResourceTable, Generic[Held]):
    """What every table does with handles: lookups, labels of destroyed ones,
    and destroys queued by finalizers (run at the table's next operation).

    Subclasses create accumulators and implement ``_destroy``. Invariant
    guarded by ``_lock``: ``_live`` holds exactly the handles not yet
    destroyed; ``_gone`` keeps the labels of the most recently destroyed.
    """

    def __init__(self) -> None:
        self._gone: collections.OrderedDict[int, str] = collections.OrderedDict()
        self._reset()

    def _reset(self) -> None:
        """A fresh lock and no handles (a subclass resets its own state too)."""
        self._lock = threading.Lock()
        self._live: dict[int, Held] = {}
        # Handles whose owners were garbage-collected; deque appends are atomic,
        # so finalizers can queue them without taking any lock.
        self._doomed: collections.deque[int] = collections.deque()

    def _forget_after_fork(self) -> None:
        """In a forked child: drop the parent's accumulators without touching their locks.

        Their handles stay named in NotFound messages, like destroyed ones.
        """
        for handle, found in self._live.items():
            self._gone[handle] = found.label
        while len(self._gone) > REMEMBERED_DESTROYED:
            self._gone.popitem(last=False)
        self._reset()

    @abstractmethod
    def _destroy(self, handle: int, ignore_lookup_error: bool) -> None:
        """``destroy`` proper (called outside every lock)."""

    def lookup(self, handle: int) -> Held:
        if self._doomed:
            self._reap()
        # A dict read is atomic under the GIL: the hot path takes no lock.
        found = self._live.get(handle)
        if found is None:
            raise missing_resource_error(self._label_of(handle))
        return found

    def _label_of(self, handle: int) -> str:
        return self._gone.get(handle) or unknown_handle_label(handle)

    def _forget_locked(self, handle: int) -> Held | None:
        """Take ``handle`` out of ``_live``, remembering its label; None if it was not live."""
        found = self._live.pop(handle, None)
        if found is not None:
            self._gone[handle] = found.label
            if len(self._gone) > REMEMBERED_DESTROYED:
                self._gone.popitem(last=False)
        return found

    def destroy_soon(self, handle: int) -> None:
        self._doomed.append(handle)

    def _reap(self) -> None:
        """Destroy what finalizers queued (called outside every lock)."""
        while True:
            try:
                handle = self._doomed.popleft()
            except IndexError:
                return
            self._destroy(handle, ignore_lookup_error=True)

    def destroy(self, handle: int, ignore_lookup_error: bool = True) -> None:
        if self._doomed:
            self._reap()
        self._destroy(handle, ignore_lookup_error)

    def live_handles(self) -> list[int]:
        if self._doomed:
            self._reap()
        with self._lock:
            return list(self._live)
