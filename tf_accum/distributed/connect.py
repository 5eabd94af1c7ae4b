"""Attaching this process to a Ray cluster, safely, and making the table.

Ray is imported here, lazily: ``import tf_accum`` never imports it, and
without Ray installed only these calls fail (with a message saying so).
"""

from __future__ import annotations

import importlib
import ipaddress
import logging
import os
import secrets
import socket
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

from tf_accum import errors
from tf_accum.distributed import auth
from tf_accum.resources import set_table

if TYPE_CHECKING:
    from tf_accum.distributed.table import RayResourceTable

# Seconds to wait for a cluster's address to accept a connection.
CONNECT_TIMEOUT = 10.0
# Seconds to wait for a cluster that accepts connections to let this process in.
ATTACH_TIMEOUT = 60.0

_LOOPBACK_NAMES = ("localhost", "local")

# Ray's client proxy starts a server process for each new ``ray://`` client. On a
# loaded machine that start sometimes fails inside the proxy (the process ends
# early, or the proxy checks it after it has gone) and the proxy says so at once;
# a new client gets a new server, so attaching again is the remedy.
PROXY_START_TRIES = 3
_PROXY_START_FAILURES = ("Starting Ray client server failed", "in start_specific_server")

logger = logging.getLogger("tf_accum")


class _Fork:
    # Set in a child forked from a process attached to Ray: the child inherits
    # the attachment's state but not a working connection.
    from_attached = False


def _note_fork_in_child() -> None:
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        _Fork.from_attached = True


if hasattr(os, "register_at_fork"):  # not on Windows
    os.register_at_fork(after_in_child=_note_fork_in_child)


def refuse_after_fork() -> None:
    """Raise UnavailableError in a child forked from a process attached to Ray."""
    if _Fork.from_attached:
        raise errors.UnavailableError(
            None,
            None,
            f"This process (pid {os.getpid()}) was forked from one attached to a Ray "
            "cluster, and Ray's connection does not survive fork: start worker processes "
            "with the 'spawn' or 'forkserver' start method (or as new programs), and let "
            "them attach with tfa.distributed.connect or TF_ACCUM_RAY_ADDRESS",
        )


def connect(
    address: str = "local",
    *,
    timeout: float = ATTACH_TIMEOUT,
    host_options: dict[str, Any] | None = None,
    **init_options: Any,
) -> RayResourceTable:
    """Make accumulators live in Ray actors, for this whole process.

    Every later constructor op (and compat class) in the process makes its
    accumulator on the cluster. Call it before making accumulators: handles
    made earlier belong to the replaced table (NotFoundError from then on).

    Args:
        address: ``"local"`` starts a one-machine cluster inside this process,
            listening on loopback only (it stops when the process exits);
            otherwise a running cluster's address (``"host:port"`` of its head,
            or ``"auto"`` for the one ``ray start`` made on this machine).
        timeout: seconds to wait for a running cluster to answer (nothing
            listening fails after at most ``CONNECT_TIMEOUT``).
        host_options: extra Ray actor options for the host actors (see
            ``RayResourceTable``).
        **init_options: passed to ``ray.init`` (e.g. ``object_store_memory``,
            ``_temp_dir``, ``log_to_driver``). Ignored if Ray is already
            initialized in this process: its connection is used as it is.
            Ray's own logger shows warnings and errors only, unless
            ``logging_level`` says otherwise.

    Returns:
        The table, now installed (``tf_accum.resources.set_table``).

    Raises:
        UnavailableError: nothing answers at ``address`` within the timeout,
            or Ray failed to start or attach. (After a timeout, Ray's attempt
            may linger in a background thread: start a fresh process.)
        UnauthenticatedError: the cluster refused this process's token, or
            it has none (the message says which), within a few seconds.
        FailedPreconditionError: Ray is not installed (``pip install 'tf-accum[ray]'``).
    """
    table = table_for_address(address, timeout=timeout, host_options=host_options, **init_options)
    set_table(table)
    return table


def table_for_address(
    address: str,
    *,
    timeout: float = ATTACH_TIMEOUT,
    host_options: dict[str, Any] | None = None,
    **init_options: Any,
) -> RayResourceTable:
    """Attach to the cluster at ``address`` (see ``connect``) and return a table on it.

    Unlike ``connect`` it installs nothing. ``TF_ACCUM_RAY_ADDRESS`` uses it.
    """
    _attach(address, init_options, timeout)
    from tf_accum.distributed.table import RayResourceTable

    return RayResourceTable(host_options)


def attach(address: str, timeout: float = ATTACH_TIMEOUT, **init_options: Any) -> None:
    """Attach this process to the Ray cluster at ``address`` (see ``connect``); no table.

    Nothing happens when Ray is attached already. Raises as ``connect`` does.
    """
    _attach(address, init_options, timeout)


def is_loopback(address: str) -> bool:
    """Whether ``address`` (``"local"``, ``"host:port"``, ...) is on this machine's loopback."""
    host = address.split("://", 1)[-1].rsplit(":", 1)[0].strip("[]")
    if host in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


# Ray's settings read from the environment that tf_accum chooses unless the user
# set them, and the constant of ray._private.ray_constants holding Ray's
# reading of each (Ray reads them once, when it is imported).
_LOOPBACK_ONLY = ("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "ENABLE_RAY_CLUSTER", "0", False)
_NO_FAILURE_DUMP = (
    "RAY_DISABLE_FAILURE_SIGNAL_HANDLER",
    "RAY_DISABLE_FAILURE_SIGNAL_HANDLER",
    "1",
    True,
)


def prepare_ray_environment(address: str) -> None:
    """Settings Ray reads from the environment, set before it attaches.

    Processes Ray starts inherit them (so do the ones the caller starts). When
    the program imported Ray first, Ray's readings are brought in line.
    """
    # No usage statistics leave the machine, unless the user asked for them.
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    # Ray's handler of fatal signals in this process (SIGTERM among them)
    # prints a native stack dump: a process asked to stop ends quietly instead.
    _choose(*_NO_FAILURE_DUMP)
    auth.prepare_client(address)
    if is_loopback(address):
        # Without this, Ray's servers listen on every interface even for a
        # loopback node address, and Ray takes a loopback address for another
        # interface's; with it, everything stays on 127.0.0.1.
        _choose(*_LOOPBACK_ONLY)
    if address == "local":
        _choose_token_for_a_new_cluster()
    # A Ray imported earlier read its authentication settings then: it reads the
    # ones in force now (the processes it starts get these, and they must agree)
    _reload_ray_config()


def _choose(variable: str, constant: str, value: str, reading: bool) -> None:
    """Set ``variable`` to ``value`` unless the user set it, and Ray's reading with it."""
    if variable in os.environ:
        return
    os.environ[variable] = value
    constants = sys.modules.get("ray._private.ray_constants")
    if constants is not None:
        setattr(constants, constant, reading)


def _reload_ray_config() -> None:
    """Make an imported Ray read its authentication settings from the environment again."""
    if sys.modules.get("ray") is None:  # not imported (or blocked: not installed)
        return
    raylet: Any = importlib.import_module("ray._raylet")  # as Ray does when it sets the mode
    raylet.Config.initialize("")
    raylet.AuthenticationTokenLoader.instance().reset_cache()


def _choose_token_for_a_new_cluster() -> None:
    """Token mode, in the environment, for a cluster started from this process (by
    ``ray.init()`` here, or by the launcher's ``ray start``), unless the user set
    another mode: the user's token if there is one, else a fresh one.

    Ray turns token mode on by itself for a cluster it starts, but in a process
    given the cluster's address (the launcher's tasks) only with
    ``RAY_AUTH_MODE=token``: set here, every process started from this one
    inherits the mode and presents the token the cluster has.
    """
    if os.environ.get("RAY_AUTH_MODE", "").lower() not in ("", "token"):
        return
    os.environ["RAY_AUTH_MODE"] = "token"
    if auth.find_token() is None:
        # Ray's default writes a token file into the home directory; the cluster
        # gets a fresh token kept in the environment instead.
        os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)


def _check_reachable(address: str, timeout: float) -> None:
    """Fail fast and clearly when nothing listens at ``host:port``."""
    if address in ("local", "auto") or "://" in address or ":" not in address:
        return
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            pass
    except (OSError, ValueError) as exc:
        raise errors.UnavailableError(
            None,
            None,
            f"No Ray cluster answers at {address!r} ({exc}). Start one with `ray start --head` "
            "(the README's 'Across processes' section shows a loopback-only one, with its "
            "token), or pass 'local' to start one in this process.",
        ) from None


class _DropSigtermNotice(logging.Filter):
    """Drops Ray's notice that it set no SIGTERM handler: attaching from a thread of its
    own, tf_accum leaves SIGTERM as the program has it, on purpose."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "SIGTERM handler is not set" not in record.getMessage()


# Never set: the thread that attached this process waits on it for ever.
_never = threading.Event()


def _init_within(ray: Any, address: str, options: dict[str, Any], timeout: float) -> None:
    """``ray.init`` with a deadline, in a thread of its own that then stays.

    An address that accepts connections but where no cluster answers (not Ray,
    or a hung head) makes Ray retry for minutes. ``ray.init`` in the main thread
    would replace the program's SIGTERM handling with Ray's. And the processes
    of a cluster Ray starts end when the thread that started them ends (Linux
    ties a child's fate to the parent thread), so that thread stays, idle,
    until the process exits.
    """
    outcome: list[BaseException] = []
    done = threading.Event()

    def attach() -> None:
        try:
            ray.init(address=address, **options)
        except BaseException as exc:  # handed to the caller
            outcome.append(exc)
            return
        finally:
            done.set()
        _never.wait()

    ray_logger = logging.getLogger("ray._private.worker")
    notice = _DropSigtermNotice()
    ray_logger.addFilter(notice)
    try:
        thread = threading.Thread(target=attach, name="tf_accum-ray-attach", daemon=True)
        thread.start()
        done.wait(timeout)
    finally:
        ray_logger.removeFilter(notice)
    if not done.is_set():
        if address == "local":
            raise errors.UnavailableError(
                None, None, f"Ray did not start a cluster in this process within {timeout:g} s"
            )
        raise errors.UnavailableError(
            None,
            None,
            f"Something listens at {address!r}, but no Ray cluster answered within "
            f"{timeout:g} s (is it a Ray head's GCS port, and is the head healthy?)",
        )
    if outcome:
        raise outcome[0]


def proxy_start_failed(exc: BaseException) -> bool:
    """Whether ``ray.init`` failed because Ray's client proxy could not start this
    client's server (worth another try: the next client gets another server)."""
    text = str(exc)
    return "Initialization failure from server" in text and any(
        failure in text for failure in _PROXY_START_FAILURES
    )


def _init_retrying(ray: Any, address: str, options: dict[str, Any], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    for attempt in range(1, PROXY_START_TRIES + 1):
        remaining = timeout if attempt == 1 else max(deadline - time.monotonic(), 0.0)
        try:
            _init_within(ray, address, options, remaining)
            return
        except ConnectionError as exc:
            if attempt == PROXY_START_TRIES or not proxy_start_failed(exc):
                raise
            logger.info(
                "Ray's client proxy at %s could not start a server for this process; "
                "attaching again (try %d of %d)",
                address,
                attempt + 1,
                PROXY_START_TRIES,
            )


def _ray_attached() -> bool:
    ray = sys.modules.get("ray")
    return ray is not None and bool(ray.is_initialized())


# Held while this process attaches, so that threads racing to attach make one
# ``ray.init`` between them (the others find Ray attached).
_attach_lock = threading.RLock()


def attach_as_configured(who: str) -> None:
    """Attach this process to Ray unless it is: to ``TF_ACCUM_RAY_ADDRESS``, else to
    a new one-machine cluster in this process (with a warning naming ``who``).

    Raises as ``connect`` does.
    """
    from tf_accum.resources.current import RAY_ADDRESS_VARIABLE

    with _attach_lock:
        if _ray_attached():
            return
        address = os.environ.get(RAY_ADDRESS_VARIABLE)
        if not address:
            logger.warning(
                "%s: no Ray cluster attached and %s is not set; starting a one-machine "
                "cluster in this process, which other processes cannot reach",
                who,
                RAY_ADDRESS_VARIABLE,
            )
            address = "local"
        _attach(address, {}, ATTACH_TIMEOUT)


def _attach(address: str, init_options: dict[str, Any], timeout: float) -> None:
    refuse_after_fork()
    with _attach_lock:
        if _ray_attached():
            return
        prepare_ray_environment(address)
        try:
            import ray
        except ImportError:
            raise errors.FailedPreconditionError(
                None,
                None,
                "Distributed accumulators need Ray: pip install 'tf-accum[ray]'",
            ) from None
        _check_reachable(address, min(timeout, CONNECT_TIMEOUT))
        auth.check_token(address, min(timeout, auth.CHECK_TIMEOUT))
        options: dict[str, Any] = {"include_dashboard": False} if address == "local" else {}
        # Ray's own logger (not the program's): its INFO lines ("Connecting to existing
        # Ray cluster ...", "Started a local Ray instance.") say nothing the program
        # asked for; its warnings and errors still show
        options["logging_level"] = logging.WARNING
        options.update(init_options)
        try:
            _init_retrying(ray, address, options, timeout)
        except (
            ray.exceptions.RayError,
            ConnectionError,
            RuntimeError,
            TimeoutError,
            ValueError,
        ) as exc:
            if _refused_token(exc):
                raise errors.UnauthenticatedError(
                    None,
                    None,
                    f"The Ray cluster at {address!r} refused this process's token; run it "
                    "with RAY_AUTH_MODE=token and the cluster's token in RAY_AUTH_TOKEN or in "
                    "the file RAY_AUTH_TOKEN_PATH names",
                ) from None
            raise errors.UnavailableError(
                None, None, f"Could not attach to the Ray cluster at {address!r}: {exc}"
            ) from None


def _refused_token(exc: BaseException) -> bool:
    """Whether Ray's error (or one it was raised from) says the token was refused."""
    from ray.exceptions import AuthenticationError

    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, AuthenticationError) or "InvalidAuthToken" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False
