"""Export and erasure run outside the code location (the service, the CLI): importing them must not import Dagster."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import pytest

import reflexio_pipelines.privacy

pytestmark = pytest.mark.e2e

PRIVACY_MODULES = ["reflexio_pipelines.privacy"] + [
    f"reflexio_pipelines.privacy.{info.name}" for info in pkgutil.iter_modules(reflexio_pipelines.privacy.__path__)
]


@pytest.mark.parametrize("module", PRIVACY_MODULES)
def test_privacy_module_does_not_import_dagster(module: str) -> None:
    # A fresh interpreter: this test process has imported Dagster long before.
    check = f"import importlib, sys; importlib.import_module({module!r}); print('dagster' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False", f"importing {module} imports dagster"
