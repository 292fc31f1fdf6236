"""Render a window as the text an extractor reads, and map cited turn labels back to turn ids.

Layout follows the original: one block per session (`session_id or request_id`) headed
`=== Session: X ===`, sessions ordered by their first turn, tool calls as `[used tool: NAME({json})]` prefixes and
user actions appended. Each turn carries a `[T{n}]` label (n = 1-based position in the window) so the model can
cite evidence; the original could only attribute a rule to the whole window.

Multi-line content is indented by two spaces on continuation lines, so a line that starts with `[T` or `===` is
always ours and never a user's text (keeps the layout unambiguous for the model and for parsers).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from reflexio_pipelines.learning.types import Turn, Window

AGENT_ROLES = frozenset({"assistant", "agent"})
CONTINUATION_INDENT = "  "
# Tool payloads can be huge (file contents, API dumps); long string values are clipped so the prompt stays small
# while the JSON stays valid and the keys (the useful signal) survive.
MAX_TOOL_STRING_CHARS = 500

_LABEL_RE = re.compile(r"^\[?\s*T?\s*(\d+)\s*\]?$", re.IGNORECASE)


def session_key(turn: Turn) -> str:
    """The grouping key the original uses for extraction: the session id, else the request id."""
    return turn.session_id or turn.request_id


def is_agent_turn(turn: Turn) -> bool:
    """True for turns written by the agent (role assistant/agent)."""
    return turn.role.strip().lower() in AGENT_ROLES


def turn_label(index: int) -> str:
    """The evidence label of the turn at 0-based `index` in its window (`T1` for the first)."""
    return f"T{index + 1}"


def preceding_index(turns: tuple[Turn, ...], index: int, *, user: bool) -> int | None:
    """Index of the nearest earlier turn in the same session that is a user turn (or an agent turn if `user` is
    False), skipping system/tool turns; None when there is none in the window."""
    key = session_key(turns[index])
    for j in range(index - 1, -1, -1):
        candidate = turns[j]
        if session_key(candidate) != key:
            continue
        if user and candidate.is_user:
            return j
        if not user and is_agent_turn(candidate):
            return j
    return None


def previous_speaker_index(turns: tuple[Turn, ...], index: int) -> int | None:
    """Index of the nearest earlier user-or-agent turn in the same session (system/tool turns are skipped)."""
    key = session_key(turns[index])
    for j in range(index - 1, -1, -1):
        candidate = turns[j]
        if session_key(candidate) == key and (candidate.is_user or is_agent_turn(candidate)):
            return j
    return None


def indent_continuation(text: str) -> str:
    """Indent every line after the first so multi-line text cannot impersonate a label or header line."""
    return text.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "\n" + CONTINUATION_INDENT)


def _clip_strings(value: Any, limit: int) -> Any:
    if isinstance(value, str):
        return value if len(value) <= limit else value[:limit] + "…"
    if isinstance(value, dict):
        return {str(k): _clip_strings(v, limit) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clip_strings(v, limit) for v in value]
    return value


def tool_data_json(tool_data: dict[str, Any]) -> str:
    """Compact JSON of a tool call's data with long strings clipped; non-JSON values are stringified."""
    return json.dumps(_clip_strings(tool_data, MAX_TOOL_STRING_CHARS), ensure_ascii=False, default=str)


def _render_turn(index: int, turn: Turn) -> str:
    prefixes = "".join(f"[used tool: {call.tool_name}({tool_data_json(call.tool_data)})] " for call in turn.tools_used)
    line = f"[{turn_label(index)}] {turn.role}: {prefixes}{indent_continuation(turn.content)}"
    if turn.user_action and turn.user_action != "none":
        action = f"[user action: {turn.user_action} {turn.user_action_description}]".rstrip()
        line += "\n" + CONTINUATION_INDENT + indent_continuation(action)
    return line


def render_window(window: Window) -> str:
    """The window as a labelled transcript, one block per session, sessions ordered by their first turn."""
    blocks: dict[str, list[str]] = {}
    for index, turn in enumerate(window.turns):
        # dicts keep insertion order, so blocks come out ordered by each session's first turn in the window
        blocks.setdefault(session_key(turn), []).append(_render_turn(index, turn))
    return "\n\n".join(f"=== Session: {key} ===\n" + "\n".join(lines) for key, lines in blocks.items())


def render_expert_pairs(window: Window) -> str:
    """Comparison blocks for every turn carrying `expert_content`; empty string when there are none."""
    pairs: list[str] = []
    turns = window.turns
    for index, turn in enumerate(turns):
        if not turn.expert_content.strip():
            continue
        question_index = preceding_index(turns, index, user=True)
        question = (
            f"User Question [{turn_label(question_index)}]: {indent_continuation(turns[question_index].content)}"
            if question_index is not None
            else "User Question: (not in this window)"
        )
        pairs.append(
            f"=== Comparison {len(pairs) + 1} ===\n{question}\n"
            f"Agent Response [{turn_label(index)}]: {indent_continuation(turn.content)}\n"
            f"Expert Response [{turn_label(index)}]: {indent_continuation(turn.expert_content)}"
        )
    return "\n\n".join(pairs)


def label_index(label: object) -> int | None:
    """0-based window index for a cited label like `T3`, `[T3]`, `t3` or `3`; None if it is not a label."""
    if isinstance(label, bool):
        return None
    if isinstance(label, int):
        return label - 1 if label >= 1 else None
    if not isinstance(label, str):
        return None
    match = _LABEL_RE.match(label.strip())
    if not match:
        return None
    number = int(match.group(1))
    return number - 1 if number >= 1 else None


def turn_ids_for_labels(window: Window, labels: Iterable[object]) -> list[str]:
    """Turn ids for the cited labels, in window order, without duplicates; labels outside the window are ignored."""
    indices = {i for i in (label_index(label) for label in labels) if i is not None and i < len(window.turns)}
    return [window.turns[i].turn_id for i in sorted(indices)]
