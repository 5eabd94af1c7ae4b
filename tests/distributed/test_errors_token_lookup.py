"""Where the token check finds the token Ray would present (the one Ray presents, as
Ray itself reports it), and the refusals that need no cluster."""

from __future__ import annotations

import json
import logging
import os
import sys
import time

import pytest

from tests.distributed.conftest import ROOT, run_python
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


# For each case's settings (and the home directory the test gives), the token Ray
# presents to an address it is given (its loader's, in token mode), and tf_accum's.
AGREEMENT = """
import json, os, sys
from ray._raylet import (
    AuthenticationMode, AuthenticationTokenLoader, Config, get_authentication_mode
)
from tf_accum.distributed import auth

loader = AuthenticationTokenLoader.instance()
seen = []
for settings in json.loads(sys.argv[1]):
    for name in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        os.environ.pop(name, None)
    os.environ.update(settings)
    Config.initialize("")  # as Ray does when it sets the mode: it reads it again
    loader.reset_cache()
    token_mode = get_authentication_mode() == AuthenticationMode.TOKEN
    seen.append([loader.get_raw_token() if token_mode else None, auth.presented_token()])
print(json.dumps(seen))
"""


def test_the_token_presented_is_the_one_ray_presents(tmp_path):
    pytest.importorskip("ray")
    (tmp_path / ".ray").mkdir()
    (tmp_path / ".ray" / "auth_token").write_text("home-token\n")
    named = tmp_path / "token"
    named.write_text("file-token\n")
    cases = {
        # a token in the home directory is not presented unless token mode is set
        "home file, mode unset": ({}, None),
        "home file, token mode": ({"RAY_AUTH_MODE": "token"}, "home-token"),
        "home file, TOKEN mode": ({"RAY_AUTH_MODE": "TOKEN"}, "home-token"),
        "home file, disabled": ({"RAY_AUTH_MODE": "disabled"}, None),
        "environment, mode unset": ({"RAY_AUTH_TOKEN": "env-token"}, None),
        "named file, token mode": (
            {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(named)},
            "file-token",
        ),
        "environment and named file, token mode": (
            {
                "RAY_AUTH_MODE": "token",
                "RAY_AUTH_TOKEN": "env-token",
                "RAY_AUTH_TOKEN_PATH": str(named),
            },
            "env-token",
        ),
    }
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": str(ROOT),
        "HOME": str(tmp_path),
    }
    done = run_python(AGREEMENT, env, json.dumps([s for s, _ in cases.values()]))
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.splitlines()[-1])
    for (case, (_, expected)), (by_ray, by_tf_accum) in zip(cases.items(), seen, strict=True):
        assert by_ray == expected, case
        assert by_tf_accum == by_ray, case


def test_a_token_ray_does_not_present_is_named_in_the_missing_error(clean, tmp_path):
    (tmp_path / ".ray").mkdir()
    (tmp_path / ".ray" / "auth_token").write_text("home-token\n")
    presented = []

    def refused(address: str, token: str | None, timeout: float) -> bool:
        presented.append(token)
        return True  # as a cluster that demands a token answers a call without one

    clean.setattr(auth, "_refused", refused)
    with pytest.raises(errors.UnauthenticatedError) as raised:
        auth.check_token("127.0.0.1:9")
    assert presented == [None]  # Ray would present none: RAY_AUTH_MODE is unset
    message = str(raised.value)
    assert "requires a token and this process presents none (missing)" in message
    assert "it has one, in ~/.ray/auth_token" in message and "(it is unset;" in message
    assert message.endswith("run it with RAY_AUTH_MODE=token")
    clean.setenv("RAY_AUTH_MODE", "token")
    with pytest.raises(errors.UnauthenticatedError, match=r"\(wrong token\)"):
        auth.check_token("127.0.0.1:9")
    assert presented == [None, "home-token"]
