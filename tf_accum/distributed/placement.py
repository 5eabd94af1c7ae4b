"""Hosts placed on purpose: named actors every process finds the same way.

A host is a detached Ray actor with a name in tf_accum's namespace: whoever
asks first makes it, everyone else gets that one, so the name alone decides
where state lives. The container hosts of ``RayResourceTable`` (one per
container) and the task hosts of a TF1 cluster are both started here. A ``HostGroup`` is K such hosts, index 0..K-1, with
per-host Ray options (a node, a resource): a TF1 cluster's ps job is a group
(ps task i = host i, chosen by ``replica_device_setter`` in build order), and
``HostGroup.index_for`` spreads keys (a container and shared name, say) over
the group by a digest of the key, the same from every process whatever order
they start in.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from typing import Any

from tf_accum import errors
from tf_accum.distributed.wire import NAMESPACE

# Waiting takes are coroutines, each holding one of the actor's concurrency
# slots; once they are all taken, applies queue behind the takes (and a take
# waiting for them never returns). Far more than anyone waits on at once.
MAX_CONCURRENCY = 100_000

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
    ``scheduling_strategy``, ...). The host must have an async ``ping``
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
    """

    def __init__(
        self,
        group: str,
        count: int,
        remote_class: Callable[[], Any],
        args: Callable[[int], tuple[Any, ...]],
        options: Callable[[int], dict[str, Any]] | None = None,
    ) -> None:
        if count < 1:
            raise ValueError(f"A host group needs at least one host, not {count}")
        self.group = group
        self.count = count
        self._remote_class = remote_class
        self._args = args
        self._options = options or (lambda index: {})
        self._lock = threading.Lock()

    def actor_name(self, index: int) -> str:
        """The Ray actor name of host ``index``."""
        self._check(index)
        return f"tf_accum/{self.group}/{index}"

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
