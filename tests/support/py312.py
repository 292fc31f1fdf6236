"""Python 3.12 virtual environments for the tests that run the original's newest packages unchanged.

reflexio-client 0.2.16 and reflexio-ai 0.2.32 require Python >= 3.12 while this project runs on 3.11, so their
tests run them in a venv of their own: one per pinned requirements file (e.g. `tests/support/client016/
requirements.txt`), installed from PyPI on first use under `.cache/py312/` in the checkout (git-ignored) and reused
while the file is unchanged.

    python = venv_python(Path("tests/support/client016/requirements.txt"))
    subprocess.run([python, "-c", "import reflexio"])

The interpreter: `$REFLEXIO_PYTHON312`, else the newest pyenv 3.12 (`$PYENV_ROOT`, default `~/.pyenv`), else
`python3.12` on PATH, the first that runs. Without one the tests skip, except under CI=true, where they fail: CI must run them.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from filelock import FileLock

from tests.support.prerequisites import INSTALL_TIMEOUT_S, run_install_step, skip_unless_ci

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".cache" / "py312"


def _version_key(path: Path) -> tuple[int, ...]:
    """`3.12.10` sorts after `3.12.9`."""
    return tuple(int(part) for part in path.name.split(".") if part.isdigit())


def _candidates() -> list[Path]:
    named = os.environ.get("REFLEXIO_PYTHON312")
    if named:
        return [Path(named)]
    versions = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    found = sorted(versions.glob("3.12.*"), key=_version_key, reverse=True) if versions.is_dir() else []
    on_path = shutil.which("python3.12")
    return [v / "bin" / "python3.12" for v in found] + ([Path(on_path)] if on_path else [])


def _runs_312(python: Path) -> bool:
    """Whether `python` starts and is 3.12 (a pyenv shim on PATH may exist without a 3.12 selected)."""
    try:
        done = subprocess.run(
            [str(python), "-c", "import sys; sys.exit(sys.version_info[:2] != (3, 12))"],
            capture_output=True,
            timeout=60,
        )
    except OSError:
        return False
    return done.returncode == 0


def find_python312() -> Path | None:
    """A working Python 3.12 interpreter on this machine, or None."""
    return next((python for python in _candidates() if _runs_312(python)), None)


def _require_python312() -> Path:
    python = find_python312()
    if python is None:
        skip_unless_ci(
            "no Python 3.12 found (REFLEXIO_PYTHON312, python3.12 on PATH, or pyenv's 3.12): the tests of the "
            "original's newest packages need it (`pyenv install 3.12`)"
        )
    return python


def _run(argv: list[str | Path]) -> None:
    run_install_step(argv, PIP_DISABLE_PIP_VERSION_CHECK="1")


def venv_python(requirements: Path, check: bool = True) -> Path:
    """The `python` of a Python 3.12 venv with exactly `requirements` installed (built once per file content);
    skips (fails under CI=true) when the machine has no Python 3.12. `check=False` skips `pip check`, for a package
    installed without dependencies it declares but the code under test never imports (reflexio-ai's server stack)."""
    python312 = _require_python312()
    digest = hashlib.sha256(requirements.read_bytes()).hexdigest()[:12]
    target = CACHE / f"{requirements.parent.name}-{digest}"
    python = target / "bin" / "python"
    CACHE.mkdir(parents=True, exist_ok=True)
    with FileLock(str(CACHE / ".install.lock"), timeout=INSTALL_TIMEOUT_S):  # parallel sessions install once
        if not (target / ".installed").exists():
            if target.exists():
                shutil.rmtree(target)  # a half-finished install
            _run([python312, "-m", "venv", target])
            _run([python, "-m", "pip", "install", "--quiet", "--no-deps", "-r", requirements])
            if check:
                _run([python, "-m", "pip", "check"])  # the pins are complete: nothing missing, nothing conflicting
            (target / ".installed").write_text(requirements.read_text())
    return python
