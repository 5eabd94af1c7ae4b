"""Finding and ending orphaned accumulator hosts on this machine.

A host actor is a detached Ray actor: its process outlives the programs that
used it. When the raylet that started it dies (SIGKILLed, or its machine's
Ray stopped uncleanly), the host's process can live on, holding its memory,
with no cluster to answer to. Run ``python -m tf_accum.distributed.cleanup``
to list such processes of the current user, and add ``--kill`` to end them
(by pid; name pids to end only those). Hosts whose raylet still runs are left alone: end those through
Ray (``ray.kill`` on ``ray.get_actor("tf_accum/<container>", namespace="tf_accum")``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

# Ray titles an actor's process ray::<class> (a container's host and a TF1 task's alike)
HOST_TITLES = (b"ResourceHost",)


@dataclass(frozen=True)
class HostProcess:
    pid: int
    parent: int
    rss_bytes: int
    title: str


def orphaned_hosts(proc: Path = Path("/proc")) -> list[HostProcess]:
    """This user's host-actor processes whose parent is no longer a raylet.

    Returns an empty list where there is no ``/proc`` (not Linux).
    """
    if not proc.is_dir():
        return []
    found = []
    uid = os.getuid()
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if entry.stat().st_uid != uid:
                continue
            title = (entry / "cmdline").read_bytes()
            if not any(host in title for host in HOST_TITLES):
                continue
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            parent = int(fields[1])
            rss = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):
            continue  # it ended meanwhile
        if fields[0] == "Z" or _is_raylet(proc / str(parent)):
            continue
        name = title.replace(b"\0", b" ").decode(errors="replace").strip()
        found.append(HostProcess(int(entry.name), parent, rss, name))
    return sorted(found, key=lambda host: host.pid)


def _is_raylet(entry: Path) -> bool:
    try:
        return b"raylet" in (entry / "cmdline").read_bytes().split(b"\0", 1)[0]
    except OSError:
        return False


def end(hosts: list[HostProcess]) -> list[int]:
    """SIGKILL each host by pid; the pids that were still there."""
    ended = []
    for host in hosts:
        with contextlib.suppress(ProcessLookupError):
            os.kill(host.pid, signal.SIGKILL)
            ended.append(host.pid)
    return ended


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tf_accum.distributed.cleanup",
        description="List this user's accumulator-host processes whose raylet is gone "
        "(orphans of a dead Ray node); --kill ends them.",
    )
    parser.add_argument("--kill", action="store_true", help="end them (SIGKILL, by pid)")
    parser.add_argument(
        "pids", nargs="*", type=int, help="consider only these processes (default: all)"
    )
    args = parser.parse_args(argv)
    hosts = [host for host in orphaned_hosts() if not args.pids or host.pid in args.pids]
    if not hosts:
        print("no orphaned accumulator hosts")
        return 0
    for host in hosts:
        print(f"{host.pid}\tparent {host.parent}\t{host.rss_bytes / 2**20:.0f} MiB\t{host.title}")
    if args.kill:
        print(f"ended {len(end(hosts))} process(es)")
    else:
        print("(run again with --kill to end them)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
