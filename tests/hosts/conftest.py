"""The ``hosts`` tests boot a VM for minutes: they run only when asked for by marker
(``make test-hosts`` passes ``-m hosts``), never in a plain ``make test`` or on CI."""
from __future__ import annotations


def pytest_collection_modifyitems(config, items):
    if "hosts" in (config.getoption("markexpr") or ""):
        return
    chosen = [item for item in items if item.get_closest_marker("hosts") is None]
    if len(chosen) < len(items):
        config.hook.pytest_deselected(items=[i for i in items if i not in chosen])
        items[:] = chosen
