"""The resource table whose accumulators live in Ray actors.

Handles are this process's integers; each maps to (container, entry) in the
container's host actor. Shared names are resolved by the host, so every
process attached to the cluster finds the same accumulator; a private one is
made in the host too, but only the process that made it holds a handle.
"""

from __future__ import annotations

import os
import threading
import uuid
import weakref
from typing import Any

from tf_accum.accumulators.spec import AccumulatorSpec
from tf_accum.distributed.connect import refuse_after_fork
from tf_accum.distributed.proxy import HostLink, RemoteAccumulator
from tf_accum.distributed.wire import Failure, host_name
from tf_accum.resources.errors import DEFAULT_CONTAINER, missing_resource_error
from tf_accum.resources.local import next_handle, private_name
from tf_accum.resources.table import HandleTable

_host_class: Any = None
_host_class_lock = threading.Lock()


def _remote_host_class() -> Any:
    global _host_class
    with _host_class_lock:
        if _host_class is None:
            import ray

            from tf_accum.distributed.actor import AccumulatorHost

            _host_class = ray.remote(AccumulatorHost)
        return _host_class


# Every Ray table of this process, so that a forked child can disown them all.
_tables: weakref.WeakSet[RayResourceTable] = weakref.WeakSet()


class RayResourceTable(HandleTable[RemoteAccumulator]):
    """Accumulators in Ray actors, one actor per container.

    Args:
        host_options: extra ``ActorClass.options`` for the host actors, e.g.
            ``{"resources": {"ps": 0.01}}`` to place them on the nodes that
            offer a custom ``ps`` resource. By default Ray places them; they
            use no CPU slot. Name, namespace and lifetime cannot be changed.

    Invariant guarded by ``_lock`` (besides ``HandleTable``'s): ``_by_name``
    maps a shared (container, name) to the live handle of the host entry it
    last resolved to.
    """

    def __init__(self, host_options: dict[str, Any] | None = None) -> None:
        super().__init__()
        self._host_options = dict(host_options or {})
        self._caller = uuid.uuid4().hex
        _tables.add(self)

    def _reset(self) -> None:
        super()._reset()
        self._links: dict[str, HostLink] = {}
        self._by_name: dict[tuple[str, str], int] = {}

    def _link(self, container: str) -> HostLink:
        with self._lock:
            link = self._links.get(container)
        if link is not None and not link.stale:
            return link
        import ray

        from tf_accum.distributed.placement import start_host

        actor, (instance, _pid, node) = start_host(
            _remote_host_class(),
            host_name(container),
            (container,),
            self._host_options,
            f"the accumulator host of container {container}",
        )
        same_machine = node == ray.get_runtime_context().get_node_id()
        link = HostLink(container, actor, instance, self._caller, same_machine)
        with self._lock:
            current = self._links.get(container)
            if current is not None and not current.stale and current.instance == instance:
                return current
            self._links[container] = link
        return link

    def create(
        self, container: str, shared_name: str, private_name_base: str, spec: AccumulatorSpec
    ) -> int:
        refuse_after_fork()
        container = container or DEFAULT_CONTAINER
        if self._doomed:
            self._reap()
        link = self._link(container)
        name = shared_name or private_name(private_name_base)
        outcome = link.call("create", shared_name, name, spec, self._caller, link.life)
        if type(outcome) is Failure:
            raise outcome.error()
        instance, entry_id = outcome
        with self._lock:
            if shared_name:
                existing = self._by_name.get((container, shared_name))
                if existing is not None:
                    found = self._live[existing]
                    if found.entry_id == entry_id and found.link.instance == instance:
                        return existing
            handle = next_handle()
            self._live[handle] = RemoteAccumulator(link, entry_id, spec, f"{container}/{name}")
            if shared_name:
                self._by_name[(container, shared_name)] = handle
            return handle

    def _destroy(self, handle: int, ignore_lookup_error: bool) -> None:
        with self._lock:
            found = self._forget_locked(handle)
            if found is not None:
                container, _, name = found.label.partition("/")
                if self._by_name.get((container, name)) == handle:
                    del self._by_name[(container, name)]
        # Outside the lock: the host call waits for an answer.
        destroyed = found is not None and found.destroy()
        if not destroyed and not ignore_lookup_error:
            raise missing_resource_error(self._label_of(handle), type_known=False)


def _disown_after_fork() -> None:
    """Empty every Ray table in a forked child.

    Ray's connection does not survive ``fork``: a call through the parent's
    would hang or crash the child. So inherited handles are NotFoundError there
    (as in-process), and making accumulators is refused (see
    ``refuse_after_fork``).
    """
    for table in list(_tables):
        table._forget_after_fork()


if hasattr(os, "register_at_fork"):  # not on Windows
    os.register_at_fork(after_in_child=_disown_after_fork)
