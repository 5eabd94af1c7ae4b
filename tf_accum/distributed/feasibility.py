"""Whether a host actor's placement can be met, and waiting for a host to start.

Ray keeps an actor it cannot place pending forever, saying nothing: a request
for resources no node has, or a hard affinity to a node that is gone. Here
the request is compared with the cluster's live nodes, so a host that cannot
start is reported at once, naming the request and the node.
"""

from __future__ import annotations

from typing import Any

from tf_accum import errors

# Seconds to wait for a host before asking whether its placement can be met
# (a host that can start usually answers sooner).
CHECK_AFTER = 2.0
# Seconds between later checks while a feasible host is still starting.
CHECK_EVERY = 2.0


def unmet_placement(options: dict[str, Any], nodes: list[dict[str, Any]]) -> str | None:
    """Why no live node can run an actor made with Ray actor ``options``; None if one can.

    ``nodes`` is what ``ray.nodes()`` returns. Only what the options say is
    judged: resources (``resources``, ``num_cpus``, ``num_gpus``, ``memory``)
    and a hard ``NodeAffinitySchedulingStrategy``; other strategies count as
    feasible.
    """
    live = [node for node in nodes if node.get("Alive")]
    strategy = options.get("scheduling_strategy")
    pinned = getattr(strategy, "node_id", None)
    if pinned is not None and not getattr(strategy, "soft", False):
        known = {node["NodeID"]: node for node in nodes}
        node = known.get(pinned)
        if node is None:
            return f"it is pinned (hard node affinity) to node {pinned}, which the cluster does not know"
        if not node.get("Alive"):
            where = node.get("NodeManagerAddress", "?")
            return f"it is pinned (hard node affinity) to node {pinned} ({where}), which is gone (dead)"
        live = [node]
    wanted = _requested(options)
    if not wanted:
        return None
    for node in live:
        offered = node.get("Resources", {})
        if all(offered.get(name, 0.0) >= amount for name, amount in wanted.items()):
            return None
    offers = "; ".join(
        f"{node['NodeID'][:12]} ({node.get('NodeManagerAddress', '?')}): {_public(node)}"
        for node in live
    )
    return (
        f"no live node offers the resources it requests, {wanted} (live nodes: {offers or 'none'})"
    )


def _requested(options: dict[str, Any]) -> dict[str, float]:
    wanted = {str(name): float(amount) for name, amount in (options.get("resources") or {}).items()}
    for option, name in (("num_cpus", "CPU"), ("num_gpus", "GPU"), ("memory", "memory")):
        amount = options.get(option)
        if amount:
            wanted[name] = float(amount)
    return {name: amount for name, amount in wanted.items() if amount > 0}


def _public(node: dict[str, Any]) -> dict[str, float]:
    # Ray's per-node bookkeeping resources ("node:<ip>") say nothing to a user.
    return {
        name: amount
        for name, amount in node.get("Resources", {}).items()
        if not name.startswith("node:")
    }


def wait_started(ref: Any, options: dict[str, Any], what: str, timeout: float) -> Any:
    """``ray.get(ref)`` for a new actor's first call, failing early if it cannot be placed.

    Args:
        ref: the object ref of the actor's first call (e.g. ``ping``).
        options: the Ray actor options it was made with.
        what: names the actor in messages ("the accumulator host of container c").
        timeout: seconds to wait for a feasible actor to answer.

    Returns:
        The call's result.

    Raises:
        InvalidArgumentError: no live node offers the requested resources
            (the message names the request and what the nodes offer).
        UnavailableError: the actor is pinned to a node that is gone (named),
            or it did not answer within ``timeout``.
    """
    import ray

    nodes: Any = ray.nodes
    waited, step = 0.0, CHECK_AFTER
    while True:
        try:
            return ray.get(ref, timeout=min(step, max(timeout - waited, 0.0)))
        except ray.exceptions.GetTimeoutError:
            waited += step
            reason = unmet_placement(options, nodes())
        except ray.exceptions.ActorUnschedulableError as refused:
            reason = unmet_placement(options, nodes()) or f"it is pinned: {refused}"
        if reason is not None:
            kind = errors.UnavailableError if "pinned" in reason else errors.InvalidArgumentError
            raise kind(None, None, f"{what} cannot be placed: {reason}")
        if waited >= timeout:
            raise errors.UnavailableError(
                None,
                None,
                f"{what} did not start within {timeout:g} s although a live node can hold "
                "it; is tf_accum installed on every node of the cluster?",
            )
        step = CHECK_EVERY
