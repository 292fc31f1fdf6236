"""A `$DAGSTER_HOME` for a test: a directory whose dagster.yaml turns telemetry off (nothing leaves the machine)."""

from __future__ import annotations

from pathlib import Path


def make_dagster_home(home: Path) -> Path:
    """Create `home` (and its parents) holding a dagster.yaml with telemetry off; returns `home`."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    return home
