"""The in-process resource table."""

from __future__ import annotations

import collections
import itertools
import threading
from typing import Any

from tf_accum.accumulators.base import AccumulatorBase
from tf_accum.accumulators.dense import DenseAccumulator
from tf_accum.accumulators.protocol import Accumulator
from tf_accum.accumulators.sparse import SparseAccumulator
from tf_accum.accumulators.spec import AccumulatorSpec
from tf_accum.resources.errors import (
    DEFAULT_CONTAINER,
    missing_resource_error,
    shared_spec_conflict,
    unknown_handle_label,
)
from tf_accum.resources.table import ResourceTable

# Private names count up across the process, like TensorFlow's "_<k>_<name>".
_private_names = itertools.count()
# Handles are unique across every table of the process, so a handle kept from
# one table can never name an accumulator of another.
_handles = itertools.count(1)

# How many destroyed handles keep their label for NotFound messages; older
# ones print as "<handle N>", so nothing grows with the accumulators ever made.
REMEMBERED_DESTROYED = 4096


def new_accumulator(spec: AccumulatorSpec, label: str) -> AccumulatorBase[Any]:
    """An in-process accumulator of ``spec``'s kind."""
    if spec.kind == "sparse":
        return SparseAccumulator(spec, label)
    return DenseAccumulator(spec, label)


def next_handle() -> int:
    """A handle no table of this process has issued."""
    return next(_handles)


def private_name(base: str) -> str:
    """The generated name of a private accumulator, unique in the process."""
    return f"_{next(_private_names)}_{base}"


class LocalResourceTable(ResourceTable):
    """Accumulators in this process, shared between its threads.

    Invariant guarded by ``_lock``: ``_live`` holds exactly the accumulators
    not yet destroyed; ``_by_name`` maps each live shared (container, name) to
    its handle; ``_gone`` keeps the labels of the most recently destroyed
    handles, so that using one gets a NotFoundError that names it.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._live: dict[int, AccumulatorBase[Any]] = {}
        self._by_name: dict[tuple[str, str], int] = {}
        self._shared_key: dict[int, tuple[str, str]] = {}
        self._gone: collections.OrderedDict[int, str] = collections.OrderedDict()
        # Handles whose owners were garbage-collected; deque appends are atomic,
        # so finalizers can queue them without taking any lock.
        self._doomed: collections.deque[int] = collections.deque()

    def create(
        self, container: str, shared_name: str, private_name_base: str, spec: AccumulatorSpec
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
                        raise shared_spec_conflict(f"{container}/{shared_name}", found.spec, spec)
                    return existing
                name = shared_name
            else:
                name = private_name(private_name_base)
            handle = next_handle()
            self._live[handle] = new_accumulator(spec, f"{container}/{name}")
            if shared_name:
                self._by_name[(container, shared_name)] = handle
                self._shared_key[handle] = (container, shared_name)
            return handle

    def lookup(self, handle: int) -> Accumulator:
        if self._doomed:
            self._reap()
        # A dict read is atomic under the GIL: the hot path takes no lock.
        found = self._live.get(handle)
        if found is None:
            raise missing_resource_error(self._label_of(handle))
        return found

    def _label_of(self, handle: int) -> str:
        return self._gone.get(handle) or unknown_handle_label(handle)

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
            self._gone[handle] = found.label
            if len(self._gone) > REMEMBERED_DESTROYED:
                self._gone.popitem(last=False)
        # Wake waiting takes outside the table lock: close() takes the accumulator's.
        found.close()

    def live_handles(self) -> list[int]:
        if self._doomed:
            self._reap()
        with self._lock:
            return list(self._live)
