"""What the measurement of self-improvement changes in serving: the holdout and the outcome counters.

- `LearningPolicy` mirrors the organisation's config sections `holdout` and `outcomes` (re-read when the stored
  config changes, checked by the index watcher and right after `set_config`), and answers which arm a user is in.
- `OutcomeOverlay` mirrors `item_outcomes` and the reviewers' decisions in `outcome_change_log`: every learned item
  in a search or read answer carries its counters (`outcomes`: served / helpful / harmful / missed, flagged,
  held_out), and with `outcomes.hold_out_flagged` a flagged item is left out of search until a reviewer keeps it.
  A review applies at once (written to the lake first, then here); other replicas pick it up on their next tick.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.lake.outcomes import counters_payload, log_state, record_review
from reflexio_pipelines.learning.config import ConfigError, ExtractionConfig
from reflexio_pipelines.learning.config_loading import resolve_extraction_config
from reflexio_pipelines.learning.holdout import CONTROL, arm_of, override_requested
from reflexio_pipelines.learning.outcome_types import ID_FIELDS, ItemRef
from serving.log_mirror import LogMirror

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class HoldoutDecision:
    """The holdout for one search: the user's arm, whether the caller switched it off, and so whether the answer
    holds no learned context."""

    arm: str
    override: bool

    @property
    def held_out(self) -> bool:
        return self.arm == CONTROL and not self.override


class LearningPolicy:
    """The organisation's `holdout` and `outcomes` settings, re-read when its stored config changes."""

    def __init__(self, lake: Lake, fallback: str | None) -> None:
        self._lake, self._fallback = lake, fallback
        self._spec: str | None = None
        self._config: ExtractionConfig | None = None
        self.refresh()

    def refresh(self) -> None:
        """Re-parse the config if its stored text changed (a bad stored config keeps the last good one)."""
        spec = self._lake.extraction_config(self._fallback)
        if spec == self._spec and self._config is not None:
            return
        try:
            config = resolve_extraction_config(spec)
        except ConfigError:
            if self._config is None:
                raise  # at start-up there is no last good config to keep
            log.exception("stored config no longer valid; keeping the holdout and outcome settings in force")
            self._spec = spec
            return
        self._config, self._spec = config, spec

    @property
    def config(self) -> ExtractionConfig:
        assert self._config is not None
        return self._config

    def holdout(self, user_id: str | None, agent_version: str | None, header: str | None) -> HoldoutDecision | None:
        """The holdout decision for a search by `user_id` (None for a search that names no user: nobody to assign)."""
        if not user_id:
            return None
        return HoldoutDecision(arm_of(self.config.holdout, agent_version, user_id), override_requested(header))


class OutcomeOverlay(LogMirror):
    """Counters per learned item and the items held out of search, mirrored from the lake."""

    def __init__(self, lake: Lake, policy: LearningPolicy) -> None:
        super().__init__(lake)
        self._policy = policy
        self._rows: dict[ItemRef, dict[str, Any]] = {}
        self._flagged: dict[str, list[ItemRef]] = {}  # per entity: the few flagged items, so a search scans only them
        self._kept_at: dict[ItemRef, int] = {}

    def _log_version(self) -> tuple[int | None, int | None]:
        """`item_outcomes` and `outcome_change_log`: either moving reloads both."""
        return self._lake.table_version("item_outcomes"), self._lake.table_version("outcome_change_log")

    def _load(self) -> tuple[dict[ItemRef, dict[str, Any]], dict[ItemRef, int]]:
        rows = {ItemRef(r["entity"], r["item_id"]): r for r in self._lake.read_table("item_outcomes").to_pylist()}
        _, _, kept_at = log_state(self._lake.read_table("outcome_change_log").to_pylist())
        return rows, kept_at

    def _install(self, loaded: tuple[dict[ItemRef, dict[str, Any]], dict[ItemRef, int]]) -> None:
        self._rows, self._kept_at = loaded
        self._flagged = {}
        for ref, row in self._rows.items():
            if row["flagged"]:
                self._flagged.setdefault(ref.entity, []).append(ref)

    def _held_out(self, ref: ItemRef, row: dict[str, Any] | None) -> bool:
        if row is None or not row["flagged"] or not self._policy.config.outcomes.hold_out_flagged:
            return False
        kept = self._kept_at.get(ref)
        # A review at or after this computation keeps it in; a later computation re-flags it only on new harmful
        # evidence (lake.outcomes.log_state).
        return kept is None or kept < (row["computed_at"] or 0)

    def excluded(self, entity: str) -> frozenset[str]:
        """Ids of `entity` held out of search (flagged, the setting on, not kept by a reviewer since)."""
        with self._lock:
            return frozenset(
                ref.item_id for ref in self._flagged.get(entity, ()) if self._held_out(ref, self._rows[ref])
            )

    def annotate(self, entity: str, payloads: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The payloads with their `outcomes` counters (zeros for items never served)."""
        id_field = ID_FIELDS[entity]
        with self._lock:
            out = []
            for payload in payloads:
                ref = ItemRef(entity, str(payload.get(id_field)))
                row = self._rows.get(ref)
                out.append(dict(payload, outcomes=counters_payload(row, self._held_out(ref, row))))
            return out

    def keep(self, entity: str, item_id: str, actor: str = "api", reason: str = "") -> dict[str, Any]:
        """Record a reviewer's keep durably, then serve the item again at once."""

        def apply(row: dict[str, Any]) -> None:
            self._kept_at[ItemRef(entity, str(item_id))] = row["at"]

        return self._write(lambda: record_review(self._lake, entity, item_id, actor, reason), apply)

    def row(self, entity: str, item_id: str) -> dict[str, Any] | None:
        with self._lock:
            return self._rows.get(ItemRef(entity, str(item_id)))
