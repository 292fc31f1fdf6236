"""The pinned requirements of the original's packages (tests/support/*/requirements.txt) install on a fresh machine.

A pin frozen from a venv that installed a wheel from a local path (`name @ file:///...`) works on the machine that
froze it and nowhere else: CI on a clean clone failed exactly so. Every line must name a registry release.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

SUPPORT = Path(__file__).resolve().parent / "support"
FILES = sorted(SUPPORT.glob("*/requirements.txt"))
#: `name==version`, the only form a fresh machine can install from the package index.
PINNED = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*==[A-Za-z0-9.+!-]+$")


def test_there_are_pinned_requirement_files():
    assert {path.parent.name for path in FILES} >= {"ai032", "client016"}


@pytest.mark.parametrize("path", FILES, ids=lambda path: path.parent.name)
def test_every_requirement_is_a_registry_pin(path: Path):
    lines = [line.strip() for line in path.read_text().splitlines()]
    requirements = [line for line in lines if line and not line.startswith("#")]
    assert requirements, f"{path} pins nothing"
    unpinned = [line for line in requirements if not PINNED.match(line)]
    assert not unpinned, f"{path}: not installable from the package index on a fresh machine: {unpinned}"
