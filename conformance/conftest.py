from __future__ import annotations

import pytest

from tests import background


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--backend",
        default=None,
        help="conformance backends to run, comma-separated: tf_accum, tf_accum-graph, "
        "tf_accum-ray, tensorflow, or another runtime as module:attribute "
        "(conformance/backends/plugin.py); default: TF_ACCUM_BACKEND, else every installed "
        "built-in one. The golden checks always run.",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Tests of a backend that was not selected have no cases: deselect them
    # rather than report them as skipped.
    unselected = [
        item
        for item in items
        if any(
            str(mark.kwargs.get("reason", "")).startswith("got empty parameter set")
            for mark in item.iter_markers("skip")
        )
    ]
    if unselected:
        config.hook.pytest_deselected(items=unselected)
        items[:] = [item for item in items if item not in unselected]


def pytest_collection_finish(session: pytest.Session) -> None:
    # the selected tests' child processes start now, beside the tests (tests/background.py)
    if not session.config.option.collectonly:
        background.start_for(session.items)


def pytest_sessionfinish() -> None:
    background.stop()
