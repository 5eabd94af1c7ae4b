"""The interface every resource table implements."""

from __future__ import annotations

from abc import ABC, abstractmethod

from tf_accum.accumulators.protocol import Accumulator
from tf_accum.accumulators.spec import AccumulatorSpec


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
