"""reflexio-ai 0.2.32 from PyPI, unchanged, in a Python 3.12 venv of its own (tests/support/py312.py): its `reflexio`
CLI and the openclaw-smart plugin's Python package it ships, run against a live `python -m serving`."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.processes import running_service
from tests.support.py312 import venv_python

REQUIREMENTS = Path(__file__).with_name("requirements.txt")
#: Where the wheel keeps the openclaw-smart plugin's Python package (not installed by the wheel itself).
OPENCLAW_SRC = "reflexio/integrations/openclaw/plugin/src"
TIMEOUT_S = 600


@dataclass
class Original:
    """The venv's interpreter, the live service's URL and an environment whose HOME is a scratch directory (the CLI
    writes `~/.reflexio`, the plugin `~/.openclaw-smart`)."""

    python: Path
    url: str
    env: dict[str, str]

    @property
    def site_packages(self) -> Path:
        (found,) = (self.python.parent.parent / "lib").glob("python3.12/site-packages")
        return found

    def cli(self, *args: str, input: str | None = None) -> dict[str, Any]:
        """`reflexio --json <args>`: the JSON envelope it prints (`ok`, `data` or `error`, `meta`)."""
        done = subprocess.run(
            [str(self.python.parent / "reflexio"), "--json", *args],
            capture_output=True,
            text=True,
            env=self.env,
            input=input,
            timeout=TIMEOUT_S,
        )
        out = done.stdout.strip() or done.stderr.strip()  # an error envelope goes to stderr
        start = out.find("{")  # progress lines ("Submitting aggregation ...") come before the envelope
        if start < 0:
            raise AssertionError(f"reflexio {' '.join(args)}: no JSON (exit {done.returncode}): {done.stderr[-2000:]}")
        return json.loads(out[start:])

    def run_python(self, code: str, *, input: str | None = None, **env: str) -> subprocess.CompletedProcess:
        """`python -c code` in the venv with the openclaw-smart package importable."""
        path = os.pathsep.join([str(self.site_packages / OPENCLAW_SRC), self.env.get("PYTHONPATH", "")])
        return subprocess.run(
            [str(self.python), "-c", code],
            capture_output=True,
            text=True,
            env={**self.env, "PYTHONPATH": path, **env},
            input=input,
            timeout=TIMEOUT_S,
        )


@contextmanager
def original_against_service(root: Path) -> Iterator[Original]:
    """The 0.2.32 venv and `python -m serving` on a new lake under `root` (stopped afterwards)."""
    python = venv_python(REQUIREMENTS, check=False)
    home = root / "home"
    home.mkdir()
    with running_service(root / "lake", root / "dagster_home", root / "service.log") as url:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("REFLEXIO_", "PYTHON"))}
        env.update(HOME=str(home), REFLEXIO_URL=url, NO_COLOR="1", COLUMNS="200")
        yield Original(python, url, env)
