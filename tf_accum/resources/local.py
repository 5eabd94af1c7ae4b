"""The in-process resource table."""

from __future__ import annotations

import collections
import itertools
import threading
from collections.abc import Callable
from typing import Any

from tf_accum import errors
from tf_accum.accumulators.base import AccumulatorBase, AccumulatorSpec, missing_resource_error
from tf_accum.resources.table import ResourceTable

DEFAULT_CONTAINER = "localhost"

# Private names count up across the process, like TensorFlow's "_<k>_<name>".
_private_names = itertools.count()
# Handles are unique across every table of the process, so a handle kept from
# one table can never name an accumulator of another.
_handles = itertools.count(1)


class LocalResourceTable(ResourceTable):
    """Accumulators in this process, shared between its threads.

    Invariant guarded by ``_lock``: ``_live`` holds exactly the accumulators
    not yet destroyed; ``_by_name`` maps each live shared (container, name) to
    its handle; ``_labels`` remembers the label of every handle ever issued, so
    that a destroyed one gets a NotFoundError that names it.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._live: dict[int, AccumulatorBase[Any]] = {}
        self._by_name: dict[tuple[str, str], int] = {}
        self._labels: dict[int, str] = {}
        self._shared_key: dict[int, tuple[str, str]] = {}
        # Handles whose owners were garbage-collected; deque appends are atomic,
        # so finalizers can queue them without taking any lock.
        self._doomed: collections.deque[int] = collections.deque()

    def create(
        self,
        container: str,
        shared_name: str,
        private_name: str,
        spec: AccumulatorSpec,
        factory: Callable[[AccumulatorSpec, str], AccumulatorBase[Any]],
    ) -> int:
        container = container or DEFAULT_CONTAINER
        if self._doomed:
            self._reap()
        with self._lock:
            if shared_name:
                key = (container, shared_name)
                existing = self._by_name.get(key)
                if existing is not None:
                    found = self._live[existing]
                    if found.spec != spec:
                        raise errors.InvalidArgumentError(
                            None,
                            None,
                            f"Accumulator {container}/{shared_name} already exists as "
                            f"{found.spec.describe()}; requested {spec.describe()}. An "
                            "accumulator shared by name must be created with the same "
                            "kind, dtype, shape and reduction_type.",
                        )
                    return existing
                name = shared_name
            else:
                name = f"_{next(_private_names)}_{private_name}"
            handle = next(_handles)
            label = f"{container}/{name}"
            self._live[handle] = factory(spec, label)
            self._labels[handle] = label
            if shared_name:
                self._by_name[(container, shared_name)] = handle
                self._shared_key[handle] = (container, shared_name)
            return handle

    def lookup(self, handle: int) -> AccumulatorBase[Any]:
        if self._doomed:
            self._reap()
        found = self._live.get(handle)  # a dict read is atomic; no lock needed
        if found is None:
            raise missing_resource_error(self._label_of(handle))
        return found

    def _label_of(self, handle: int) -> str:
        return self._labels.get(handle, f"{DEFAULT_CONTAINER}/<handle {handle}>")

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

    def _destroy(self, handle: int, ignore_lookup_error: bool) -> None:
        with self._lock:
            found = self._live.pop(handle, None)
            if found is None:
                if ignore_lookup_error:
                    return
                raise missing_resource_error(self._label_of(handle), type_known=False)
            key = self._shared_key.pop(handle, None)
            if key is not None:
                del self._by_name[key]
        # Wake waiting takes outside the table lock: close() takes the accumulator's.
        found.close()

    def live_handles(self) -> list[int]:
        """The handles not yet destroyed (for tests and diagnostics)."""
        if self._doomed:
            self._reap()
        with self._lock:
            return list(self._live)
