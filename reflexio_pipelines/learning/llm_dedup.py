"""The LLM dedup judge: one LiteLLM chat call per `judge()`, prompt `deduplication`, JSON out.

It only *groups*; what a group means (which NEW item survives, what it supersedes) is decided by
`dedup.deduplicate`, the same for every judge — so a judge can never delete anything (the original's EXISTING-only gap).

Differences from the original on purpose: one prompt for profiles and playbooks (`item_kind` names which), every item
line carries its UTC time so "the newer statement wins" is decidable, temperature 0, transient failures and
unusable replies are retried with backoff (the shared `LLMEndpoint`, stage `dedup`), and a judge that still gets nothing usable
returns no groups — every NEW item is kept and nothing is superseded — while reporting the calls and tokens spent
and setting `last_failure`. The learning pipeline treats that as a failed user batch (learn.py: nothing of that
user is written, the window is recorded in `extraction_failures` and retried), so the fallback never reaches the
lake from a pipeline run.
The API key never reaches logs, results or exception text.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from reflexio_pipelines.learning.dedup import Candidate, DuplicateGroup
from reflexio_pipelines.learning.jsonparse import LLMOutputError, clean_text
from reflexio_pipelines.learning.llm_call import LLMEndpoint
from reflexio_pipelines.learning.llm_failures import FailureSummary, scrub_secret
from reflexio_pipelines.learning.llm_stage import LLMStage
from reflexio_pipelines.learning.prompts import Prompt, load_prompt

log = logging.getLogger(__name__)

PROMPT_ID = "deduplication"
PROMPT_VERSION = "1.0.0"
DEDUP_KEYS = ("duplicate_groups", "unique_ids")
PROFILE_ITEMS = "user profile facts"
PLAYBOOK_ITEMS = "behavioural rules (playbooks)"
MAX_ITEM_CHARS = 1_000  # per item line: long items are cut (the judge needs the gist, not every word)
MAX_REASONING_CHARS = 300

_ID_RE = re.compile(r"\s*(NEW|EXISTING)-(\d+)\s*", re.I)


def render_time(created_at: int) -> str:
    """Unix seconds as `YYYY-MM-DD HH:MM UTC` (`unknown time` when out of range)."""
    try:
        return datetime.fromtimestamp(int(created_at), UTC).strftime("%Y-%m-%d %H:%M UTC")
    except (OverflowError, OSError, ValueError, TypeError):
        return "unknown time"


def render_items(prefix: str, items: Sequence[Candidate]) -> str:
    """`[PREFIX-i] (time) text` lines, one per item, or `(none)`. Text is flattened onto one line and cleaned of
    control characters, so an item can never forge another item's line."""
    if not items:
        return "(none)"
    lines = []
    for i, item in enumerate(items):
        text = " ".join(clean_text(item.text, MAX_ITEM_CHARS).split()) or "(empty)"
        lines.append(f"[{prefix}-{i}] ({render_time(item.created_at)}) {text}")
    return "\n".join(lines)


def _label(value: Any, n_new: int, n_existing: int) -> str | None:
    """The canonical `NEW-i` / `EXISTING-j` for a reply's id, or None when malformed or out of range."""
    if not isinstance(value, str):
        return None
    match = _ID_RE.fullmatch(value)
    if not match:
        return None
    kind, index = match.group(1).upper(), int(match.group(2))
    limit = n_new if kind == "NEW" else n_existing
    return f"{kind}-{index}" if index < limit else None


def _merged_text(value: Any) -> str | None:
    if isinstance(value, dict):  # the original's playbook prompt returned {rationale, trigger, content, …}
        value = value.get("content")
    if not isinstance(value, str):
        return None
    return " ".join(clean_text(value).split()) or None


def validate_groups(obj: dict[str, Any], n_new: int, n_existing: int) -> tuple[list[DuplicateGroup], list[str]]:
    """Well-formed groups from a parsed reply, plus human-readable problems for what was dropped.

    A group is kept only if every id is a `NEW-i`/`EXISTING-j` within range, it names at least two distinct items
    and at least one NEW (an EXISTING-only group could change nothing anyway). A malformed group is dropped whole:
    an invented id means the grouping itself is suspect, and dropping only errs towards keeping NEW items.
    Raises `LLMOutputError` when `duplicate_groups` is not a list at all (worth a retry).
    """
    raw_groups = obj.get("duplicate_groups")
    if raw_groups is None:
        raw_groups = []
    elif isinstance(raw_groups, dict):  # a single group instead of a list
        raw_groups = [raw_groups]
    if not isinstance(raw_groups, list):
        raise LLMOutputError(f"duplicate_groups is a {type(raw_groups).__name__}, not a list")
    groups: list[DuplicateGroup] = []
    problems: list[str] = []
    for g, raw in enumerate(raw_groups):
        where = f"duplicate_groups[{g}]"
        ids = raw.get("item_ids") if isinstance(raw, dict) else None
        if not isinstance(ids, list):
            problems.append(f"{where}: no item_ids list; dropped")
            continue
        labels = [_label(value, n_new, n_existing) for value in ids]
        if None in labels:
            bad = [str(value)[:20] for value, label in zip(ids, labels, strict=True) if label is None]
            problems.append(f"{where}: unknown id(s) {bad}; dropped")
            continue
        unique = tuple(dict.fromkeys(label for label in labels if label is not None))
        if len(unique) < 2 or not any(label.startswith("NEW-") for label in unique):
            problems.append(f"{where}: needs two items incl. a NEW one, got {list(unique)}; dropped")
            continue
        reasoning = raw.get("reasoning")
        groups.append(
            DuplicateGroup(
                item_ids=unique,
                merged_content=_merged_text(raw.get("merged_content")),
                reasoning=clean_text(reasoning, MAX_REASONING_CHARS) if isinstance(reasoning, str) else "",
            )
        )
    return groups, problems


class LiteLLMDedupJudge(LLMStage):
    """A `DedupJudge` backed by any LiteLLM-supported chat model (one call per `judge()`, retries included), on the
    shared `endpoint` or on one built from a model and its settings given as keywords (see `LLMStage`)."""

    def __init__(
        self,
        model: str = "",
        *,
        item_kind: str = PROFILE_ITEMS,
        prompt: Prompt | None = None,
        endpoint: LLMEndpoint | None = None,
        **settings: Any,
    ) -> None:
        if not item_kind.strip():
            raise ValueError("item_kind must name the items, e.g. 'user profile facts'")
        super().__init__(model, endpoint=endpoint, **settings)
        self.item_kind = item_kind.strip()
        self.prompt = prompt or load_prompt(PROMPT_ID, PROMPT_VERSION)
        self.last_error = ""  # the scrubbed reason the last judge() fell back to "no groups" ("" if it did not)
        self.last_failure: FailureSummary | None = None  # its storable summary (see llm_failures.FailureSummary)

    def repr_fields(self) -> str:
        """The kind of items judged and the prompt."""
        return f", item_kind={self.item_kind!r}, prompt={self.prompt.ref!r}"

    @property
    def prompt_version(self) -> str:
        """`deduplication@<version>`."""
        return self.prompt.ref

    def messages(self, new: Sequence[Candidate], existing: Sequence[Candidate]) -> list[dict[str, str]]:
        """The chat messages sent for these candidates (system + user)."""
        return self.prompt.render_messages(
            item_kind=self.item_kind,
            new_items=render_items("NEW", new),
            existing_items=render_items("EXISTING", existing),
        )

    def judge(self, new: list[Candidate], existing: list[Candidate]) -> tuple[list[DuplicateGroup], int, int, int]:
        """(groups, calls, prompt_tokens, completion_tokens). Never raises for model or transport failures: after
        the retries it returns no groups (keep every NEW item, supersede nothing) with the cost spent so far."""
        self.last_error, self.last_failure = "", None
        if not new:
            return [], 0, 0, 0

        def validate(obj: dict[str, Any]) -> list[DuplicateGroup]:
            groups, problems = validate_groups(obj, len(new), len(existing))
            if problems:
                log.info(
                    "dedup judge: %d group problem(s): %s",
                    len(problems),
                    scrub_secret("; ".join(problems), self.endpoint.api_key),
                )
            return groups

        outcome = self.endpoint.call_json(
            self.messages(new, existing), DEDUP_KEYS, validate, "dedup judge", stage="dedup"
        )
        if not outcome.ok or outcome.value is None:
            self.last_error, self.last_failure = outcome.error, outcome.failure
            log.warning(
                "dedup judge gave up after %d call(s) to %s; keeping all %d new item(s), superseding nothing",
                outcome.calls,
                self.model,
                len(new),
            )
            return [], outcome.calls, outcome.prompt_tokens, outcome.completion_tokens
        return outcome.value, outcome.calls, outcome.prompt_tokens, outcome.completion_tokens
