"""A `$DAGSTER_HOME` for a test: a directory whose dagster.yaml turns telemetry off (nothing leaves the machine)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def make_dagster_home(home: Path) -> Path:
    """Create `home` (and its parents) holding a dagster.yaml with telemetry off; returns `home`."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    return home


@contextmanager
def dagster_home_env(home: Path) -> Iterator[Path]:
    """`make_dagster_home(home)`, with `$DAGSTER_HOME` pointing at it while the context is open; yields `home`.

    For module-scoped fixtures (which cannot use the `monkeypatch` fixture) and the `dagster_home` fixture alike, so
    no run a test starts is recorded in the developer's ./.dagster_home.
    """
    with pytest.MonkeyPatch.context() as env:
        env.setenv("DAGSTER_HOME", str(make_dagster_home(home)))
        yield home
