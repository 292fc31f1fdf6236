"""Parse what an LLM returned into the extraction contract, tolerating the usual output faults.

Providers differ in how well they honour `response_format`: replies arrive wrapped in Markdown fences, surrounded
by prose, with Python literals, single quotes, trailing commas, or cut off at the token limit. `parse_llm_json`
recovers an object from all of these (strict `json.loads` first, then `json_repair`) and raises `LLMOutputError`
only when nothing usable is left, so the caller can retry. `validate_extraction` then turns the object into typed
items item by item: a bad item is dropped and reported, it never fails the window.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

import json_repair

from reflexio_pipelines.learning.transcript import turn_ids_for_labels
from reflexio_pipelines.learning.types import TTL_SECONDS, ExtractedPlaybook, ExtractedProfile, Window

MAX_FIELD_CHARS = 2_000
PLAYBOOK_KINDS = ("correction", "tool_failure", "expert", "recipe")
BLOCKING_ISSUE_KINDS = ("missing_tool", "permission_denied", "external_dependency", "policy_restriction")
EXTRACTION_KEYS = ("profiles", "playbooks")

_FENCE_RE = re.compile(r"```[ \t]*[A-Za-z0-9_-]*[ \t]*\n?(.*?)(?:```|\Z)", re.DOTALL)
# C0/C1 control characters except tab and newline, plus zero-width and bidi overrides that can hide text
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")

T = TypeVar("T", ExtractedProfile, ExtractedPlaybook)


class LLMOutputError(ValueError):
    """The model's reply holds no usable JSON object (worth a retry)."""


def _outermost_object(text: str) -> str | None:
    """From the first `{` to its matching `}` (string-aware), or to the end of the text if it never closes."""
    start = text.find("{")
    if start < 0:
        return None
    depth, in_string, escaped = 0, False, False
    for i in range(start, len(text)):
        char = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return text[start : i + 1]
    return text[start:]  # cut off before closing: the repairer completes it


def _candidates(text: str) -> list[str]:
    """Texts that may hold the JSON object, most specific last: the whole reply, the first fenced block, and the
    outermost object in it."""
    stripped = text.strip()
    found = [stripped]
    fenced = _FENCE_RE.search(stripped)
    if fenced and "{" in fenced.group(1):
        found.append(fenced.group(1).strip())
    obj = _outermost_object(found[-1])
    if obj is not None:
        found.append(obj)
    return found


def parse_llm_json(text: str | None, expected_keys: Sequence[str] = ()) -> dict[str, Any]:
    """The JSON object in an LLM reply; raises `LLMOutputError` when none can be recovered.

    Strict parsing is tried on each candidate first (a valid reply whose strings contain fences or braces must not
    be "repaired"); only then is the most specific candidate handed to `json_repair`. If `expected_keys` is given,
    an object holding none of them also counts as unusable (garbage that "repairs" into an unrelated object is not
    an empty extraction).
    """
    if not text or not text.strip():
        raise LLMOutputError("empty reply")
    candidates = _candidates(text)
    obj: Any = None
    for candidate in candidates:
        try:
            obj = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(obj, dict):
            break
    if not isinstance(obj, dict):
        try:
            obj = json_repair.loads(candidates[-1])
        except Exception as exc:  # the repairer is best-effort; any failure of it means "unusable"
            raise LLMOutputError(f"unrepairable JSON: {_snippet(text)}") from exc
        if not obj:  # the repairer turns pure prose into "" or {}
            raise LLMOutputError(f"no JSON object in reply: {_snippet(text)}")
    if not isinstance(obj, dict):
        raise LLMOutputError(f"no JSON object in reply: {_snippet(text)}")
    if expected_keys and not any(key in obj for key in expected_keys):
        raise LLMOutputError(f"JSON object lacks {'/'.join(expected_keys)}: {_snippet(text)}")
    return obj


def _snippet(text: str, limit: int = 120) -> str:
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= limit else flat[:limit] + "…")


def clean_text(value: str, limit: int = MAX_FIELD_CHARS) -> str:
    """Text without control characters, trimmed, and cut to `limit` characters (ending in an ellipsis if cut)."""
    text = _CONTROL_RE.sub("", value).strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def content_key(content: str) -> str:
    """Normalised content used to detect duplicates (case and whitespace insensitive)."""
    return " ".join(content.casefold().split())


def dedupe_by_content(items: Iterable[T]) -> list[T]:
    """Items in order, keeping the first of any with the same normalised content."""
    seen: set[str] = set()
    kept: list[T] = []
    for item in items:
        key = content_key(item.content)
        if key not in seen:
            seen.add(key)
            kept.append(item)
    return kept


def _optional_text(value: Any) -> str | None:
    return (clean_text(value) or None) if isinstance(value, str) else None


def _as_items(obj: dict[str, Any], key: str, problems: list[str]) -> list[Any]:
    value = obj.get(key)
    if value is None:
        return []
    if isinstance(value, dict):  # a single item instead of a list
        return [value]
    if not isinstance(value, list):
        problems.append(f"{key}: expected a list, got {type(value).__name__}; ignored")
        return []
    return value


def _evidence_turn_ids(item: dict[str, Any], window: Window) -> list[str]:
    evidence = item.get("evidence")
    if isinstance(evidence, (str, int)):
        evidence = [evidence]
    cited = turn_ids_for_labels(window, evidence) if isinstance(evidence, list) else []
    # no usable citation: attribute to the whole window, as the original always did
    return cited or [turn.turn_id for turn in window.turns]


def _item_content(item: Any, where: str, problems: list[str]) -> tuple[dict[str, Any], str] | None:
    if isinstance(item, str):  # some models return bare strings for simple lists
        item = {"content": item}
    if not isinstance(item, dict):
        problems.append(f"{where}: expected an object, got {type(item).__name__}; dropped")
        return None
    raw = item.get("content")
    if not isinstance(raw, str):
        problems.append(f"{where}: content missing or not text; dropped")
        return None
    content = clean_text(raw)
    if not content:
        problems.append(f"{where}: empty content; dropped")
        return None
    return item, content


_PROFILE_KEYS = {"content", "time_to_live", "evidence"}


def _profile(item: Any, where: str, window: Window, problems: list[str]) -> ExtractedProfile | None:
    parsed = _item_content(item, where, problems)
    if parsed is None:
        return None
    item, content = parsed
    ttl = item.get("time_to_live")
    if ttl not in TTL_SECONDS:
        if ttl is not None:
            problems.append(f"{where}: unknown time_to_live {str(ttl)[:40]!r}; using infinity")
        ttl = "infinity"
    # like the original, extra scalar keys (e.g. "metadata") are kept as custom features
    extras = {
        str(k): clean_text(v) if isinstance(v, str) else v
        for k, v in item.items()
        if k not in _PROFILE_KEYS and (v is None or isinstance(v, (str, int, float, bool)))
    }
    return ExtractedProfile(
        content=content,
        time_to_live=str(ttl),
        source_turn_ids=_evidence_turn_ids(item, window),
        custom_features=extras,
    )


def _blocking_issue(value: Any, where: str, problems: list[str]) -> tuple[str | None, str | None]:
    if value is None:
        return None, None
    kind = value.get("kind") if isinstance(value, dict) else None
    if kind not in BLOCKING_ISSUE_KINDS:
        problems.append(f"{where}: unknown blocking_issue {str(value)[:60]!r}; ignored")
        return None, None
    return str(kind), _optional_text(value.get("details"))


def _playbook(item: Any, where: str, window: Window, problems: list[str]) -> ExtractedPlaybook | None:
    parsed = _item_content(item, where, problems)
    if parsed is None:
        return None
    item, content = parsed
    kind = item.get("kind") or "correction"
    if kind not in PLAYBOOK_KINDS:
        problems.append(f"{where}: unknown kind {str(kind)[:40]!r}; using correction")
        kind = "correction"
    issue_kind, issue_details = _blocking_issue(item.get("blocking_issue"), where, problems)
    return ExtractedPlaybook(
        content=content,
        trigger=_optional_text(item.get("trigger")),
        rationale=_optional_text(item.get("rationale")),
        kind=str(kind),
        blocking_issue_kind=issue_kind,
        blocking_issue_details=issue_details,
        source_turn_ids=_evidence_turn_ids(item, window),
    )


def validate_extraction(
    obj: dict[str, Any], window: Window
) -> tuple[list[ExtractedProfile], list[ExtractedPlaybook], list[str]]:
    """Typed profiles and playbooks from a parsed reply, plus human-readable problems (dropped/coerced items).

    Never raises on bad items: each is validated alone so one malformed entry cannot cost the whole window.
    """
    problems: list[str] = []
    profiles = [
        p
        for i, item in enumerate(_as_items(obj, "profiles", problems))
        if (p := _profile(item, f"profiles[{i}]", window, problems)) is not None
    ]
    playbooks = [
        p
        for i, item in enumerate(_as_items(obj, "playbooks", problems))
        if (p := _playbook(item, f"playbooks[{i}]", window, problems)) is not None
    ]
    return dedupe_by_content(profiles), dedupe_by_content(playbooks), problems
