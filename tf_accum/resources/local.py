"""The in-process resource table."""

from __future__ import annotations

import itertools
import os
import weakref
from collections.abc import Callable
from typing import Any

from tf_accum.accumulators.base import AccumulatorBase
from tf_accum.accumulators.dense import DenseAccumulator
from tf_accum.accumulators.sparse import SparseAccumulator
from tf_accum.accumulators.spec import AccumulatorSpec
from tf_accum.resources.errors import (
    DEFAULT_CONTAINER,
    missing_resource_error,
    shared_queue_conflict,
    shared_spec_conflict,
)
from tf_accum.resources.table import REMEMBERED_DESTROYED, HandleTable

__all__ = [
    "REMEMBERED_DESTROYED",
    "LocalResourceTable",
    "new_accumulator",
    "next_handle",
    "private_name",
]

# Private names count up across the process, like TensorFlow's "_<k>_<name>".
_private_names = itertools.count()
# Handles are unique across every table of the process, so a handle kept from
# one table can never name an accumulator of another.
_handles = itertools.count(1)


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


# Every in-process table, so that a forked child can empty them all.
_tables: weakref.WeakSet[LocalResourceTable] = weakref.WeakSet()


class LocalResourceTable(HandleTable[AccumulatorBase[Any]]):
    """Accumulators in this process, shared between its threads.

    Invariant guarded by ``_lock`` (besides ``HandleTable``'s): ``_by_name``
    maps each live shared (container, name) to its handle.

    After ``os.fork()`` the child's copy of every table is empty (see
    :func:`_empty_after_fork`): the parent's accumulators stay the parent's.
    """

    def __init__(self) -> None:
        super().__init__()
        _tables.add(self)

    def _reset(self) -> None:
        super()._reset()
        self._by_name: dict[tuple[str, str], int] = {}
        self._shared_key: dict[int, tuple[str, str]] = {}

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

    def create_queue(
        self,
        container: str,
        shared_name: str,
        private_name_base: str,
        spec: Any,
        make: Callable[[str], Any],
    ) -> int:
        container = container or DEFAULT_CONTAINER
        if self._doomed:
            self._reap()
        with self._lock:
            if shared_name:
                existing = self._by_name.get((container, shared_name))
                if existing is not None:
                    found = self._live[existing]
                    if found.spec != spec:
                        raise shared_queue_conflict(shared_name, found.spec, spec)
                    return existing
                name = shared_name
            else:
                name = private_name(private_name_base)
            handle = next_handle()
            # a queue is held as the accumulators are: a spec, a label, close() to destroy
            self._live[handle] = make(f"{container}/{name}")
            if shared_name:
                self._by_name[(container, shared_name)] = handle
                self._shared_key[handle] = (container, shared_name)
            return handle

    def _destroy(self, handle: int, ignore_lookup_error: bool) -> None:
        with self._lock:
            found = self._forget_locked(handle)
            if found is None:
                if ignore_lookup_error:
                    return
                raise missing_resource_error(self._label_of(handle), type_known=False)
            key = self._shared_key.pop(handle, None)
            if key is not None:
                del self._by_name[key]
        # Wake waiting takes outside the table lock: close() takes the accumulator's.
        found.close()


def _empty_after_fork() -> None:
    """Give a forked child empty tables with fresh locks.

    The child has one thread: locks other threads held at the fork stay held
    forever in its copy, and takes that were waiting belong to threads that do
    not exist there. A gradient the child applies to its copy of an accumulator
    could never reach the parent's; so the child starts empty, and every handle
    inherited from the parent is NotFoundError there. Handles keep counting
    from the parent's, so an inherited handle never names a child's accumulator.
    """
    for table in list(_tables):
        table._forget_after_fork()


if hasattr(os, "register_at_fork"):  # not on Windows
    os.register_at_fork(after_in_child=_empty_after_fork)
