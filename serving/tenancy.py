"""Organisations: API keys (hashed at rest) and one physically separate lake + index + service state per org.

Open mode (no `api_keys_file` configured): one organisation, `default`, whose lake is the configured lake, and no
authentication — the local, offline default. Keyed mode: every `/api/` request must carry
`Authorization: Bearer <key>` (as the original client sends it); the key names the organisation, whose data lives
under `<lake>/orgs/<org_id>/` (its own landing files, tables and index versions). A request can only ever reach
its own organisation's directory, so another organisation's data is not filtered out — it is never opened.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from reflexio_pipelines.files import atomic_write_bytes
from reflexio_pipelines.organisations import DEFAULT_ORG, ORG_ID, is_org_id, org_lake
from reflexio_pipelines.settings import Settings
from reflexio_pipelines.storage import LakePath, lake_path
from serving.state import Launcher, ServiceState

KEY_PREFIX = "rflx-"
#: Requests per minute per key and route class when the key record names no limits.
DEFAULT_RATE_LIMITS = {"publish": 6000, "search": 12000, "admin": 60, "other": 1200}


@dataclass(frozen=True)
class ApiKey:
    """One key as stored: never the key itself, only its SHA-256 (keys are 256-bit random, so no salt is needed)."""

    key_id: str
    org_id: str
    sha256: str
    created_at: int
    revoked: bool = False
    rate_limits: dict[str, int] = field(default_factory=dict)

    def limit(self, route_class: str) -> int:
        return int(self.rate_limits.get(route_class, DEFAULT_RATE_LIMITS[route_class]))


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class KeyStore:
    """API keys in a JSON file (hashes only), re-read when the file changes, so keys added or revoked with
    `python -m serving keys ...` apply to a running service within a second."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._keys: dict[str, ApiKey] = {}
        self._stamp: tuple[float, int] | None = None
        self._checked = 0.0

    def _load(self) -> None:
        now = time.monotonic()
        if now - self._checked < 1.0 and self._stamp is not None:
            return
        self._checked = now
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            self._keys, self._stamp = {}, (0.0, 0)
            return
        stamp = (stat.st_mtime, stat.st_size)
        if stamp == self._stamp:
            return
        records = json.loads(self.path.read_text() or "{}").get("keys", [])
        self._keys = {r["key_id"]: ApiKey(**r) for r in records}
        self._stamp = stamp

    def verify(self, token: str) -> ApiKey | None:
        """The key record for a presented token, or None if unknown, revoked or malformed."""
        if not token.startswith(KEY_PREFIX) or "." not in token:
            return None
        key_id = token[len(KEY_PREFIX) :].split(".", 1)[0]
        with self._lock:
            self._load()
            record = self._keys.get(key_id)
        if record is None or record.revoked or not hmac.compare_digest(record.sha256, _digest(token)):
            return None
        return record

    def create(self, org_id: str, rate_limits: dict[str, int] | None = None) -> str:
        """Add a key for `org_id`; returns the key itself (shown once, never stored)."""
        if not is_org_id(org_id):
            raise ValueError(f"org id {org_id!r} must match {ORG_ID.pattern}")
        unknown = set(rate_limits or {}) - set(DEFAULT_RATE_LIMITS)
        if unknown:
            raise ValueError(f"unknown rate limit class(es) {sorted(unknown)}; use {sorted(DEFAULT_RATE_LIMITS)}")
        key_id = secrets.token_hex(6)
        token = f"{KEY_PREFIX}{key_id}.{secrets.token_urlsafe(32)}"
        record = ApiKey(key_id, org_id, _digest(token), int(time.time()), False, dict(rate_limits or {}))
        self._write(lambda keys: keys + [record.__dict__])
        return token

    def revoke(self, key_id: str) -> bool:
        """Mark a key revoked; True if it existed."""
        found = []

        def change(keys: list[dict]) -> list[dict]:
            for k in keys:
                if k["key_id"] == key_id:
                    k["revoked"] = True
                    found.append(k)
            return keys

        self._write(change)
        return bool(found)

    def records(self) -> list[ApiKey]:
        with self._lock:
            self._stamp = None
            self._load()
            return list(self._keys.values())

    def _write(self, change: Callable[[list[dict]], list[dict]]) -> None:
        from filelock import FileLock

        self.path.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(self.path) + ".lock"):
            keys = json.loads(self.path.read_text() or "{}").get("keys", []) if self.path.exists() else []
            atomic_write_bytes(self.path, json.dumps({"keys": change(keys)}, indent=2).encode())
        with self._lock:
            self._stamp = None


class Tenants:
    """The service state of each organisation, created and started on its first request."""

    def __init__(self, settings: Settings, launcher: Launcher | None = None) -> None:
        self.settings = settings
        self.keys = KeyStore(Path(settings.api_keys_file)) if settings.api_keys_file else None
        self._launcher = launcher
        self._lock = threading.Lock()
        self._states: dict[str, ServiceState] = {}
        self._started = False

    @property
    def keyed(self) -> bool:
        return self.keys is not None

    def lake_of(self, org_id: str) -> LakePath:
        """Where an organisation's data lives."""
        root = lake_path(self.settings.lake)
        return org_lake(root, org_id) if self.keyed else root

    def loaded(self, org_id: str = DEFAULT_ORG) -> ServiceState | None:
        """The organisation's state if it was created already (never blocks on the lake)."""
        with self._lock:
            return self._states.get(org_id)

    def state(self, org_id: str = DEFAULT_ORG) -> ServiceState:
        with self._lock:
            state = self._states.get(org_id)
            if state is None:
                org_settings = self.settings.model_copy(update={"lake": str(self.lake_of(org_id))})
                state = ServiceState.create(org_settings, self._launcher, org_id=org_id)
                if self._started:
                    state.start()
                self._states[org_id] = state
            return state

    def start(self) -> None:
        with self._lock:
            self._started = True
            states = list(self._states.values())
        for state in states:
            state.start()

    def close(self) -> None:
        with self._lock:
            states, self._states = list(self._states.values()), {}
        for state in states:
            state.close()
