"""Going on after an accumulator's host process is lost: the recipe of the main job.

A host actor that dies is restarted by Ray, empty, as a restarted TF1
parameter server is. A take waiting on it fails with ``UnavailableError``;
later calls on its accumulators fail with ``NotFoundError`` saying the host
was restarted. A training loop goes on by making the accumulator again
under the same ``shared_name`` (every process reaches the same one) and, in
the chief, setting the global step back to the step its weights are at:
only the gradients waiting in the lost host are gone, so at most the step
in flight is lost. (Shown here for eager code; ``python -m tf_accum
--processes N`` runs it.)

    try:
        total = accumulator.take_grad(n)
    except (tfa.errors.UnavailableError, tfa.errors.NotFoundError) as error:
        if not host_lost(error):
            raise
        accumulator = remake(make_accumulator)
        accumulator.set_global_step(step)
        # then send the workers this step's weights again: those whose
        # gradients went with the host wait for the next step's weights

(The main job's chief publishes the same step's weights again, see
``ParameterServer.republish`` in :mod:`tf_accum.examples.workers`.)
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from tf_accum import errors

T = TypeVar("T")

REMAKE_WAIT = 30.0  # seconds a restarting host may take before giving up
_POLL = 0.2  # seconds between attempts while the host restarts


def host_lost(error: BaseException) -> bool:
    """Whether ``error`` says the accumulator's host died or was restarted.

    True for ``UnavailableError`` (the host is gone or restarting) and for a
    ``NotFoundError`` that says the host was restarted; False for a
    ``NotFoundError`` of an accumulator destroyed on purpose, or anything else.
    """
    if isinstance(error, errors.UnavailableError):
        return True
    return isinstance(error, errors.NotFoundError) and "was restarted" in error.message


def remake(make: Callable[[], T], timeout: float = REMAKE_WAIT) -> T:
    """Call ``make`` (which creates the accumulator by its shared_name) until its host answers.

    Returns:
        What ``make`` returned.

    Raises:
        UnavailableError: the host did not come back within ``timeout`` seconds.
        Whatever else ``make`` raises.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            return make()
        except errors.UnavailableError as error:
            if time.monotonic() >= deadline:
                raise errors.UnavailableError(
                    None,
                    None,
                    f"The accumulator's host did not come back within {timeout:g} s: "
                    f"{error.message}",
                ) from None
            time.sleep(_POLL)  # the restarting actor: poll, nothing to order
