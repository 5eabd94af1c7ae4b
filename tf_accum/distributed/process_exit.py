"""No Ray call, and no Ray object freed, once this process has started to exit.

At interpreter exit Ray disconnects this process (an ``atexit`` hook of its
own) while daemon threads still run: a queue runner waiting for a take on a ps
task, a Supervisor's timer. Two things then go wrong in such a thread:

- a call to Ray attaches again, from that thread, with ``ray.init()`` and no
  address: it joins whatever cluster it finds on the machine, or starts one,
  while the interpreter ends;
- a wait that Ray ends raises ``SystemExit`` in the thread, and when the frames
  it unwinds free their Ray object references, Ray ends the process at once
  with status 1 (the program's own exit status and the remaining ``atexit``
  hooks are lost).

So tf_accum's Ray calls ask ``refuse_when_exiting`` first, and a run that fails
while the process exits calls ``hold_thread_when_exiting``: a thread other than
the main one stays where it is until the interpreter ends, as a TensorFlow
daemon thread blocked in ``Session.run`` does. (Only daemon threads run by
then: the interpreter joins the others before its ``atexit`` hooks.)

The mark is set by an ``atexit`` hook registered at tf_accum's first Ray call,
so after ``import ray`` registered Ray's: hooks run last registered first, so
the mark is set before Ray starts to disconnect.
"""

from __future__ import annotations

import atexit
import threading

from tf_accum import errors

_exiting = threading.Event()
_lock = threading.Lock()
_watching = False


def _watch() -> None:
    global _watching
    if _watching:
        return
    with _lock:
        if not _watching:
            atexit.register(_exiting.set)
            _watching = True


def exiting() -> bool:
    """Whether this process has started to exit (its ``atexit`` hooks are running)."""
    _watch()
    return _exiting.is_set()


def refuse_when_exiting(what: str) -> None:
    """Raise instead of calling Ray for ``what`` when this process is exiting.

    Raises:
        CancelledError: the interpreter is exiting.
    """
    if exiting():
        raise errors.CancelledError(
            None,
            None,
            f"Cannot {what}: this process is exiting, and Ray is being disconnected from it",
        )


def hold_thread_when_exiting() -> None:
    """When this process is exiting, keep a thread other than the main one here until
    the interpreter ends (its frames keep their Ray object references); otherwise,
    and in the main thread, return at once."""
    if exiting() and threading.current_thread() is not threading.main_thread():
        threading.Event().wait()  # ends with the process, which is ending
