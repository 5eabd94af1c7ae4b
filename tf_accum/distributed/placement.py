"""Hosts placed on purpose: named actors every process finds the same way.

A host is a detached Ray actor with a name in tf_accum's namespace: whoever
asks first makes it, everyone else gets that one, so the name alone decides
where state lives. The container hosts of ``RayResourceTable`` are started
here (a TF1 job's task hosts are made by their ps processes instead, see
``tf_accum.graph.cluster_job``). A ``HostGroup`` is K such hosts, index
0..K-1, with per-host Ray options (a node, a resource): a container placed
over K hosts (``place``) is a group, whose shared names
``HostGroup.index_for`` spreads over the group by a digest, the same from
every process whatever order they start in.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tf_accum import errors
from tf_accum.distributed.wire import NAMESPACE

# A host's calls run on this many threads of its actor (Ray makes them all at
# its start). A waiting take or queue op holds one, as does each caller's hold:
# the host refuses waits that would leave too few for the calls that end them.
MAX_CONCURRENCY = 1024

# Seconds to wait for a host to answer its first call; a host that cannot
# start (say tf_accum is missing on the node Ray placed it) fails clearly.
HOST_START_TIMEOUT = 60.0

# Options no caller may change: they are what makes every process find the same host.
FIXED_OPTIONS = ("name", "namespace", "lifetime", "get_if_exists")


def start_host(
    remote_class: Any, name: str, args: tuple[Any, ...], options: dict[str, Any], what: str
) -> tuple[Any, Any]:
    """The actor called ``name``, made with ``args`` if nobody made it yet, and its ping.

    ``options`` are extra Ray actor options (``resources``,
    ``scheduling_strategy``, ...). The host must have a ``ping``
    method; its answer is returned with the actor.

    Raises:
        UnavailableError: the host did not answer within HOST_START_TIMEOUT,
            it is pinned to a node that is gone, or Ray failed.
        InvalidArgumentError: no live node offers the resources it asks for.
    """
    import ray

    from tf_accum.distributed.feasibility import wait_started
    from tf_accum.distributed.proxy import ray_error

    settings: dict[str, Any] = {
        "num_cpus": 0,  # hosts must never hold the CPU slots workers need
        "max_concurrency": MAX_CONCURRENCY,
        "max_restarts": -1,
        "max_task_retries": 0,
        **options,
        "name": name,
        "namespace": NAMESPACE,
        "lifetime": "detached",
        "get_if_exists": True,
    }
    try:
        actor = remote_class.options(**settings).remote(*args)
        # a placement no live node can meet is reported within seconds, not at the timeout
        answer = wait_started(actor.ping.remote(), options, what, HOST_START_TIMEOUT)
    except ray.exceptions.GetTimeoutError:
        raise errors.UnavailableError(
            None,
            None,
            f"{what} did not start within {HOST_START_TIMEOUT:g} s; is tf_accum installed on "
            "every node of the cluster, and can the cluster meet its placement "
            f"({ {k: v for k, v in options.items() if k not in FIXED_OPTIONS} })?",
        ) from None
    except ray.exceptions.RayError as exc:
        raise ray_error(exc, what) from None
    return actor, answer


class HostGroup:
    """K named hosts of one kind, ``group/0`` .. ``group/K-1``.

    Args:
        group: the group's name (part of every host's actor name).
        count: K, the number of hosts.
        remote_class: a function returning the Ray actor class (Ray is
            imported only when a host is first needed).
        args: the constructor arguments of host ``index``.
        options: Ray actor options of host ``index`` (default: none; Ray
            places it, using no CPU slot).
        names: the Ray actor name of host ``index`` (default
            ``tf_accum/<group>/<index>``).
    """

    def __init__(
        self,
        group: str,
        count: int,
        remote_class: Callable[[], Any],
        args: Callable[[int], tuple[Any, ...]],
        options: Callable[[int], dict[str, Any]] | None = None,
        names: Callable[[int], str] | None = None,
    ) -> None:
        if count < 1:
            raise ValueError(f"A host group needs at least one host, not {count}")
        self.group = group
        self.count = count
        self._remote_class = remote_class
        self._args = args
        self._options = options or (lambda index: {})
        self._names = names or (lambda index: f"tf_accum/{group}/{index}")
        self._lock = threading.Lock()

    def actor_name(self, index: int) -> str:
        """The Ray actor name of host ``index``."""
        self._check(index)
        return self._names(index)

    def start(self, index: int, what: str) -> tuple[Any, Any]:
        """Host ``index`` (made if missing) and its ping answer; see ``start_host``."""
        self._check(index)
        return start_host(
            self._remote_class(),
            self.actor_name(index),
            self._args(index),
            self._options(index),
            what,
        )

    def index_for(self, key: str) -> int:
        """The host a key belongs to: a digest of it, modulo K (the same in every process)."""
        digest = hashlib.sha256(key.encode()).digest()
        return int.from_bytes(digest[:8], "big") % self.count

    def _check(self, index: int) -> None:
        if not 0 <= index < self.count:
            raise errors.InvalidArgumentError(
                None, None, f"Host {index} is outside group {self.group} of {self.count} hosts"
            )


# Resources a host may not ask for by name: hosts use no CPU slot, and Ray
# takes these through options of their own.
_RESERVED_RESOURCES = ("CPU", "GPU", "memory", "object_store_memory")
_NODE_ID_CHARS = 56  # a Ray node id: 28 bytes, in hex


@dataclass(frozen=True)
class Placement:
    """Where a container's accumulators live: ``hosts`` host actors, each placed.

    Made by ``Placement.of`` (which checks the arguments); the host of a
    container records the placement it was made with, so processes asking
    for another one are refused. ``resources[i]`` and ``nodes[i]`` are host
    i's (sorted (name, amount) pairs; a node id or None).
    """

    hosts: int
    resources: tuple[tuple[tuple[str, float], ...], ...]
    nodes: tuple[str | None, ...]
    soft: bool

    @classmethod
    def of(
        cls,
        hosts: int = 1,
        resources: Mapping[str, float] | Sequence[Mapping[str, float]] | None = None,
        node: str | Sequence[str] | None = None,
        soft: bool = False,
    ) -> Placement:
        """The placement ``place`` records; raises InvalidArgumentError for bad arguments."""
        if isinstance(hosts, bool) or not isinstance(hosts, int) or hosts < 1:
            raise _invalid(f"hosts must be a positive int, not {hosts!r}")
        if not isinstance(soft, bool):
            raise _invalid(f"soft must be a bool, not {soft!r}")
        per_resources = _per_host("resources", resources, hosts, Mapping)
        per_node = _per_host("node", node, hosts, str)
        if soft and all(n is None for n in per_node):
            raise _invalid(
                "soft=True applies to a node affinity: pass node= (resources are always hard)"
            )
        return cls(
            hosts,
            tuple(_resources(r) for r in per_resources),
            tuple(_node(n) for n in per_node),
            soft,
        )

    def options(self, index: int) -> dict[str, Any]:
        """The Ray actor options of host ``index``."""
        options: dict[str, Any] = {}
        if self.resources[index]:
            options["resources"] = dict(self.resources[index])
        node = self.nodes[index]
        if node is not None:
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node, soft=self.soft)
        return options

    def describe(self) -> str:
        """The placement as ``place``'s arguments, for messages."""
        words = [f"hosts={self.hosts}"]
        if any(self.resources):
            found = [dict(r) for r in self.resources]
            words.append(f"resources={found[0] if len(set(self.resources)) == 1 else found}")
        if any(n is not None for n in self.nodes):
            found_nodes = list(self.nodes)
            words.append(f"node={found_nodes[0] if len(set(self.nodes)) == 1 else found_nodes}")
            words.append(f"soft={self.soft}")
        return ", ".join(words)


def _invalid(message: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, f"tfa.distributed.place: {message}")


def _per_host(what: str, value: Any, hosts: int, kind: type) -> list[Any]:
    """``value`` for every host: one value for all, or a sequence of one per host."""
    if value is None or isinstance(value, kind):
        return [value] * hosts
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        items = list(value)
        if len(items) != hosts:
            raise _invalid(f"{what} has {len(items)} entries for {hosts} hosts (one per host)")
        if all(item is None or isinstance(item, kind) for item in items):
            return items
    expected = "a dict of resource amounts" if kind is Mapping else "a Ray node id (hex)"
    raise _invalid(f"{what} must be {expected} or a list of one per host, not {value!r}")


def _resources(value: Mapping[str, float] | None) -> tuple[tuple[str, float], ...]:
    if not value:
        return ()
    pairs = []
    for name, amount in value.items():
        if not isinstance(name, str) or name in _RESERVED_RESOURCES:
            raise _invalid(
                f"resource {name!r} cannot be asked for: name a custom resource "
                f"(not one of {', '.join(_RESERVED_RESOURCES)}; hosts use no CPU slot)"
            )
        if isinstance(amount, bool) or not isinstance(amount, (int, float)) or not amount > 0:
            raise _invalid(f"resource {name!r} needs a positive amount, not {amount!r}")
        pairs.append((name, float(amount)))
    return tuple(sorted(pairs))


def _node(value: str | None) -> str | None:
    if value is None:
        return None
    try:
        bytes.fromhex(value)
        valid = len(value) == _NODE_ID_CHARS
    except ValueError:
        valid = False
    if not valid:
        raise _invalid(
            f"node must be a Ray node id ({_NODE_ID_CHARS} hex digits, as "
            f"ray.get_runtime_context().get_node_id() gives), not {value!r}"
        )
    return value.lower()


def place(
    container: str,
    *,
    hosts: int = 1,
    resources: Mapping[str, float] | Sequence[Mapping[str, float]] | None = None,
    node: str | Sequence[str] | None = None,
    soft: bool = False,
) -> None:
    """Spread ``container``'s accumulators over ``hosts`` host actors, placed on purpose.

    Applies to this process's Ray table (``connect``, or the one
    ``TF_ACCUM_RAY_ADDRESS`` makes); see ``RayResourceTable.place``.

    Args:
        container: the container ("" is the default one, ``localhost``).
        hosts: K, the number of host actors. An accumulator with a
            shared_name lives on host ``sha256(shared_name) mod K`` (the same
            from every process); private ones go round robin in the process
            that makes them.
        resources: a Ray custom resource every host asks for (e.g.
            ``{"ps": 0.01}``: only nodes offering ``ps`` hold them), or a list
            of one dict per host. Always hard.
        node: a Ray node id every host is pinned to, or a list of one per
            host (None: anywhere).
        soft: with ``node``: Ray may place (and restart) the host elsewhere
            when the node is gone or full, instead of never starting it.

    Raises:
        InvalidArgumentError: bad arguments (the message says which).
        FailedPreconditionError: this process has no Ray table, or already
            uses the container with another placement.
    """
    from tf_accum.resources import current_table

    table = current_table()
    from tf_accum.distributed.table import RayResourceTable

    if not isinstance(table, RayResourceTable):
        raise errors.FailedPreconditionError(
            None,
            None,
            "tfa.distributed.place needs accumulators on Ray: call tfa.distributed.connect "
            "(or set TF_ACCUM_RAY_ADDRESS) first",
        )
    table.place(container, hosts=hosts, resources=resources, node=node, soft=soft)
