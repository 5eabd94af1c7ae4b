"""Checking this process's Ray token before attaching, so a refusal is quick and says why.

Left to itself, Ray retries a refused token for many seconds on a GCS
address and reports a bare connection timeout over ``ray://``. One gRPC
call to the address, carrying the token as Ray would, answers at once whether
the cluster accepts it; anything but a refusal lets Ray attach as usual.
"""

from __future__ import annotations

import importlib
import logging
import os
from pathlib import Path
from typing import Any

from tf_accum import errors

logger = logging.getLogger("tf_accum")

# Seconds the token check waits for the cluster's answer.
CHECK_TIMEOUT = 3.0
# Seconds a ``ray://`` server keeps a vanished client's session for its
# reconnection (Ray's default: 30). Until it ends, a killed client's waiting
# takes keep their place in the queue; set RAY_CLIENT_RECONNECT_GRACE_PERIOD
# to keep sessions longer over an unreliable network.
CLIENT_GRACE_PERIOD = 1
CLIENT_PORT = 10001  # Ray Client's port when a ray:// address names none

# A method each server answers cheaply; only its authentication matters here.
_GCS_METHOD = "/ray.rpc.NodeInfoGcsService/GetClusterId"
_CLIENT_METHOD = "/ray.rpc.RayletDriver/ClusterInfo"
_TOKEN_PLACES = "RAY_AUTH_TOKEN, the file RAY_AUTH_TOKEN_PATH names, or ~/.ray/auth_token"


def prepare_client(address: str) -> None:
    """Bound how long a dead ``ray://`` process's session (and its takes) outlives it.

    Sets ``RAY_CLIENT_RECONNECT_GRACE_PERIOD`` (which Ray's client sends to the
    server when it connects) unless the user set it.
    """
    if address.startswith("ray://"):
        os.environ.setdefault("RAY_CLIENT_RECONNECT_GRACE_PERIOD", str(CLIENT_GRACE_PERIOD))


def find_token() -> str | None:
    """The token Ray would read in token mode, looked up where Ray looks; None if there is none."""
    found = _find_token_and_place()
    return found[0] if found else None


def _find_token_and_place() -> tuple[str, str] | None:
    """The token Ray would read in token mode, and where it is; None if there is none."""
    token = os.environ.get("RAY_AUTH_TOKEN", "").strip()
    if token:
        return token, "RAY_AUTH_TOKEN"
    named = os.environ.get("RAY_AUTH_TOKEN_PATH")
    if named:
        path, place = Path(named).expanduser(), f"the file RAY_AUTH_TOKEN_PATH names ({named})"
    else:
        path, place = Path.home() / ".ray" / "auth_token", "~/.ray/auth_token"
    try:
        token = path.read_text().strip()
    except OSError:
        return None
    return (token, place) if token else None


def presented_token() -> str | None:
    """The token Ray presents from this process to a cluster whose address it is given.

    The one :func:`find_token` finds, with ``RAY_AUTH_MODE=token``; none otherwise:
    Ray turns token mode on by itself when it finds a token only for a cluster it
    starts (``ray start``, a bare ``ray.init()``) or finds (``"auto"``), never for
    an address it is given.
    """
    return find_token() if _token_mode() else None


def _token_mode() -> bool:
    return os.environ.get("RAY_AUTH_MODE", "").lower() == "token"


def check_token(address: str, timeout: float = CHECK_TIMEOUT) -> None:
    """Raise UnauthenticatedError if the cluster at ``address`` will refuse this process.

    ``address`` is ``"host:port"`` of a GCS or ``"ray://host[:port]"``;
    ``"local"`` and ``"auto"`` are not checked. With ``RAY_AUTH_MODE=token``
    and no token anywhere, it raises without contacting the cluster. The call
    carries the token Ray itself will present: none unless ``RAY_AUTH_MODE`` is
    ``token``, even with a token in one of its places.

    Raises:
        UnauthenticatedError: the token is missing (token mode set and no token,
            or the cluster demands one and this process presents none) or wrong
            (the cluster refused the one this process presents).
    """
    if address in ("local", "auto"):
        return
    found = _find_token_and_place()
    if _token_mode() and found is None:
        raise errors.UnauthenticatedError(
            None,
            None,
            f"This process has no Ray token (missing) to present to the cluster at {address!r}: "
            f"RAY_AUTH_MODE=token is set, but none was found in {_TOKEN_PLACES}",
        )
    presented = presented_token()
    if not _refused(address, presented, timeout):
        return
    if presented is None and found is not None:
        mode = os.environ.get("RAY_AUTH_MODE")
        raise errors.UnauthenticatedError(
            None,
            None,
            f"The Ray cluster at {address!r} requires a token and this process presents none "
            f"(missing): it has one, in {found[1]}, but Ray presents it only with "
            f"RAY_AUTH_MODE=token (it is {'unset' if mode is None else repr(mode)}; Ray "
            f"turns token mode on by itself only for a cluster it starts or finds with "
            f"'auto'): run it with RAY_AUTH_MODE=token",
        )
    if presented is None:
        raise errors.UnauthenticatedError(
            None,
            None,
            f"The Ray cluster at {address!r} requires a token and this process has none "
            f"(missing): run it with RAY_AUTH_MODE=token and the cluster's token in "
            f"{_TOKEN_PLACES}",
        )
    raise errors.UnauthenticatedError(
        None,
        None,
        f"The Ray cluster at {address!r} refused this process's token (wrong token): run it "
        f"with RAY_AUTH_MODE=token and the cluster's own token in {_TOKEN_PLACES}",
    )


def _refused(address: str, token: str | None, timeout: float) -> bool:
    """Whether one authenticated call to ``address`` is refused for its token."""
    try:
        grpc: Any = importlib.import_module("grpc")  # the `ray` extra installs it
    except ImportError:
        logger.warning(
            "tf_accum cannot check this process's Ray token before attaching to %r: grpcio "
            "is not installed (pip install 'tf-accum[ray]' installs it); a refused token "
            "shows as Ray's own error, after its retries",
            address,
        )
        return False
    if address.startswith("ray://"):
        target, method = address[len("ray://") :], _CLIENT_METHOD
        if not target.rsplit("]", 1)[-1].count(":"):
            target = f"{target}:{CLIENT_PORT}"
    else:
        target, method = address, _GCS_METHOD
    metadata = [("authorization", f"Bearer {token}")] if token is not None else []
    channel = grpc.insecure_channel(target)
    try:
        call = channel.unary_unary(
            method, request_serializer=_identity, response_deserializer=_identity
        )
        call(b"", metadata=metadata, timeout=timeout)
    except grpc.RpcError as exc:
        return bool(exc.code() == grpc.StatusCode.UNAUTHENTICATED)
    finally:
        channel.close()
    return False


def _identity(data: bytes) -> bytes:
    return data
