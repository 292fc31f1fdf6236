"""What the driver's steps share: the run's state, step registration, checks, and the data the driver publishes.

Imported by the step modules beside it (drive.py runs them in the client's Python 3.12 venv).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import requests
from reflexio import ReflexioClient

PUBLISHER = "c016-pub"  # a user of the driver's own, published here
SESSION = "c016-s1"
CORRECTION = [
    {"role": "user", "content": "Deploy the ledger service please."},
    {"role": "assistant", "content": "Deploying the ledger service to us-east-1."},
    {"role": "user", "content": "No, never deploy to us-east-1; always use us-west-2."},
]


@dataclass
class Run:
    """The client, what the service was seeded with, and what earlier steps produced."""

    client: ReflexioClient
    agent: str
    agent_playbook_id: int
    facts_user: str
    query: str
    found: dict[str, Any] = field(default_factory=dict)


#: module name -> its steps (method, step) in definition order; drive.py runs the modules in its own order.
STEPS: dict[str, list[tuple[str, Callable[[Run], None]]]] = {}


def covers(method: str) -> Callable[[Callable[[Run], None]], Callable[[Run], None]]:
    """Register a step that calls (and checks) one client method; a module's steps run in definition order."""

    def register(fn: Callable[[Run], None]) -> Callable[[Run], None]:
        STEPS.setdefault(fn.__module__, []).append((method, fn))
        return fn

    return register


def expect(condition: bool, what: str) -> None:
    if not condition:
        raise AssertionError(what)


def http_refusal(call: Callable[[], Any]) -> requests.Response:
    """The HTTP error answer `call` raised (an AssertionError if it succeeded); a route that does not exist is
    raised on, so it is reported as missing."""
    try:
        call()
    except requests.HTTPError as exc:
        if is_missing_route(exc.response):
            raise
        return exc.response
    raise AssertionError("expected an HTTP error answer, got a success")


def is_missing_route(answer: requests.Response) -> bool:
    """A 405, or the service's 404 for a path no route serves (not a 404 for an unknown id)."""
    return answer.status_code == 405 or (answer.status_code == 404 and "does not exist on this service" in answer.text)


def now_s() -> int:
    return int(time.time())
