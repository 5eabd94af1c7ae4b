"""Run a command that ends when the process that started it ends (Linux).

``python ends_with_parent.py PARENT_PID COMMAND [ARGUMENT ...]`` asks Linux
to send this process SIGTERM once its parent ends (the parent-death signal
of ``prctl``, which Linux keeps across ``exec``), then replaces itself with
COMMAND: same process, same pid, no signal handler installed and nothing left
running beside it. So a task of a launcher that is killed (SIGKILL leaves it
no time to end its tasks) still gets the SIGTERM the launcher would have sent.

PARENT_PID is the pid of the process meant as the parent: if it has ended
already (the parent-death signal only covers a parent that ends later), this
exits at once, as a SIGTERM would have ended it.

The launcher runs this file by its path, so that no package is imported
before COMMAND starts; it uses the standard library only. Elsewhere than on
Linux it only runs COMMAND.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Sequence

PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


def ask_for_parent_death_signal(signum: int) -> bool:
    """Ask Linux to send ``signum`` to this process when its parent ends; whether it took."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_PDEATHSIG, int(signum), 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def main(argv: Sequence[str]) -> None:
    parent, command = int(argv[1]), list(argv[2:])
    if ask_for_parent_death_signal(signal.SIGTERM) and os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGTERM)  # the parent ended before the request took
    os.execv(command[0], command)


if __name__ == "__main__":
    main(sys.argv)
