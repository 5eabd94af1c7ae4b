"""Which callers of a host actor are alive: the host learns of a caller's death.

Each caller calls ``hold`` once and keeps the (never resolved) result as its
life token, sending the token with its requests. The caller owns that result,
so once the caller dies, awaiting the token raises OwnerDiedError: that is
how the host learns of the death, and it then runs ``on_death(caller)``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any


class CallerLiveness:
    """The life tokens a host actor holds and watches, by caller id."""

    def __init__(self, on_death: Callable[[str], None]) -> None:
        self._on_death = on_death
        self._watched: dict[str, asyncio.Task[None]] = {}
        self._holds: dict[str, asyncio.Future[None]] = {}

    async def hold(self, caller: str) -> None:
        """Never returns while ``caller`` lives (until ``forget(caller)``)."""
        future = self._holds.setdefault(caller, asyncio.get_running_loop().create_future())
        await future

    def watch(self, caller: str, life: list[Any] | None) -> None:
        """Watch ``life[0]``, the caller's token, unless none was sent or one is watched."""
        if life and caller not in self._watched:
            self._watched[caller] = asyncio.ensure_future(self._await_death(caller, life[0]))

    async def _await_death(self, caller: str, token: Any) -> None:
        from ray.exceptions import OwnerDiedError

        try:
            await token
        except OwnerDiedError:
            self._on_death(caller)
        except Exception:
            # A token from an earlier incarnation of this actor: the caller
            # sends a fresh one once it learns of the restart.
            del self._watched[caller]

    def forget(self, caller: str) -> None:
        """Stop watching a dead ``caller``; its ``hold`` call returns."""
        self._watched.pop(caller, None)
        hold = self._holds.pop(caller, None)
        if hold is not None and not hold.done():
            hold.set_result(None)
