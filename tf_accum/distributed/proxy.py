"""The caller's side: a link to one container's host actor, and accumulator proxies.

A proxy satisfies the ``Accumulator`` protocol by calling its host and waiting
for the answer (the order of calls matters, and calls to an async actor are
not run in submission order unless each one is waited for, as TensorFlow's
Session.run does). Ray's exceptions never reach the user: a dead or
restarting host is UnavailableError, anything else Ray reports is
UnavailableError or InternalError.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import threading
from typing import Any

import numpy as np

from tf_accum import errors
from tf_accum.accumulators.attempts import Cancellation, copy_error
from tf_accum.accumulators.interrupts import holding, interruptible, joined
from tf_accum.accumulators.spec import AccumulatorSpec
from tf_accum.distributed import bulk
from tf_accum.distributed.process_exit import hold_thread_when_exiting, refuse_when_exiting
from tf_accum.distributed.small_messages import is_small, pack, unpack
from tf_accum.distributed.wire import MISSING, RESTARTED, WITHDRAWN, Failure
from tf_accum.resources.errors import missing_resource_error

logger = logging.getLogger("tf_accum")

Array = np.ndarray[Any, Any]

# How long an interrupted take waits for its host to answer its withdrawal
# before the interrupt is raised.
INTERRUPTED_TAKE_GRACE = 5.0  # seconds


def _writable(array: Array) -> Array:
    # Ray hands results over as read-only views of its buffers.
    return array if array.flags.writeable else array.copy()


def ray_error(exc: BaseException, what: str) -> errors.OpError:
    """The tf_accum error for an exception Ray raised while calling a host."""
    from ray import exceptions

    if isinstance(exc, exceptions.RayTaskError):
        return errors.InternalError(None, None, f"{what} failed inside its host: {exc}")
    if isinstance(exc, (exceptions.RayActorError, exceptions.ActorUnavailableError)):
        return errors.UnavailableError(
            None,
            None,
            f"{what}: its host process died or is restarting ({type(exc).__name__}); "
            "the accumulators it held are lost, and a restarted host starts empty",
        )
    return errors.UnavailableError(None, None, f"{what}: the Ray cluster failed ({exc})")


class HostLink:
    """One incarnation of a host actor (a container's, or a TF1 task's), as this
    process talks to it.

    ``life`` is this process's life token for the host (see
    ``ResourceHost.hold``; made here unless given): sent with creates and takes
    so the host can withdraw this process's takes, and destroy its private
    accumulators, once it dies. ``life_sent``: the host has it already (a TF1
    task's host, which this process joined with it).
    """

    def __init__(
        self,
        container: str,
        actor: Any,
        instance: str,
        caller: str,
        same_machine: bool = False,
        life: list[Any] | None = None,
        life_sent: bool = False,
    ) -> None:
        self.container = container  # the container, or the task's label
        self.actor = actor
        self.instance = instance
        self.caller = caller
        self.life = [actor.hold.remote(caller)] if life is None else life
        self.life_sent = life_sent
        self.stale = False
        self._attempts = itertools.count()
        self._run = actor.run
        self._same_machine = same_machine and bulk.available()
        self._buffers = threading.local()

    def buffer(self, nbytes: int) -> bulk.CallerBuffer | None:
        """This thread's shared-memory buffer with room for ``nbytes``, when worth it."""
        if nbytes < bulk.THRESHOLD or not self._same_machine:
            return None
        found: bulk.CallerBuffer | None = getattr(self._buffers, "buffer", None)
        if found is not None and found.size >= nbytes:
            return found
        if found is not None:
            self.submit("release_buffer", found.name)
            found.close()
        try:
            fresh = bulk.CallerBuffer(nbytes, self.caller)
        except OSError:
            self._same_machine = False  # no room in /dev/shm: Ray's object store it is
            return None
        outcome = self.call("attach_buffer", fresh.describe())
        fresh.host_mapped()  # mapped (or refused): either way the name is not needed
        if type(outcome) is Failure:
            fresh.close()
            self._same_machine = False
            return None
        self._buffers.buffer = fresh
        return fresh

    def drop_buffer(self) -> None:
        """Stop using this thread's buffer (a call that may still read it was given up):
        the next call that needs one makes another."""
        found: bulk.CallerBuffer | None = getattr(self._buffers, "buffer", None)
        if found is None:
            return
        self._buffers.buffer = None
        with contextlib.suppress(Exception):
            self.submit("release_buffer", found.name)  # the host unmaps it once unused
        found.close()

    def call(self, method: str, *args: Any) -> Any:
        """Call the host and wait; returns its result, which may be a Failure."""
        return self.result(self.submit(method, *args))

    def submit(self, method: str, *args: Any) -> Any:
        """Call the host without waiting; returns the call's ObjectRef for :meth:`result`."""
        import ray

        refuse_when_exiting(f"call the accumulator host of container {self.container}")
        # small arguments (a tiny gradient, counts, ids) travel pickled by us: see
        # small_messages; anything else (a spec, a life token, a large array) is Ray's
        message: Any = (method, *args)
        if is_small(args):
            message = pack(message)
        try:
            return self._run.remote(message)
        except ray.exceptions.RayError as exc:
            raise self._ray_error(exc) from None

    @interruptible  # Ctrl-C stops a wait on the host at once, even when deferred
    def result(self, call: Any, timeout: float | None = None) -> Any:
        """Wait for a submitted call (at most ``timeout`` seconds: then UnavailableError)."""
        import ray

        refuse_when_exiting(f"wait for the accumulator host of container {self.container}")
        try:
            found = ray.get(call, timeout=timeout)
        except ray.exceptions.RayError as exc:
            hold_thread_when_exiting()
            raise self._ray_error(exc) from None
        except BaseException:
            hold_thread_when_exiting()
            raise
        return unpack(found) if type(found) is bytes else found

    def _ray_error(self, exc: BaseException) -> errors.OpError:
        import ray

        if isinstance(exc, (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError)):
            self.stale = True
        return ray_error(exc, f"the accumulator host of container {self.container}")

    def life_once(self) -> list[Any] | None:
        """The life token, the first time only (an ObjectRef in a call's arguments
        costs Ray a borrow: a request sends it once)."""
        if self.life_sent:
            return None
        self.life_sent = True
        return self.life

    def new_attempt(self) -> str:
        return f"{self.caller}:{next(self._attempts)}"

    def give_back(self, attempt: str) -> None:
        """Ask the host to put back the round of ``attempt``, which reached
        this process but not the program (not waited for; never raises, as
        :meth:`withdraw`)."""
        with contextlib.suppress(errors.OpError):
            self.submit("give_back", attempt)

    def withdraw(self, attempt: str, reason: str) -> None:
        # Not waited for: the take's own call returns once it is withdrawn.
        # Never raises: it runs while an interrupt is handled (which an error
        # would replace) and as a cancellation callback (where it would stop
        # the run's other takes being cancelled). A host that cannot be called
        # fails the take's own call instead.
        with contextlib.suppress(errors.OpError):
            self.submit("withdraw", self.instance, attempt, reason)


class _HostRounds:
    """What a delivery gives a remote take's round back through (see
    tf_accum/accumulators/interrupts.py): its host, which puts the round back
    if it still has it."""

    __slots__ = ("link",)

    def __init__(self, link: HostLink) -> None:
        self.link = link

    def cancel(self, attempt: str, reason: str) -> bool:
        self.link.give_back(attempt)
        return False  # not known here


class RemoteAccumulator:
    """An accumulator held by a host actor (satisfies ``Accumulator``)."""

    __slots__ = ("spec", "label", "_link", "entry_id", "_result_bytes")

    def __init__(self, link: HostLink, entry_id: int, spec: AccumulatorSpec, label: str) -> None:
        self.spec = spec
        self.label = label
        self._link = link
        self.entry_id = entry_id
        # A dense take's result size, when the declared shape fixes it (0: unknown).
        self._result_bytes = 0
        if spec.kind == "dense" and spec.shape is not None and None not in spec.shape:
            elements = int(np.prod([d for d in spec.shape if d is not None], dtype=np.int64))
            self._result_bytes = elements * spec.dtype.numpy_dtype.itemsize

    @property
    def link(self) -> HostLink:
        return self._link

    def _call(self, method: str, *args: Any) -> Any:
        link = self._link
        outcome = link.call(method, link.instance, self.entry_id, *args)
        if type(outcome) is Failure:
            raise self._error(outcome)
        return outcome

    def _error(self, failure: Failure) -> errors.OpError:
        if failure.kind == MISSING:
            return missing_resource_error(self.label)
        if failure.kind == RESTARTED:
            self._link.stale = True
            gone = missing_resource_error(self.label)
            return errors.NotFoundError(
                None,
                None,
                f"{gone.message} Its host (container {self._link.container}) was restarted "
                "since the accumulator was made: accumulators do not survive a restart.",
            )
        return failure.error()

    def apply_dense(self, local_step: int, gradient: Array, owned: bool = False) -> None:
        # ``owned`` cannot help here: the gradient is copied to the host anyway.
        buffer = self._link.buffer(gradient.nbytes)
        self._call("apply_dense", local_step, gradient if buffer is None else buffer.put(gradient))

    def apply_sparse(
        self,
        local_step: int,
        indices: Array,
        values: Array,
        gradient_shape: Array | None,
        owned: bool = False,
    ) -> None:
        self._call("apply_sparse", local_step, indices, values, gradient_shape)

    def take(
        self,
        num_required: int,
        timeout: float | None = None,
        cancellation: Cancellation | None = None,
    ) -> Any:
        link = self._link
        attempt = link.new_attempt()
        key = None
        if cancellation is not None:
            key = cancellation.register(lambda _error: link.withdraw(attempt, "cancelled"))
        buffer = link.buffer(self._result_bytes)
        call, outcome = None, None
        try:
            call = link.submit(
                "take",
                link.instance,
                self.entry_id,
                num_required,
                timeout,
                attempt,
                link.caller,
                link.life,
                None if buffer is None else buffer.describe(),
                # Cancelled already: a take that completes at once still does;
                # one that would wait fails without queueing.
                cancellation is not None and key is None,
            )
            outcome = link.result(call)
            if type(outcome) is not Failure:
                result = self._result(outcome, buffer)
                # until the public call returns, an exception gives the round back
                joined(_HostRounds(link), attempt)
                return result
        except BaseException as exc:
            if isinstance(exc, errors.OpError):
                raise
            if outcome is None:
                # An interrupted caller must not leave a take behind to eat a round.
                link.withdraw(attempt, "interrupted")
                if call is None:
                    # it may have been submitted, and served at once
                    link.give_back(attempt)
                    raise
                outcome = self._served_before(call, exc, attempt)
            elif not holding(exc):
                # the round reached this process, not the program: it goes back
                link.give_back(attempt)
                raise
        finally:
            if cancellation is not None:
                cancellation.unregister(key)
        if type(outcome) is Failure:
            if outcome.kind == WITHDRAWN:
                if cancellation is not None and cancellation.error is not None:
                    raise copy_error(cancellation.error)
                raise errors.AbortedError(None, None, "The take was withdrawn by its host")
            raise self._error(outcome)
        return self._result(outcome, buffer)

    @staticmethod
    def _result(outcome: Any, buffer: bulk.CallerBuffer | None) -> Any:
        """A served take's outcome as the arrays the caller gets."""
        if type(outcome) is bulk.Bulk:
            assert buffer is not None
            return buffer.take_out(outcome)
        if isinstance(outcome, np.ndarray):
            return _writable(outcome)
        return type(outcome)(*(_writable(part) for part in outcome))

    def _served_before(self, call: Any, interrupt: BaseException, attempt: str) -> Any:
        """The outcome of a take interrupted while it waited, once its host has
        the withdrawal: the round the host served just before, if it did and
        the program defers interrupts (``deferred_interrupts``: the take
        returns the round and ``interrupt`` follows once the call has
        returned). Otherwise ``interrupt`` is raised, and such a round goes
        back to the host (when the host still has it: see
        ``host._Host.give_back``); at once if the host does not answer
        within INTERRUPTED_TAKE_GRACE or the caller is interrupted again.
        """
        served, outcome = False, None
        try:
            outcome = self._link.result(call, timeout=INTERRUPTED_TAKE_GRACE)
            served = type(outcome) is not Failure
        except BaseException:  # pressed again, or the host did not answer in time
            pass
        if served and holding(interrupt):
            return outcome
        # served, or not known (the host may serve it before the withdrawal)
        self._link.give_back(attempt)
        raise interrupt

    def num_accumulated(self) -> int:
        count: int = self._call("num_accumulated")
        return count

    def set_global_step(self, new_global_step: int) -> None:
        previous = self._call("set_global_step", new_global_step)
        if new_global_step < previous:
            logger.warning(
                "Attempt to set the global step of %s to a smaller value: %d -> %d",
                self.label,
                previous,
                new_global_step,
            )

    def global_step(self) -> int:
        """The current global step (not part of the protocol; for tests and diagnostics)."""
        step: int = self._call("global_step")
        return step

    def stats(self) -> dict[str, int | None]:
        found: dict[str, int | None] = self._call("stats")
        return found

    def num_waiting(self) -> int:
        count: int = self._call("num_waiting")
        return count

    def destroy(self) -> bool:
        """Destroy in the host; False if it was already gone (destroyed elsewhere, or lost)."""
        link = self._link
        try:
            outcome = link.call("destroy", link.instance, self.entry_id)
        except errors.UnavailableError:
            return False  # its host died: the accumulator is gone with it
        if type(outcome) is Failure:
            if outcome.kind == RESTARTED:
                link.stale = True
            return False
        return True
