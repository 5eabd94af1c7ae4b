"""The Ray settings tf_accum chooses when it attaches: set unless the user set them, and
brought to a Ray the program imported first (Ray reads them once, at import)."""

from __future__ import annotations

import importlib
import os
import sys
import types

import pytest

connect = importlib.import_module("tf_accum.distributed.connect")

VARIABLE, CONSTANT = "RAY_DISABLE_FAILURE_SIGNAL_HANDLER", "RAY_DISABLE_FAILURE_SIGNAL_HANDLER"


@pytest.fixture
def imported_ray(monkeypatch):
    """Ray's constants module as an imported Ray holds it, having read the variable unset."""
    monkeypatch.delenv(VARIABLE, raising=False)
    constants = types.ModuleType("ray._private.ray_constants")
    setattr(constants, CONSTANT, False)
    monkeypatch.setitem(sys.modules, "ray._private.ray_constants", constants)
    return constants


def test_an_unset_setting_is_set_and_an_imported_ray_reads_it(imported_ray) -> None:
    connect._choose(VARIABLE, CONSTANT, "1", True)
    assert os.environ[VARIABLE] == "1"
    assert getattr(imported_ray, CONSTANT) is True


def test_the_users_setting_is_kept(imported_ray, monkeypatch) -> None:
    monkeypatch.setenv(VARIABLE, "0")
    connect._choose(VARIABLE, CONSTANT, "1", True)
    assert os.environ[VARIABLE] == "0"
    assert getattr(imported_ray, CONSTANT) is False


@pytest.mark.parametrize("setting", [connect._NO_FAILURE_DUMP, connect._LOOPBACK_ONLY])
def test_each_setting_is_one_ray_reads_as_tf_accum_says(setting, monkeypatch) -> None:
    constants = pytest.importorskip("ray._private.ray_constants")
    variable, constant, value, reading = setting
    assert hasattr(constants, constant), constant
    monkeypatch.setenv(variable, value)
    assert constants.env_bool(variable, not reading) is reading


@pytest.fixture
def empty_home(monkeypatch, tmp_path):
    """No Ray authentication setting, and a home directory of the test's own."""
    for name in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        # recorded by monkeypatch first, so what the code sets is undone after the test
        monkeypatch.setenv(name, "unset")
        monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


def test_a_new_cluster_without_a_token_gets_a_fresh_one_in_the_environment(empty_home) -> None:
    connect._choose_token_for_a_new_cluster()
    assert os.environ["RAY_AUTH_MODE"] == "token"
    assert len(bytes.fromhex(os.environ["RAY_AUTH_TOKEN"])) == 32
    assert list(empty_home.iterdir()) == []


@pytest.mark.parametrize("where", ["home", "named file"])
def test_a_new_cluster_uses_the_users_token_in_token_mode(empty_home, monkeypatch, where) -> None:
    """Token mode is set, so that a process given the cluster's address (which Ray leaves
    out of token mode) presents the token the cluster was started with."""
    path = empty_home / ".ray" / "auth_token" if where == "home" else empty_home / "token"
    path.parent.mkdir(exist_ok=True)
    path.write_text("the-users-token\n")
    if where == "named file":
        monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(path))
    connect._choose_token_for_a_new_cluster()
    assert os.environ["RAY_AUTH_MODE"] == "token"
    assert "RAY_AUTH_TOKEN" not in os.environ  # Ray reads the user's, where it is
    assert path.read_text() == "the-users-token\n"


def test_a_new_cluster_keeps_token_authentication_off_when_the_user_turned_it_off(
    empty_home, monkeypatch
) -> None:
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    connect._choose_token_for_a_new_cluster()
    assert os.environ["RAY_AUTH_MODE"] == "disabled"
    assert "RAY_AUTH_TOKEN" not in os.environ
