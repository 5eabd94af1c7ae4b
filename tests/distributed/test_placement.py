"""Containers spread over K hosts and placed on purpose (tfa.distributed.place), on a
cluster of three raylets on this machine: the session's head and two nodes this
module adds (custom resources ``node_a`` and ``node_b``), ended by pid."""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import tf_accum as tfa
from tests.distributed.conftest import PROCESS_WAIT, Cluster
from tests.distributed.placement_roles import SIZE, WIDTH, dense, sparse
from tests.distributed.test_errors import PLACEMENT_BOUND, extra_node
from tests.helpers import wait_until
from tf_accum import errors
from tf_accum.distributed.placement import HostGroup
from tf_accum.distributed.table import RayResourceTable, host_actor_name
from tf_accum.examples import recovery
from tf_accum.resources import LocalResourceTable, using_table

raw = tfa.raw_ops
ROLES = "tests.distributed.placement_roles"
TAG = uuid.uuid4().hex[:8]  # in every container of this module, to end its hosts after


def container(what: str) -> str:
    return f"pl-{TAG}-{what}-{uuid.uuid4().hex[:6]}"


def expected_index(name: str, count: int) -> int:
    """The host TF1's ps tasks would give the key: the one digest rule of HostGroup."""
    return HostGroup("any", count, lambda: None, lambda index: ()).index_for(name)


def node_of(table: Any, handle: int) -> str:
    """The node the host of ``handle`` runs on, as the host's own ping says."""
    import ray

    name, _ = table.host_of(handle)
    _, _, node = ray.get(ray.get_actor(name, namespace="tf_accum").ping.remote(), timeout=60)
    return str(node)


@pytest.fixture(scope="module")
def nodes(ray_cluster: Cluster) -> Iterator[dict[str, str]]:
    """Node ids of two extra raylets (resources node_a, node_b); this module's hosts
    are killed, then the raylets, by pid, and the cluster has seen them go."""
    import ray

    added: list[str] = []
    try:
        with contextlib.ExitStack() as stack:
            a, node_a = stack.enter_context(extra_node(ray_cluster, node_a=1))
            b, node_b = stack.enter_context(extra_node(ray_cluster, node_b=1))
            added += [a, b]
            try:
                yield {"a": a, "b": b, "head": ray.get_runtime_context().get_node_id()}
            finally:
                for actor in ray.util.list_named_actors(all_namespaces=True):
                    if actor["namespace"] == "tf_accum" and TAG in actor["name"]:
                        with contextlib.suppress(ValueError):
                            ray.kill(
                                ray.get_actor(actor["name"], namespace="tf_accum"),
                                no_restart=True,
                            )
                for node in (node_a, node_b):
                    # its own processes, killed and waited for (extra_node kills the rest by pid)
                    node.kill_all_processes(check_alive=False, allow_graceful=False, wait=True)
    finally:
        # A process attaching later picks a raylet of its machine's address: not a dead one.
        wait_until(
            lambda: not any(n["Alive"] for n in ray.nodes() if n["NodeID"] in added),
            PROCESS_WAIT,
        )


def test_a_shared_name_reaches_the_same_host_whichever_process_starts_first(
    ray_table, spawn, nodes
) -> None:
    names = [f"var{i}" for i in range(8)]
    first, second = container("order"), container("order")
    placement = {"hosts": 3}
    for c, order in ((first, [names, names[::-1]]), (second, [names[::-1], names])):
        expected = {n: host_actor_name(c, expected_index(n, 3), 3) for n in names}
        assert len(set(expected.values())) == 3  # the eight names use all three hosts
        for made in order:  # one process after the other: the first one makes the hosts
            outcome = spawn("hosts", ROLES, container=c, names=made, placement=placement).outcome()
            assert outcome["hosts"] == expected
    # and this process, placing the same way, reaches the very accumulators
    tfa.distributed.place(first, hosts=3)
    handle = dense(first, names[0])
    assert ray_table.host_of(handle)[0] == host_actor_name(first, expected_index(names[0], 3), 3)


def test_private_accumulators_go_round_robin_over_the_hosts(ray_table, nodes) -> None:
    c = container("private")
    tfa.distributed.place(c, hosts=3)
    handles = [
        raw.ResourceConditionalAccumulator(dtype=tfa.float32, shape=[1], container=c)
        for _ in range(6)
    ]
    hosts = [ray_table.host_of(h)[0] for h in handles]
    assert hosts == [host_actor_name(c, i % 3, 3) for i in range(6)]


def test_a_hard_placement_puts_each_host_on_its_node(ray_table, nodes) -> None:
    c = container("hard")
    tfa.distributed.place(c, hosts=2, resources=[{"node_a": 0.01}, {"node_b": 0.01}])
    on_first = next(n for n in (f"v{i}" for i in range(50)) if expected_index(n, 2) == 0)
    on_second = next(n for n in (f"v{i}" for i in range(50)) if expected_index(n, 2) == 1)
    a, b = dense(c, on_first), dense(c, on_second)
    assert node_of(ray_table, a) == ray_table.host_of(a)[1] == nodes["a"]
    assert node_of(ray_table, b) == ray_table.host_of(b)[1] == nodes["b"]
    pinned = container("pinned")
    tfa.distributed.place(pinned, node=nodes["b"])
    assert node_of(ray_table, dense(pinned, "w")) == nodes["b"]


def test_a_soft_placement_to_a_missing_node_still_starts(ray_table, nodes) -> None:
    c = container("soft")
    missing = "ab" * 28
    tfa.distributed.place(c, node=missing, soft=True)
    start = time.monotonic()
    h = dense(c, "w")
    assert time.monotonic() - start < PLACEMENT_BOUND
    assert node_of(ray_table, h) in nodes.values()
    raw.ResourceAccumulatorApplyGradient(
        handle=h, local_step=0, gradient=np.array([1, 2, 3], np.int64)
    )
    assert int(raw.ResourceAccumulatorNumAccumulated(handle=h)) == 1


def _kill_host(c: str, index: int, count: int) -> None:
    import ray

    with contextlib.suppress(ValueError):
        actor = ray.get_actor(host_actor_name(c, index, count), namespace="tf_accum")
        ray.kill(actor, no_restart=True)


def test_a_placement_no_node_can_meet_fails_within_the_bound(ray_table, nodes) -> None:
    c = container("nowhere")
    tfa.distributed.place(c, resources={"node_nowhere": 1})
    start = time.monotonic()
    try:
        with pytest.raises(errors.InvalidArgumentError, match="cannot be placed") as caught:
            dense(c, "w")
        assert time.monotonic() - start < PLACEMENT_BOUND
        assert caught.value.message.startswith(f"the accumulator host of container {c} cannot")
        assert "'node_nowhere': 1.0" in caught.value.message
    finally:
        _kill_host(c, 0, 1)
    # one host of several, pinned to a node the cluster does not know
    c = container("gone")
    missing = "cd" * 28
    tfa.distributed.place(c, hosts=2, node=[nodes["a"], missing])
    on_second = next(n for n in (f"v{i}" for i in range(50)) if expected_index(n, 2) == 1)
    start = time.monotonic()
    try:
        with pytest.raises(errors.UnavailableError) as pinned:
            dense(c, on_second)
        assert time.monotonic() - start < PLACEMENT_BOUND
        assert (
            f"(host 1 of 2) cannot be placed: it is pinned (hard node affinity) to node {missing}"
            in pinned.value.message
        )
    finally:
        _kill_host(c, 1, 2)


def test_dense_and_sparse_sums_are_conserved_over_four_hosts_from_several_processes(
    ray_table, spawn, nodes
) -> None:
    c = container("sums")
    placement: dict[str, Any] = {
        "hosts": 4,
        "resources": [{"node_a": 0.01}, {"node_b": 0.01}, {}, {"node_a": 0.01}],
    }
    tfa.distributed.place(c, **placement)
    names = [f"dense{i}" for i in range(8)]
    sparse_names = [f"sparse{i}" for i in range(4)]
    dense_handles = [dense(c, n) for n in names]
    sparse_handles = [sparse(c, n) for n in sparse_names]
    used = {ray_table.host_of(h)[0] for h in dense_handles + sparse_handles}
    assert len(used) == 4
    steps, workers = 12, 3
    started = [
        # worker 0 follows the placement the hosts recorded; the others place it themselves
        spawn(
            "apply",
            ROLES,
            container=c,
            names=names,
            sparse_names=sparse_names,
            worker=w,
            steps=steps,
            placement=None if w == 0 else placement,
        )  # fmt: skip
        for w in range(workers)
    ]
    assert [p.outcome() for p in started] == [{"applied": steps * 12}] * workers
    n = steps * workers
    expected = [steps * sum(range(workers)), workers * sum(range(steps)), n]
    for h in dense_handles:
        total = raw.ResourceAccumulatorTakeGradient(handle=h, num_required=n, dtype=tfa.int64)
        assert total.tolist() == expected
    rows = np.zeros((SIZE, WIDTH), np.int64)
    for w in range(workers):
        for step in range(steps):
            rows[step % SIZE] += [w, step]
    for h in sparse_handles:
        taken = raw.SparseAccumulatorTakeGradient(handle=h, num_required=n, dtype=tfa.int64)
        summed = np.zeros((SIZE, WIDTH), np.int64)
        np.add.at(summed, np.asarray(taken.indices), np.asarray(taken.values))
        assert summed.tolist() == rows.tolist()


def test_processes_that_place_a_container_differently_are_refused(ray_table, spawn, nodes) -> None:
    c = container("disagree")
    tfa.distributed.place(c, hosts=2)
    dense(c, "w")
    outcome = spawn("hosts", ROLES, container=c, names=["w"], placement={"hosts": 3}).outcome()
    assert outcome["error"] == "FailedPreconditionError"
    assert (
        f"Container {c!r} is placed (hosts=3) in this process, but its hosts" in outcome["message"]
    )
    assert "made placed (hosts=2)" in outcome["message"]
    # a process that does not place it follows the recorded placement
    follower = spawn("hosts", ROLES, container=c, names=["w", "x"], placement=None).outcome()
    assert follower["hosts"] == {n: host_actor_name(c, expected_index(n, 2), 2) for n in ("w", "x")}
    # this process cannot change the placement of a container it uses
    with pytest.raises(errors.FailedPreconditionError, match="already has accumulators"):
        tfa.distributed.place(c, hosts=3)
    assert ray_table.host_of(dense(c, "x"))[0] == follower["hosts"]["x"]


def test_a_placement_is_refused_where_the_container_was_made_unplaced(ray_table, nodes) -> None:
    c = container("unplaced")
    dense(c, "w")  # made by this process without tfa.distributed.place: one host
    other = RayResourceTable()
    other.place(c, hosts=2)
    try:
        with using_table(other), pytest.raises(errors.FailedPreconditionError) as caught:
            dense(c, "w")
    finally:
        other.close()
    assert "made placed by no tfa.distributed.place (one host" in caught.value.message


def test_bad_placements_are_invalid_arguments_and_change_nothing(ray_table, nodes) -> None:
    c = container("bad")
    bad: list[dict[str, Any]] = [
        {"hosts": 0},
        {"hosts": True},
        {"hosts": 2, "resources": [{"node_a": 1}]},
        {"resources": {"CPU": 1}},
        {"resources": {"node_a": 0}},
        {"node": "not-a-node"},
        {"soft": True},
    ]
    for arguments in bad:
        with pytest.raises(errors.InvalidArgumentError, match=r"^tfa\.distributed\.place: "):
            tfa.distributed.place(c, **arguments)
    h = dense(c, "w")  # still unplaced: the one host of old
    assert ray_table.host_of(h)[0] == host_actor_name(c, 0, 1) == f"tf_accum/{c}"


def test_place_needs_a_ray_table(ray_cluster) -> None:
    with (
        using_table(LocalResourceTable()),
        pytest.raises(errors.FailedPreconditionError, match="call tfa.distributed.connect"),
    ):
        tfa.distributed.place("anything", hosts=2)


def _lose_host(c: str, index: int, count: int, handle: int) -> None:
    """Kill host ``index`` (Ray restarts it, empty) and wait until ``handle`` finds it lost."""
    import ray

    actor = ray.get_actor(host_actor_name(c, index, count), namespace="tf_accum")
    ray.kill(actor, no_restart=False)

    def lost() -> bool:
        try:
            raw.ResourceAccumulatorNumAccumulated(handle=handle)
        except (errors.UnavailableError, errors.NotFoundError):
            return True
        return False

    wait_until(lost, PROCESS_WAIT)


def test_a_lost_host_restarts_empty_with_its_placement_and_the_others_keep_theirs(
    ray_table, nodes
) -> None:
    c = container("lost")
    tfa.distributed.place(c, hosts=2)
    first, second = (
        next(n for n in (f"v{i}" for i in range(50)) if expected_index(n, 2) == index)
        for index in (0, 1)
    )
    a, b = dense(c, first), dense(c, second)
    for h in (a, b):
        raw.ResourceAccumulatorApplyGradient(
            handle=h, local_step=0, gradient=np.array([1, 2, 3], np.int64)
        )
    _lose_host(c, 1, 2, b)
    assert int(raw.ResourceAccumulatorNumAccumulated(handle=a)) == 1  # host 0 kept it
    again = recovery.remake(lambda: dense(c, second))  # on the restarted host 1, empty
    assert ray_table.host_of(again)[0] == host_actor_name(c, 1, 2)
    assert int(raw.ResourceAccumulatorNumAccumulated(handle=again)) == 0
    _lose_host(c, 0, 2, a)
    # the restarted host 0 still holds the placement: another one is refused
    other = RayResourceTable()
    other.place(c, hosts=3)
    try:
        with using_table(other), pytest.raises(errors.FailedPreconditionError) as caught:
            recovery.remake(lambda: dense(c, first))  # once host 0 is back
    finally:
        other.close()
    assert "made placed (hosts=2)" in caught.value.message
