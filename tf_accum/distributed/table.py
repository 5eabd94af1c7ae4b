"""The resource table whose accumulators live in Ray actors.

Handles are this process's integers; each maps to (container, entry) in one
of the container's host actors: one host, or K of them once the container is
placed (``place``), host ``sha256(shared_name) mod K`` for a shared name.
Shared names are resolved by the host, so every process attached to the
cluster finds the same accumulator; a private one is made in a host too (round
robin over the K), but only the process that made it holds a handle.
"""

from __future__ import annotations

import itertools
import os
import uuid
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

from tf_accum import errors
from tf_accum.accumulators.spec import AccumulatorSpec
from tf_accum.distributed.connect import refuse_after_fork
from tf_accum.distributed.host import remote_class
from tf_accum.distributed.placement import HOST_START_TIMEOUT, HostGroup, Placement
from tf_accum.distributed.proxy import HostLink, RemoteAccumulator, ray_error
from tf_accum.distributed.wire import Failure, host_name
from tf_accum.resources.errors import DEFAULT_CONTAINER, missing_resource_error
from tf_accum.resources.local import next_handle, private_name
from tf_accum.resources.table import HandleTable


def host_actor_name(container: str, index: int, count: int) -> str:
    """The Ray actor name of host ``index`` of a container placed over ``count`` hosts.

    Host 0 has the name of an unplaced container's one host, whatever the
    count: every process meets there and compares placements.
    """
    first = host_name(container)
    return first if index == 0 else f"{first}/{index}-of-{count}"


# Every Ray table of this process, so that a forked child can disown them all.
_tables: weakref.WeakSet[RayResourceTable] = weakref.WeakSet()


class RayResourceTable(HandleTable[RemoteAccumulator]):
    """Accumulators in Ray actors: one host actor per container, or K (``place``).

    Args:
        host_options: extra ``ActorClass.options`` for the host of every
            container this process makes that has no ``place``-ment, e.g.
            ``{"resources": {"ps": 0.01}}`` to place them on the nodes that
            offer a custom ``ps`` resource. By default Ray places them; they
            use no CPU slot. Name, namespace and lifetime cannot be changed.
            Only the process that makes a host decides its options.

    Invariant guarded by ``_lock`` (besides ``HandleTable``'s): ``_by_name``
    maps a shared (container, name) to the live handle of the host entry it
    last resolved to; ``_groups[container]`` is the container's hosts as
    checked against its first host's record, which ``_links[(container, 0)]``
    reaches.
    """

    def __init__(self, host_options: dict[str, Any] | None = None) -> None:
        super().__init__()
        self._host_options = dict(host_options or {})
        self._caller = uuid.uuid4().hex
        self._placements: dict[str, Placement] = {}
        _tables.add(self)

    def _forget_after_fork(self) -> None:
        _inherited.append((self._live, self._links, self._groups))  # never released
        super()._forget_after_fork()

    def _reset(self) -> None:
        super()._reset()
        # (container, host index) -> the link, the host's actor name and its node id
        self._links: dict[tuple[str, int], tuple[HostLink, str, str]] = {}
        self._groups: dict[str, tuple[HostGroup, Placement | None]] = {}
        self._rounds: dict[str, itertools.count[int]] = {}
        self._by_name: dict[tuple[str, str], int] = {}

    def place(
        self,
        container: str,
        *,
        hosts: int = 1,
        resources: Mapping[str, float] | Sequence[Mapping[str, float]] | None = None,
        node: str | Sequence[str] | None = None,
        soft: bool = False,
    ) -> None:
        """Spread ``container``'s accumulators over ``hosts`` host actors, placed on purpose.

        Arguments as ``tfa.distributed.place``. Call it before the
        container's first accumulator, in every process that uses the
        container (or at least in the one that makes its first
        accumulator: the others follow the placement its first host
        recorded). Until then nothing is started.

        Raises:
            InvalidArgumentError: bad arguments (the message says which).
            FailedPreconditionError: this process already uses the container
                with another placement. (A placement differing from the one
                the cluster's hosts of the container were made with is
                refused at the container's next accumulator.)
        """
        wanted = Placement.of(hosts, resources, node, soft)
        container = container or DEFAULT_CONTAINER
        with self._lock:
            resolved = self._groups.get(container)
            if resolved is not None and resolved[1] != wanted:
                raise errors.FailedPreconditionError(
                    None,
                    None,
                    f"Container {container!r} already has accumulators in this process, "
                    f"placed {_described(resolved[1])}; it cannot be placed ({wanted.describe()}) "
                    "now: place a container before its first accumulator",
                )
            self._placements[container] = wanted

    def host_of(self, handle: int) -> tuple[str, str]:
        """The Ray actor name and node id of the host holding ``handle``'s accumulator.

        The node is where the host ran when this process linked to it.
        Raises NotFoundError for a handle this table does not hold.
        """
        link = self.lookup(handle).link
        with self._lock:
            for found, name, node in self._links.values():
                if found is link:
                    return name, node
        raise missing_resource_error(self._label_of(handle), type_known=False)

    def _group(self, container: str, placement: Placement | None) -> HostGroup:
        count = placement.hosts if placement is not None else 1
        return HostGroup(
            container,
            count,
            remote_class,
            lambda index: (container, None, None, placement),
            lambda index: (
                placement.options(index) if placement is not None else dict(self._host_options)
            ),
            lambda index: host_actor_name(container, index, count),
        )

    def _resolve(self, container: str) -> HostGroup:
        """The container's hosts, checked against the placement its first host records."""
        with self._lock:
            resolved = self._groups.get(container)
            first = self._links.get((container, 0))
            explicit = self._placements.get(container)
        if resolved is not None and first is not None and not first[0].stale:
            return resolved[0]
        group = self._group(container, explicit)
        link = self._link(container, group, 0)
        recorded = self._recorded(link)
        if recorded != explicit:
            if explicit is not None:
                raise errors.FailedPreconditionError(
                    None,
                    None,
                    f"Container {container!r} is placed ({explicit.describe()}) in this process, "
                    f"but its hosts on the cluster were made placed {_described(recorded)} by "
                    "the process that made them first: every process must place a container "
                    "the same way (tfa.distributed.place), before its first accumulator anywhere",
                )
            group = self._group(container, recorded)  # follow the cluster's placement
        with self._lock:
            self._groups[container] = (group, recorded)
        return group

    def _recorded(self, link: HostLink) -> Placement | None:
        import ray

        try:
            found: Placement | None = ray.get(
                link.actor.placement.remote(), timeout=HOST_START_TIMEOUT
            )
        except ray.exceptions.RayError as exc:
            link.stale = True
            raise ray_error(exc, f"the accumulator host of container {link.container}") from None
        return found

    def _link(self, container: str, group: HostGroup, index: int) -> HostLink:
        key = (container, index)
        with self._lock:
            found = self._links.get(key)
        if found is not None and not found[0].stale:
            return found[0]
        import ray

        what = f"the accumulator host of container {container}"
        if group.count > 1:
            what += f" (host {index} of {group.count})"
        actor, (instance, _pid, node) = group.start(index, what)
        same_machine = node == ray.get_runtime_context().get_node_id()
        link = HostLink(container, actor, instance, self._caller, same_machine)
        with self._lock:
            current = self._links.get(key)
            if current is not None and not current[0].stale and current[0].instance == instance:
                return current[0]
            self._links[key] = (link, group.actor_name(index), node)
        return link

    def create(
        self, container: str, shared_name: str, private_name_base: str, spec: AccumulatorSpec
    ) -> int:
        refuse_after_fork()
        container = container or DEFAULT_CONTAINER
        if self._doomed:
            self._reap()
        group = self._resolve(container)
        if shared_name:
            index = group.index_for(shared_name)
        else:
            with self._lock:
                index = next(self._rounds.setdefault(container, itertools.count())) % group.count
        link = self._link(container, group, index)
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


def _described(placement: Placement | None) -> str:
    if placement is None:
        return "by no tfa.distributed.place (one host, where Ray puts it)"
    return f"({placement.describe()})"


# What a forked child inherited of its parent's Ray tables, kept for good: an
# actor handle or object ref released in the child tells Ray's core worker,
# whose locks the child may have inherited held by a thread that does not exist
# there, and would wait for them forever.
_inherited: list[Any] = []


def _disown_after_fork() -> None:
    """Empty every Ray table in a forked child.

    Ray's connection does not survive ``fork``: a call through the parent's
    would hang or crash the child. So inherited handles are NotFoundError there
    (as in-process), and making accumulators is refused (see
    ``refuse_after_fork``). The parent's links are dropped from the tables but
    never released (see ``_inherited``).
    """
    for table in list(_tables):
        table._forget_after_fork()


if hasattr(os, "register_at_fork"):  # not on Windows
    os.register_at_fork(after_in_child=_disown_after_fork)
