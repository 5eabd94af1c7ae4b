"""How many BLAS/OpenMP threads each task of a launched job may start.

numpy's BLAS (OpenBLAS, MKL) and OpenMP code start one thread per core in
every process, and OpenBLAS's threads spin while they wait for work. N
tasks on one machine of C cores then run N * C such threads, which take the
cores from each other. The launcher gives each task an equal share of its
node's cores instead, through the variables these libraries read when they
load; it leaves them all alone when the user has set any of them, or asked
it not to.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

# The variables OpenBLAS, OpenMP runtimes and MKL read for their thread count.
THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, where the system has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def threads_per_task(cores: int, tasks: int) -> int:
    """An equal share of ``cores`` for each of ``tasks`` tasks, at least one thread."""
    return max(1, cores // max(1, tasks))


def set_by_user(env: Mapping[str, str]) -> list[str]:
    """The thread variables ``env`` already sets (to anything, empty too)."""
    return [name for name in THREAD_VARIABLES if name in env]


def thread_limits(threads: int) -> dict[str, str]:
    """Each thread variable set to ``threads``."""
    return dict.fromkeys(THREAD_VARIABLES, str(threads))


@dataclass(frozen=True)
class ThreadShare:
    """``threads`` per task: ``cores`` of a node shared by ``tasks`` tasks of the job."""

    threads: int
    cores: int
    tasks: int

    @classmethod
    def of_this_node(cls, tasks: int) -> ThreadShare:
        cores = usable_cores()
        return cls(threads_per_task(cores, tasks), cores, tasks)

    def describe(self) -> str:
        cores = f"{self.cores} core{'s' if self.cores != 1 else ''}"
        return f"{self.threads} ({cores} / {self.tasks} task{'s' if self.tasks != 1 else ''})"
