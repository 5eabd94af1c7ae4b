"""Several real processes on one cluster: a chief and workers, as in parameter-server training."""

from __future__ import annotations

import os
import uuid
from typing import Any

import numpy as np
import pytest

import tf_accum as tfa
from tests.distributed.conftest import run_python
from tests.distributed.roles import FAR_AHEAD, shared
from tests.helpers import Background, wait_for_waiting, wait_until, waiting_takes
from tf_accum import errors

raw = tfa.raw_ops
PROCESS_START = 60.0  # seconds for a process to join the cluster, on a loaded machine


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def num(h: int) -> int:
    return int(raw.ResourceAccumulatorNumAccumulated(handle=h))


def apply(h: int, values: list[int]) -> None:
    raw.ResourceAccumulatorApplyGradient(
        handle=h, local_step=FAR_AHEAD, gradient=np.array(values, np.int64)
    )


def take(h: int, n: int, **kw: Any) -> Any:
    return raw.ResourceAccumulatorTakeGradient(handle=h, num_required=n, dtype=tfa.int64, **kw)


def test_two_workers_and_a_chief_lose_nothing(ray_table, spawn) -> None:
    name = unique("conservation")
    h = shared(name)  # destroyed after the test with the rest of this process's handles
    per_worker = 150
    chief = spawn("chief", name=name, expected=2 * per_worker, num_required=4)
    # the workers start once the chief's take waits, so that the gradients come
    # out over several rounds however slowly the chief's process started
    wait_until(lambda: waiting_takes(h) == 1, timeout=PROCESS_START)
    workers = [spawn("worker", name=name, first=i * per_worker, count=per_worker) for i in (0, 1)]
    assert [w.outcome() for w in workers] == [{"applied": per_worker}] * 2
    taken = chief.outcome()
    n = 2 * per_worker
    assert taken["count"] == n
    assert taken["total"] == n * (n - 1) // 2  # every accepted gradient came out exactly once
    # each round took 4 or more, but for the last (the workers' last few); a
    # take waiting when the 4th gradient came was served with exactly 4
    assert 2 <= taken["rounds"] <= n // 4 + 1
    assert num(h) == 0


def test_a_waiting_take_is_woken_by_another_process(ray_table, spawn) -> None:
    name = unique("wake")
    h = shared(name)
    waiting = Background(take, h, 2)
    wait_for_waiting(h, 1)
    assert spawn("worker", name=name, first=5, count=2).outcome() == {"applied": 2}
    result = waiting.result()
    assert result.dtype == np.int64 and result.tolist() == [11, 2]
    assert num(h) == 0


def test_a_take_timing_out_in_another_process_consumes_nothing(ray_table, spawn) -> None:
    name = unique("timeout")
    h = shared(name)
    apply(h, [3, 1])
    outcome = spawn("take", name=name, num_required=2, timeout=0.5).outcome()
    assert outcome == {
        "error": "DeadlineExceededError",
        "message": "Timed out waiting for notification",
    }
    assert num(h) == 1 and ray_table.lookup(h).num_waiting() == 0
    assert take(h, 1).tolist() == [3, 1]


def test_destroy_from_another_process_cancels_takes_everywhere(ray_table, spawn) -> None:
    name = unique("destroy")
    h = shared(name)
    waiting = [Background(take, h, 1), Background(take, h, 3)]
    wait_for_waiting(h, 2)
    assert spawn("destroy", name=name).outcome() == {"destroyed": True}
    for bg in waiting:
        error = bg.error()
        assert isinstance(error, errors.CancelledError)
        assert str(error) == "TakeGrad operation was cancelled"
    with pytest.raises(
        errors.NotFoundError, match=rf"Resource localhost/{name}/\S+ does not exist"
    ):
        apply(h, [1, 1])
    fresh = shared(name)  # the name is free again: a new, empty accumulator
    assert fresh != h and num(fresh) == 0


def test_a_name_shared_with_other_attributes_is_refused_across_processes(ray_table, spawn) -> None:
    name = unique("conflict")
    shared(name)  # int64
    outcome = spawn("create", name=name, dtype="float32").outcome()
    assert outcome == {
        "error": "InvalidArgumentError",
        "message": f"Accumulator localhost/{name} already exists as a dense int64 accumulator "
        "of shape [2] with reduction_type SUM; requested a dense float32 accumulator of shape "
        "[2] with reduction_type SUM. An accumulator shared by name must be created with the "
        "same kind, dtype, shape and reduction_type.",
    }


def test_connect_installs_the_table_in_another_process(ray_cluster, ray_table, spawn) -> None:
    name = unique("connect")
    apply(shared(name), [1, 1])
    outcome = spawn("connect_and_count", address=ray_cluster.address, name=name).outcome()
    assert outcome == {"installed": True, "count": 1}


def test_without_ray_connect_says_what_to_install() -> None:
    code = (
        "import sys; sys.modules['ray'] = None\n"  # as if Ray were not installed
        "import tf_accum as tfa\n"
        "try:\n"
        "    tfa.distributed.connect('local')\n"
        "except tfa.errors.FailedPreconditionError as e:\n"
        "    print(e)\n"
    )
    done = run_python(code, dict(os.environ))
    assert done.stdout.strip() == (
        "Distributed accumulators need Ray: pip install 'tf-accum[ray]'"
    ), done.stderr
