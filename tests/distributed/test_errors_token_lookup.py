"""Where the token check finds the token Ray would present, and the missing-token
refusal that needs no cluster."""

from __future__ import annotations

import logging
import os
import sys
import time

import pytest

from tf_accum import errors
from tf_accum.distributed import auth

NAMES = (
    "RAY_AUTH_MODE",
    "RAY_AUTH_TOKEN",
    "RAY_AUTH_TOKEN_PATH",
    "RAY_CLIENT_RECONNECT_GRACE_PERIOD",
)


@pytest.fixture
def clean(monkeypatch, tmp_path):
    for name in NAMES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    return monkeypatch


def test_the_environment_comes_first_then_the_named_file_then_the_home_file(clean, tmp_path):
    assert auth.find_token() is None
    (tmp_path / ".ray").mkdir()
    (tmp_path / ".ray" / "auth_token").write_text("home-token\n")
    assert auth.find_token() == "home-token"
    named = tmp_path / "token"
    named.write_text("  file-token \n")
    clean.setenv("RAY_AUTH_TOKEN_PATH", str(named))
    assert auth.find_token() == "file-token"
    clean.setenv("RAY_AUTH_TOKEN", "env-token")
    assert auth.find_token() == "env-token"


def test_token_mode_without_a_token_is_refused_before_any_connection(clean):
    clean.setenv("RAY_AUTH_MODE", "token")
    start = time.monotonic()
    with pytest.raises(errors.UnauthenticatedError, match=r"no Ray token \(missing\)"):
        auth.check_token("127.0.0.1:9")  # nothing listens there: never contacted
    assert time.monotonic() - start < 1.0


def test_local_and_auto_are_not_checked(clean):
    clean.setenv("RAY_AUTH_MODE", "token")
    auth.check_token("local")
    auth.check_token("auto")


def test_only_a_ray_client_address_gets_the_short_grace_period(clean):
    # recorded by monkeypatch first, so what prepare_client sets is undone after the test
    clean.setenv("RAY_CLIENT_RECONNECT_GRACE_PERIOD", "unset")
    clean.delenv("RAY_CLIENT_RECONNECT_GRACE_PERIOD")
    auth.prepare_client("127.0.0.1:6379")
    assert "RAY_CLIENT_RECONNECT_GRACE_PERIOD" not in os.environ
    auth.prepare_client("ray://127.0.0.1:10001")
    assert os.environ["RAY_CLIENT_RECONNECT_GRACE_PERIOD"] == "1"
    clean.setenv("RAY_CLIENT_RECONNECT_GRACE_PERIOD", "20")  # the user's choice stays
    auth.prepare_client("ray://127.0.0.1:10001")
    assert os.environ["RAY_CLIENT_RECONNECT_GRACE_PERIOD"] == "20"


def test_the_ray_extra_installs_what_the_token_check_imports() -> None:
    """The check calls the cluster with grpcio: the `ray` extra must bring it (Ray's
    own requirements do not), or every check would quietly pass."""
    from importlib.metadata import PackageNotFoundError, requires

    from tests.test_readme import EXTRAS

    (ray,) = [name for name in EXTRAS["ray"] if name.startswith("ray")]
    assert ray.startswith("ray[client]"), EXTRAS["ray"]
    try:
        requirements = requires("ray") or []
    except PackageNotFoundError:
        pytest.skip("Ray is not installed")
    assert any(r.startswith("grpcio") and 'extra == "client"' in r for r in requirements)


def test_without_grpcio_the_check_says_it_cannot_check(clean, caplog):
    clean.setitem(sys.modules, "grpc", None)  # as if not installed: importing fails
    with caplog.at_level(logging.WARNING, logger="tf_accum"):
        assert auth._refused("127.0.0.1:9", "token", 0.1) is False
    assert "grpcio is not installed" in caplog.text
    assert "tf-accum[ray]" in caplog.text
