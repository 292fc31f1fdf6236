"""What the tests that install a real third-party runtime (OpenClaw from npm, a Python 3.12 venv from PyPI) share:
what to do when the machine lacks its prerequisite, and running one install step."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

import pytest

#: how long one install step (`npm ci`, `pip install`) may take on a cold cache
INSTALL_TIMEOUT_S = 1800


def skip_unless_ci(message: str) -> NoReturn:
    """Skip for want of a prerequisite that `message` names, except under CI=true, where it fails: CI must run every
    test, so a missing tool there is the machine's fault."""
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(message + " — CI=true, so this is a failure, not a skip", pytrace=False)
    pytest.skip(message)


def run_install_step(argv: Sequence[str | Path], cwd: Path | None = None, **env: str) -> None:
    """Run one install step with `env` added to this process's environment; raise with the end of its stderr if it
    fails (an install error is the test machine's, not the product's: RuntimeError, not an assertion)."""
    args = [str(a) for a in argv]
    done = subprocess.run(
        args, cwd=cwd, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, env=dict(os.environ, **env)
    )
    if done.returncode != 0:
        where = f" in {cwd}" if cwd is not None else ""
        raise RuntimeError(f"{' '.join(args)} failed{where} ({done.returncode}):\n{done.stderr[-4000:]}")
