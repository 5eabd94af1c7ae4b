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
