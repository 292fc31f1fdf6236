"""The holdout control group: which users get no learned context from search.

A user is in the control group of an agent version when a hash of (agent version, user id) falls below the share
configured for that version (`HoldoutSettings`: per agent version, else the config's share, else the deployment
default). The draw is deterministic — the same user is in or out on every replica, after every restart and in the
pipeline that later compares the two groups — and independent per agent version, so a new version gets a fresh
control group. Searches answer control users with the normal response shape, no learned items and
`holdout: true`; a caller can switch the holdout off for one request (`HOLDOUT_HEADER: off`, for debugging), and the
retrieval log records that, so those sessions are left out of the comparison.
"""

from __future__ import annotations

import hashlib
import os
from typing import Literal

from reflexio_pipelines.learning.config import HoldoutSettings

#: The control group's share where the config names none (the issue's 5 %).
DEFAULT_SHARE = 0.05
#: Overrides DEFAULT_SHARE for a whole deployment (the organisations' configs still win). The test suite sets 0 so
#: that tests of other features never depend on which of their users the hash happens to draw.
SHARE_ENV = "REFLEXIO_HOLDOUT_SHARE"
#: Request header that switches the holdout off for one search (`X-Reflexio-Holdout: off`).
HOLDOUT_HEADER = "X-Reflexio-Holdout"

Arm = Literal["treated", "control"]
TREATED: Arm = "treated"
CONTROL: Arm = "control"


def default_share() -> float:
    """DEFAULT_SHARE, or the deployment's `REFLEXIO_HOLDOUT_SHARE` (a number in [0, 1])."""
    raw = os.environ.get(SHARE_ENV, "").strip()
    if not raw:
        return DEFAULT_SHARE
    try:
        share = float(raw)
    except ValueError:
        raise ValueError(f"{SHARE_ENV} must be a number within [0, 1], got {raw!r}") from None
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"{SHARE_ENV} must be within [0, 1], got {share}")
    return share


def share_for(settings: HoldoutSettings, agent_version: str | None) -> float:
    """The control group's share for one agent version: its own entry, else the config's share, else the default."""
    version = agent_version or ""
    if version in settings.agent_versions:
        return settings.agent_versions[version]
    return settings.share if settings.share is not None else default_share()


def draw(agent_version: str | None, user_id: str) -> float:
    """The user's uniform number in [0, 1) for an agent version: sha256 of (agent version, user id)."""
    digest = hashlib.sha256(f"holdout\x1f{agent_version or ''}\x1f{user_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def arm_of(settings: HoldoutSettings, agent_version: str | None, user_id: str) -> Arm:
    """`control` when the user's draw for the agent version falls below the version's share, else `treated`."""
    return CONTROL if draw(agent_version, user_id) < share_for(settings, agent_version) else TREATED


def override_requested(header_value: str | None) -> bool:
    """Whether a request asked for the holdout to be off (`off`, `false`, `0` or `no`, any case)."""
    return (header_value or "").strip().lower() in {"off", "false", "0", "no"}
