"""The service's Host allow-list as tests see it: Starlette's TestClient sends `Host: testserver`, which an open-mode
service refuses (serving/hosts.py), so the test session allows that name too."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from serving import hosts

#: The service's own allow-list default, captured when this module is first imported: before `testserver_allowed`
#: widens it (tests/conftest.py enters it at the start of the session).
REAL_LOOPBACK_HOSTS = hosts.LOOPBACK_HOSTS


@contextmanager
def testserver_allowed() -> Iterator[None]:
    """Allow the `testserver` Host while the context is open; tests of the Host check put `REAL_LOOPBACK_HOSTS`
    back."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(hosts, "LOOPBACK_HOSTS", (*REAL_LOOPBACK_HOSTS, "testserver"))
        yield
