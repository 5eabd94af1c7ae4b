"""Handles, sharing by name, destruction (docs/departures.md T4, T10, T14)."""

from __future__ import annotations

import gc
import sys
import threading
import types

import numpy as np
import pytest

import tf_accum as tfa
from tests.helpers import Background
from tf_accum import errors
from tf_accum.resources import LocalResourceTable, current_table, set_table

raw = tfa.raw_ops
F32 = tfa.float32


def dense(**kw):
    kw.setdefault("shape", [2])
    return raw.ResourceConditionalAccumulator(dtype=kw.pop("dtype", F32), **kw)


def apply(h: int, step: int = 0) -> None:
    raw.ResourceAccumulatorApplyGradient(handle=h, local_step=step, gradient=np.ones(2, np.float32))


def num(h: int) -> int:
    return int(raw.ResourceAccumulatorNumAccumulated(handle=h))


def test_private_accumulators_never_alias() -> None:  # E02, E03, D44; docs/departures.md T4
    a, b = dense(), dense()
    c = dense(name="other")
    assert len({a, b, c}) == 3
    apply(a)
    assert (num(a), num(b), num(c)) == (1, 0, 0)


def test_destroying_one_private_accumulator_leaves_equal_ones_alive() -> (
    None
):  # docs/departures.md T4
    a, b = dense(dtype=tfa.float64, shape=[5]), dense(dtype=tfa.float64, shape=[5])
    raw.DestroyResourceOp(resource=a)
    assert num(b) == 0
    c = dense(dtype=tfa.float64, shape=[5])
    assert num(c) == 0


def test_shared_name_shares_and_survives_only_while_alive() -> None:  # D41, E05, E06, D50
    a = dense(shared_name="table-shared")
    b = dense(shared_name="table-shared")
    apply(a)
    assert num(b) == 1
    raw.DestroyResourceOp(resource=a, ignore_lookup_error=False)
    with pytest.raises(errors.NotFoundError):
        num(b)
    fresh = dense(shared_name="table-shared")
    assert num(fresh) == 0
    assert fresh not in (a, b)


def test_ref_and_resource_constructors_share() -> None:  # D42; docs/departures.md T14
    a = raw.ConditionalAccumulator(dtype=F32, shape=[2], shared_name="table-ref-res")
    b = dense(shared_name="table-ref-res")
    raw.AccumulatorApplyGradient(handle=a, local_step=0, gradient=np.ones(2, np.float32))
    assert num(b) == 1
    assert int(raw.AccumulatorNumAccumulated(handle=b)) == 1


def test_container_separates_names() -> None:  # D43
    a = dense(shared_name="table-cont", container="c1")
    b = dense(shared_name="table-cont", container="c2")
    apply(a)
    assert (num(a), num(b)) == (1, 0)


@pytest.mark.parametrize(
    "other",
    [
        {"shape": [3]},
        {"dtype": tfa.float64},
        {"reduction_type": "SUM"},
        {"shape": None},
    ],
)
def test_shared_name_with_other_attributes_is_refused(
    other,
) -> None:  # D41, D52; docs/departures.md T10
    name = f"table-conflict-{sorted(other)}"
    a = dense(shared_name=name)
    with pytest.raises(errors.InvalidArgumentError) as info:
        dense(shared_name=name, **other)
    message = str(info.value)
    assert f"localhost/{name}" in message
    assert "a dense float32 accumulator of shape [2] with reduction_type MEAN" in message
    assert num(a) == 0


def test_destroy_messages() -> None:  # D47, E22
    h = dense(shared_name="x-destroy")
    raw.DestroyResourceOp(resource=h, ignore_lookup_error=False)
    with pytest.raises(errors.NotFoundError) as info:
        num(h)
    assert str(info.value) == (
        "Resource localhost/x-destroy/N10tensorflow26ConditionalAccumulatorBaseE does not exist."
    )
    with pytest.raises(errors.NotFoundError) as info:
        raw.DestroyResourceOp(resource=h, ignore_lookup_error=False)
    assert str(info.value) == "Resource localhost/x-destroy/<unknown> does not exist."
    raw.DestroyResourceOp(resource=h, ignore_lookup_error=True)


def test_private_names_count_up_like_tensorflow() -> None:  # D46
    h = dense(name="myacc")
    label = current_table().lookup(h).label
    assert label.startswith("localhost/_") and label.endswith("_myacc")
    named = dense(shared_name="sh", container="cc")
    assert current_table().lookup(named).label == "cc/sh"


def test_unknown_and_malformed_handles() -> None:
    with pytest.raises(errors.NotFoundError):
        num(10**12)
    with pytest.raises(TypeError, match="integer accumulator handle"):
        num("not a handle")  # type: ignore[arg-type]


def test_handles_are_never_reused() -> None:
    seen = set()
    for _ in range(50):
        h = dense()
        assert h not in seen
        seen.add(h)
        raw.DestroyResourceOp(resource=h)


def test_concurrent_creation_of_one_shared_name_yields_one_accumulator() -> None:
    barrier = threading.Barrier(8)

    def create() -> int:
        barrier.wait(10)
        handle: int = dense(shared_name="table-race")
        return handle

    handles = {bg.result() for bg in [Background(create) for _ in range(8)]}
    assert len(handles) == 1


def test_another_table_can_be_installed() -> None:
    table = LocalResourceTable()
    previous = set_table(table)
    try:
        h = dense()
        assert table.live_handles() == [h]
    finally:
        assert previous is not None
        set_table(previous)
    with pytest.raises(errors.NotFoundError):
        num(h)


def test_compat_private_accumulator_is_destroyed_on_collection() -> None:
    acc = tfa.compat.v1.ConditionalAccumulator(F32, shape=[2])
    h = acc.accumulator_ref
    acc.apply_grad([1.0, 2.0])
    del acc
    gc.collect()
    with pytest.raises(errors.NotFoundError):
        num(h)


def test_compat_shared_accumulator_outlives_its_object() -> None:
    acc = tfa.compat.v1.ConditionalAccumulator(F32, shape=[2], shared_name="table-outlive")
    h = acc.accumulator_ref
    acc.apply_grad([1.0, 2.0])
    del acc
    gc.collect()
    assert num(h) == 1
    raw.DestroyResourceOp(resource=h)


def test_collection_inside_a_table_operation_does_not_deadlock() -> None:
    """The collector may finalize a compat object while the table's lock is held."""
    table = current_table()
    acc = tfa.compat.v1.ConditionalAccumulator(F32, shape=[2])
    h = acc.accumulator_ref
    finalizer = acc._finalizer

    def collected_while_busy() -> None:
        with table._lock:  # type: ignore[attr-defined]
            finalizer()  # what the garbage collector would run here

    Background(collected_while_busy).result(timeout=5)
    with pytest.raises(errors.NotFoundError):
        num(h)  # destroyed at the table's next operation


def test_collection_inside_an_accumulator_operation_does_not_deadlock() -> None:
    acc = tfa.compat.v1.ConditionalAccumulator(F32, shape=[2])
    h = acc.accumulator_ref
    state = current_table().lookup(h)
    finalizer = acc._finalizer
    waiting = Background(acc.take_grad, 1)

    def collected_while_busy() -> None:
        with state._lock:  # type: ignore[attr-defined]
            finalizer()

    from tests.helpers import wait_for_waiting

    wait_for_waiting(h, 1)
    Background(collected_while_busy).result(timeout=5)
    with pytest.raises(errors.NotFoundError):
        num(h)
    assert isinstance(waiting.error(), errors.CancelledError)


def test_an_address_variable_picks_its_registered_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """The process's first table comes from the plug-in registered for an
    environment variable that is set (the distributed one registers
    TF_ACCUM_RAY_ADDRESS), imported only then; unset, it is in-process."""
    from tf_accum.resources import current
    from tf_accum.resources.local import LocalResourceTable

    made: list[str] = []
    plug_in = types.ModuleType("tf_accum_test_plug_in")

    def make(address: str) -> LocalResourceTable:
        made.append(address)
        return LocalResourceTable()

    plug_in.make = make  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "tf_accum_test_plug_in", plug_in)
    monkeypatch.setattr(current, "_ADDRESS_TABLES", dict(current._ADDRESS_TABLES))
    monkeypatch.delenv(current.RAY_ADDRESS_VARIABLE, raising=False)
    current.register_address_table("TF_ACCUM_TEST_ADDRESS", "tf_accum_test_plug_in:make")
    monkeypatch.delenv("TF_ACCUM_TEST_ADDRESS", raising=False)
    assert isinstance(current._default_table(), LocalResourceTable) and made == []
    monkeypatch.setenv("TF_ACCUM_TEST_ADDRESS", "somewhere:1234")
    assert isinstance(current._default_table(), LocalResourceTable)
    assert made == ["somewhere:1234"]
