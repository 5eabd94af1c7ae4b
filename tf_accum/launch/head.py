"""A Ray head of the launcher's own, for a job on this machine.

``ray start --head --block`` in a session of its own, prepared the way
:func:`tf_accum.distributed.connect` prepares a cluster it starts: every
server on the loopback interface only, no usage statistics, and token
authentication set in the environment, which the job's tasks inherit (so they
present the token the head demands): the user's token if there is one, else a
fresh one kept in the environment rather than written to the home directory.
Its files (sockets, logs, Ray's own output) go to a temporary directory of
its own, removed when it stops; its ports are free ones (the GCS's is picked
by the system as it binds), so it coexists with other clusters on the machine.

Stopping it ends, by pid, the ``ray start`` process and every process below
it or naming or holding open the head's directory (Ray's agents may outlive
their parent). A launcher that is killed cannot stop it: ``ray start`` then
gets SIGTERM from Linux, and stops the head itself.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tf_accum import errors
from tf_accum.examples.processes import descendants
from tf_accum.launch.tasks import ending_with_this_process, free_ports

# Seconds for ``ray start`` to report the head started (Ray takes a few on an idle machine).
START_TIMEOUT = 120.0
# Seconds the head gets to stop its processes before they are killed.
STOP_WAIT = 2.0
# Seconds to wait for killed processes to be gone.
GONE_WAIT = 10.0
# Seconds to keep looking for the head's processes once it is stopped.
SETTLE_WAIT = 2.0
_STARTED = b"Ray runtime started"
LOG_NAME = "head.log"  # ray start's output, in the head's directory
ADDRESS_FILE = "ray_current_cluster"  # the head's GCS address, in the head's directory
_POLL = 0.1  # seconds between looks at a starting head's output
# In the environment of every process of the head (Ray's own processes inherit it),
# with its directory, by which they are found (``holding``) when one outlives its
# parent (Ray's agents do).
MARKER = "TF_ACCUM_LAUNCH_HEAD"


class RayHead:
    """A running head: ``address`` is its GCS address (``127.0.0.1:port``), known once
    :meth:`wait_started` has returned."""

    def __init__(self, process: subprocess.Popen[bytes], temp_dir: str) -> None:
        self.process = process
        self.address = ""
        self.temp_dir = temp_dir

    def stop(self) -> None:
        """End the head and everything it started, then remove its directory.

        As ``ray stop`` does, but by pid: SIGTERM to every process at once, then
        SIGKILL to those still running after ``STOP_WAIT`` seconds. (With actors
        alive, Ray's servers take many seconds to stop on their own; the head's
        state is the job's, and the job is over.)"""
        below = descendants(self.process.pid) | holding(self.temp_dir)
        for pid in below | {self.process.pid}:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_WAIT
        while time.monotonic() < deadline and (
            self.process.poll() is None or any(alive(pid) for pid in below)
        ):
            time.sleep(_POLL)
        kill_and_wait(below | {self.process.pid})
        self.process.wait()
        # a raylet that outlived its parent may have started an agent since the first
        # look: look again for a while, and until none is left
        settled = time.monotonic() + SETTLE_WAIT
        deadline = time.monotonic() + GONE_WAIT
        while time.monotonic() < deadline:
            late = {pid for pid in holding(self.temp_dir) if alive(pid)}
            if late:
                kill_and_wait(late)
            elif time.monotonic() > settled:
                break
            else:
                time.sleep(_POLL)
        shutil.rmtree(self.temp_dir, ignore_errors=True)

    def output_tail(self, size: int = 3000) -> str:
        """The end of ``ray start``'s output (its messages about the head)."""
        try:
            return (Path(self.temp_dir) / LOG_NAME).read_bytes()[-size:].decode(errors="replace")
        except OSError:
            return ""

    def wait_started(self, timeout: float = START_TIMEOUT) -> None:
        """Return once the head accepts drivers.

        Raises:
            UnavailableError: it did not start within ``timeout`` seconds (the
                message quotes its output).
        """
        deadline = time.monotonic() + timeout
        while True:
            if _STARTED in (Path(self.temp_dir) / LOG_NAME).read_bytes():
                # where ``ray start`` notes the address of the head it started
                with contextlib.suppress(OSError):
                    self.address = (Path(self.temp_dir) / ADDRESS_FILE).read_text().strip()
                if self.address:
                    return
            if self.process.poll() is not None or time.monotonic() > deadline:
                state = (
                    f"exited with status {self.process.returncode}"
                    if self.process.returncode is not None
                    else f"did not start within {timeout:g} s"
                )
                raise errors.UnavailableError(
                    None,
                    None,
                    f"The Ray head (`ray start --head`) {state}; its output:\n{self.output_tail()}",
                )
            time.sleep(_POLL)


def prepare_environment() -> None:
    """Set, in this process's environment, what Ray reads for a private head on this
    machine (the tasks and the head inherit it)."""
    from tf_accum.distributed.connect import prepare_ray_environment

    prepare_ray_environment("local")


def start_head() -> RayHead:
    """Start a loopback-only Ray head; :meth:`RayHead.wait_started` waits until it is up.

    Raises:
        FailedPreconditionError: Ray is not installed.
    """
    if importlib.util.find_spec("ray") is None:
        raise errors.FailedPreconditionError(
            None, None, "The launcher needs Ray: pip install 'tf-accum[ray]'"
        )
    prepare_environment()
    # Short: Ray puts unix sockets under it (paths are limited to about 107 bytes).
    temp_dir = tempfile.mkdtemp(prefix="tfa", dir="/tmp" if os.path.isdir("/tmp") else None)
    client_port, agent_port = free_ports(2)
    command = [
        sys.executable,
        "-m",
        "ray.scripts.scripts",
        "start",
        "--head",
        "--block",
        "--node-ip-address=127.0.0.1",
        # The GCS, which every task connects to, takes a port the system picks as it
        # binds: a port found free beforehand may be taken again in between, and gRPC
        # servers share a port (SO_REUSEPORT), so the tasks' connections would be
        # shared out between this head and another process's server.
        "--port=0",
        f"--ray-client-server-port={client_port}",
        f"--dashboard-agent-listen-port={agent_port}",
        "--include-dashboard=false",
        "--disable-usage-stats",
        f"--temp-dir={temp_dir}",
    ]
    with (Path(temp_dir) / LOG_NAME).open("wb") as log:
        process = subprocess.Popen(
            ending_with_this_process(command),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a Ctrl-C at the terminal is the launcher's to handle
            env=dict(os.environ, **{MARKER: temp_dir}),
        )
    return RayHead(process, temp_dir)


def alive(pid: int) -> bool:
    """Whether ``pid`` is a process that has not exited (a zombie has)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def holding(path: str) -> set[int]:
    """Living processes that name ``path`` in their environment or command line, or
    hold a file under it open (Linux /proc; empty elsewhere).

    All three, since Ray retitles its processes (the new title may overwrite part of
    the environment too), but they keep their logs under the head's directory."""
    needle = path.encode()
    found = set()
    proc = Path("/proc")
    for entry in proc.iterdir() if proc.is_dir() else []:
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if (
                needle in (entry / "environ").read_bytes()
                or needle in (entry / "cmdline").read_bytes()
            ):
                found.add(int(entry.name))
                continue
            for fd in (entry / "fd").iterdir():
                with contextlib.suppress(OSError):
                    if os.readlink(fd).startswith(path):
                        found.add(int(entry.name))
                        break
        except OSError:
            continue
    return found


def kill_and_wait(pids: set[int], timeout: float = GONE_WAIT) -> None:
    """SIGKILL each of ``pids`` still running, and wait (bounded) until they are gone."""
    for pid in pids:
        if alive(pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(_POLL)
