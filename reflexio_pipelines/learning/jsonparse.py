"""Parse what an LLM returned into the extraction contract, tolerating the usual output faults, and refusing the
answers that would store something wrong.

Providers differ in how well they honour `response_format`: replies arrive wrapped in Markdown fences, surrounded
by prose, with reasoning written first (`<think>…</think>`), with Python literals, single quotes, trailing commas or
comments. `parse_llm_json` recovers the answer object from all of these (strict `json.loads` first, then
`json_repair` on a complete object) and raises `LLMOutputError` — so the caller retries, then records a failure —
when there is no usable answer:

- a reply whose JSON object never closes is cut off (`TruncatedReply`): it is never "completed" by the repairer,
  which would turn `{"profiles": [{"content": "Lives in San Fr` into a profile "Lives in San Fr". (A reply the
  provider marked as cut off, `finish_reason: length`, is refused before parsing: llm_reply.py.)
- a reply holding two different answer objects (`AmbiguousReply`): which one the model meant is a guess;
- a refusal (`RefusedReply`): prose that declines the task, alone or next to an empty answer object (empty lists;
  an explicit null such as the consolidator's "no rule" is a decision, not an empty answer). An empty answer with
  no such prose ("nothing worth remembering") is a valid empty result; a declined task is not, so a refused window
  is retried and, if it keeps refusing, recorded in `extraction_failures`, never marked as learned.
- reasoning that never ends (an opening `<think>` without its closing tag): there is no answer after it.

`validate_extraction` then turns the object into typed items item by item: a bad item is dropped and reported, it
never fails the window.
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

# C0/C1 control characters except tab and newline, plus zero-width and bidi overrides that can hide text
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")
#: Reasoning some models write into the answer text before (or around) the JSON.
_REASONING_TAGS = "think|thinking|reasoning|reflection"
_REASONING_BLOCK_RE = re.compile(rf"<({_REASONING_TAGS})>.*?</\1\s*>", re.DOTALL | re.IGNORECASE)
_REASONING_OPEN_RE = re.compile(rf"<(?:{_REASONING_TAGS})>", re.IGNORECASE)
_REASONING_CLOSE_RE = re.compile(rf"</(?:{_REASONING_TAGS})\s*>", re.IGNORECASE)
#: Where a JSON (or Python-literal) object can start: a brace followed by a key's quote or the closing brace.
#: Prose braces ("{2} items", "{as requested}") are not object starts.
_OBJECT_START_RE = re.compile(r"\{(?=\s*[\"'}])")
#: Prose declining the task ("I'm sorry, but I can't help with that", "I cannot process personal data", "I must
#: decline"). Deliberately narrow: "I can't find anything worth remembering" is an empty answer, not a refusal.
_REFUSAL_RE = re.compile(
    r"\b(?:can(?:not|['’]t)|won['’]t|will not|unable to|not able to)\s+(?:\w+\s+){0,3}?"
    r"(?:help|assist|comply|fulfil|fulfill|process|provide|share|engage|do (?:this|that))\b"
    r"|\bmust decline\b|\bdecline to (?:help|assist|answer|process)\b",
    re.IGNORECASE,
)

T = TypeVar("T", ExtractedProfile, ExtractedPlaybook)


class LLMOutputError(ValueError):
    """The model's reply holds no usable JSON object (worth a retry)."""


class TruncatedReply(LLMOutputError):
    """The reply was cut off (the provider said so, or its JSON object never closes): nothing of it is used."""

    summary_message = "the reply was cut off before its answer ended"  # read by llm_failures.summarize_failure


class RefusedReply(LLMOutputError):
    """The model declined the task (a provider-flagged refusal or content filter, or prose that declines)."""

    summary_message = "the model refused to answer"


class AmbiguousReply(LLMOutputError):
    """The reply holds several different answer objects; picking one would be a guess."""

    summary_message = "the reply holds several different answers"


def strip_reasoning(text: str) -> str:
    """`text` without the reasoning a model wrote into it: `<think>…</think>` blocks (also thinking, reasoning,
    reflection), and everything before a lone closing tag (chat templates that open the block in the prompt).
    Raises `LLMOutputError` for an opening tag that never closes: there is no answer after the reasoning."""
    text = _REASONING_BLOCK_RE.sub("", text)
    closes = list(_REASONING_CLOSE_RE.finditer(text))
    if closes:
        text = text[closes[-1].end() :]
    if _REASONING_OPEN_RE.search(text):
        raise LLMOutputError("the reasoning never ends: no answer after it")
    return text


def _closing_brace(text: str, start: int) -> int | None:
    """Index of the `}` closing the object opened at `start` (string-aware), None if it never closes."""
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
                return i
    return None


def _object_spans(text: str) -> tuple[list[tuple[int, int]], bool]:
    """The top-level objects in `text`, as (start, end) spans in order, and whether the last one never closes
    (everything after an unclosed start lies inside it, so nothing after it is a candidate)."""
    spans: list[tuple[int, int]] = []
    position = 0
    while match := _OBJECT_START_RE.search(text, position):
        end = _closing_brace(text, match.start())
        if end is None:
            return spans, True
        spans.append((match.start(), end + 1))
        position = end + 1
    return spans, False


def _load_object(candidate: str) -> dict[str, Any] | None:
    """A dict from a complete object's text: strict JSON, else `json_repair` (trailing commas, single quotes,
    Python literals, comments); None when neither yields a non-empty dict."""
    try:
        obj = json.loads(candidate)
    except ValueError:
        try:
            obj = json_repair.loads(candidate)
        except Exception:  # the repairer is best-effort; any failure of it means "not this candidate"
            return None
    return obj if isinstance(obj, dict) else None


def _is_empty_answer(obj: dict[str, Any], keys: Sequence[str]) -> bool:
    """Every expected key absent or an empty list/object/string. An explicit null (the consolidator's "no rule")
    is a decision, not an empty answer."""
    return all(obj.get(key, []) in ([], {}, "") for key in keys)


def parse_llm_json(text: str | None, expected_keys: Sequence[str] = ()) -> dict[str, Any]:
    """The answer object in an LLM reply; raises `LLMOutputError` (or a subclass saying why) when there is none.

    Reasoning blocks are removed first; then every complete top-level object of the rest is a candidate (strict
    parsing first, so a valid reply whose strings contain fences or braces is never "repaired"). With
    `expected_keys`, only objects holding one of them are answers (garbage that "repairs" into an unrelated object
    is not an empty extraction). Exactly one distinct answer must remain.
    """
    if not text or not text.strip():
        raise LLMOutputError("empty reply")
    body = strip_reasoning(text).strip()
    try:  # a JSON string holding the object (double-encoded, as some tool-call arguments arrive)
        inner = json.loads(body)
    except ValueError:
        inner = None
    if isinstance(inner, str) and "{" in inner:
        body = inner.strip()
    spans, unclosed = _object_spans(body)
    objects = [obj for start, end in spans if (obj := _load_object(body[start:end])) is not None]
    answers = [obj for obj in objects if not expected_keys or any(key in obj for key in expected_keys)]
    distinct = {json.dumps(obj, sort_keys=True, default=str): obj for obj in answers}
    prose = "".join(
        body[a:b] for a, b in zip([0] + [end for _, end in spans], [start for start, _ in spans] + [len(body)])
    )
    if len(distinct) > 1:
        raise AmbiguousReply(f"{len(distinct)} different answer objects: {_snippet(text)}")
    if distinct:
        (obj,) = distinct.values()
        if expected_keys and _is_empty_answer(obj, expected_keys) and _REFUSAL_RE.search(prose):
            raise RefusedReply(f"an empty answer next to a refusal: {_snippet(text)}")
        return obj
    if unclosed:
        raise TruncatedReply(f"the JSON object never closes: {_snippet(text)}")
    if _REFUSAL_RE.search(prose):
        raise RefusedReply(f"the model declined: {_snippet(text)}")
    if objects:
        raise LLMOutputError(f"JSON object lacks {'/'.join(expected_keys)}: {_snippet(text)}")
    raise LLMOutputError(f"no JSON object in reply: {_snippet(text)}")


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
        b
        for i, item in enumerate(_as_items(obj, "playbooks", problems))
        if (b := _playbook(item, f"playbooks[{i}]", window, problems)) is not None
    ]
    return dedupe_by_content(profiles), dedupe_by_content(playbooks), problems
