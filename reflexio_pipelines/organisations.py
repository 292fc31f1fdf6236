"""Where each organisation's lake lives, for everything that has to reach every organisation.

In keyed mode (serving/tenancy.py) organisation `acme` keeps its landing files, tables and index versions in
`<lake>/orgs/acme`; the configured lake itself is only their parent. The service resolves a request's organisation
from its API key; the schedules (schedules.py) and the sensors (sensors.py) enumerate the organisations present on
disk here, so every organisation gets the same runs as the open-mode lake, from the one Dagster daemon.
"""

from __future__ import annotations

import re

from reflexio_pipelines.storage import LakePath

#: A valid organisation id (also a directory name: no separators, no dots). Always used with `fullmatch`
#: (`is_org_id`): `$` would also match before a trailing newline, and "a\n" is no directory name.
ORG_ID = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")
ORGS_DIR = "orgs"
#: Run tag naming the organisation a scheduled run is for (the open-mode lake is `default`).
ORG_TAG = "reflexio/org"
DEFAULT_ORG = "default"


def is_org_id(value: str) -> bool:
    """Whether `value` is a valid organisation id, as a whole (no trailing newline)."""
    return isinstance(value, str) and ORG_ID.fullmatch(value) is not None


def org_lake(root: LakePath, org_id: str) -> LakePath:
    """The lake of organisation `org_id` under the configured lake `root` (raises ValueError for a bad id)."""
    if not is_org_id(org_id):
        raise ValueError(f"org id {org_id!r} must match {ORG_ID.pattern}")
    return root / ORGS_DIR / org_id


def organisation_ids(root: LakePath) -> list[str]:
    """Ids of the organisations with a lake under `root`, sorted."""
    orgs = root / ORGS_DIR
    if not orgs.is_dir():
        return []
    return sorted(p.name for p in orgs.iterdir() if p.is_dir() and is_org_id(p.name))


def lakes_of(root: LakePath) -> list[tuple[str, LakePath]]:
    """(organisation, lake) for every lake under `root` that holds data: `root` itself unless it is only the parent
    of organisation lakes (keyed mode), then each organisation's."""
    orgs = [(org, org_lake(root, org)) for org in organisation_ids(root)]
    holds_data = any((root / part).exists() for part in ("landing", "tables"))
    return ([(DEFAULT_ORG, root)] if holds_data or not orgs else []) + orgs
