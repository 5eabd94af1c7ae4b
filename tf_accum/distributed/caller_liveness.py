"""Which callers of a host actor are alive: the host learns of a caller's death.

Each caller calls ``hold`` once and keeps the (never resolved) result as its
life token, sending the token with its requests. The caller owns that result,
so once the caller dies, getting the token raises OwnerDiedError: a thread
per watched caller waits for that, and then runs ``on_death(caller)``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


class CallerLiveness:
    """The life tokens a host actor holds and watches, by caller id.

    Callers of every method hold ``lock`` (the host's); ``on_death`` is run
    holding it too.
    """

    def __init__(self, on_death: Callable[[str], None], lock: threading.Lock) -> None:
        self._on_death = on_death
        self._lock = lock
        self._watched: set[str] = set()
        self._holds: dict[str, threading.Event] = {}

    def hold(self, caller: str) -> threading.Event:
        """What ``caller``'s ``hold`` call waits on: set once it is forgotten."""
        return self._holds.setdefault(caller, threading.Event())

    def watch(self, caller: str, life: list[Any] | None) -> None:
        """Watch ``life[0]``, the caller's token, unless none was sent or one is watched."""
        if life and caller not in self._watched:
            self._watched.add(caller)
            threading.Thread(
                target=self._await_death,
                args=(caller, life[0]),
                name=f"tf_accum caller {caller[:12]}",
                daemon=True,
            ).start()

    def _await_death(self, caller: str, token: Any) -> None:
        import ray
        from ray.exceptions import OwnerDiedError

        try:
            ray.get(token)
            died = False
        except OwnerDiedError:
            died = True
        except Exception:
            # A token from an earlier incarnation of this actor: the caller
            # sends a fresh one once it learns of the restart.
            died = False
        with self._lock:
            if died:
                self._on_death(caller)
            else:
                self._watched.discard(caller)

    def forget(self, caller: str) -> None:
        """Stop watching a dead ``caller``; its ``hold`` call returns."""
        self._watched.discard(caller)
        hold = self._holds.pop(caller, None)
        if hold is not None:
            hold.set()
