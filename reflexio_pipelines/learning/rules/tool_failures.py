"""Tool failures: a playbook per failed tool call, naming the tool and the cause, pointing at a later call of the
same tool that worked.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from reflexio_pipelines.learning.jsonparse import clean_text
from reflexio_pipelines.learning.rules.text import (
    MAX_ERROR_CHARS,
    MAX_INPUT_JSON_CHARS,
    MAX_RATIONALE_QUOTE,
    clip,
    normalise,
)
from reflexio_pipelines.learning.types import ExtractedPlaybook, ToolCall, Turn

_PERMISSION_RE = re.compile(r"permission|forbidden|\b403\b|unauthori[sz]ed|access denied", re.I)
_MISSING_RE = re.compile(r"not found|unknown tool|no such tool|not available", re.I)
_TRANSIENT_RE = re.compile(r"time(?:d)? ?out|unavailable|connection|\b5\d\d\b", re.I)
_RATE_LIMIT_RE = re.compile(r"rate.?limit|too many requests|\b429\b", re.I)
_INPUT_KEYS = ("input", "args", "arguments", "parameters", "params", "query")
_RESULT_KEYS = frozenset(
    {
        "output",
        "result",
        "response",
        "error",
        "error_message",
        "exception",
        "status",
        "latency",
        "latency_ms",
        "duration_ms",
    }
)


def blocking_issue_kind(error: str) -> str | None:
    """`permission_denied` / `missing_tool` when the error says so, else None."""
    if _PERMISSION_RE.search(error):
        return "permission_denied"
    if _MISSING_RE.search(error):
        return "missing_tool"
    return None


def tool_input(call: ToolCall) -> Any:
    """The arguments a tool call was made with (its `input`/`args`/… entry, else the non-result fields)."""
    for key in _INPUT_KEYS:
        if key in call.tool_data:
            return call.tool_data[key]
    return {k: v for k, v in call.tool_data.items() if k not in _RESULT_KEYS}


def _check_hint(call: ToolCall, error: str) -> str:
    if _PERMISSION_RE.search(error):
        return "that the credentials have the required permissions or scopes"
    if _MISSING_RE.search(error):
        return "that the tool or resource exists and is available"
    if _RATE_LIMIT_RE.search(error):
        return "the rate limit and wait"
    if _TRANSIENT_RE.search(error):
        return "that the service is reachable"
    args = tool_input(call)
    keys = ", ".join(map(str, args)) if isinstance(args, dict) and args else ""
    return f"the input ({keys})" if keys else "the input"


def tool_failure_playbooks(turns: tuple[Turn, ...]) -> Iterator[tuple[int, ExtractedPlaybook]]:
    """(turn index, playbook) for every failed tool call, in window order."""
    calls = [(i, turn, call) for i, turn in enumerate(turns) for call in turn.tools_used]
    for position, (index, turn, call) in enumerate(calls):
        error = call.error
        if error is None:
            continue
        error_text = clip(normalise(error), MAX_ERROR_CHARS)
        later_success = next(
            ((t, c) for _, t, c in calls[position + 1 :] if c.tool_name == call.tool_name and c.error is None), None
        )
        content = (
            f"{call.tool_name} failed with '{error_text}'. Check {_check_hint(call, error)} before calling it again."
        )
        rationale = f"A {call.tool_name} call failed with '{clip(error_text, MAX_RATIONALE_QUOTE)}'"
        sources = [turn.turn_id]
        if later_success is not None:
            success_turn, success_call = later_success
            working = json.dumps(tool_input(success_call), ensure_ascii=False, default=str)
            content += f" A later call succeeded; use the working input: {clip(working, MAX_INPUT_JSON_CHARS)}"
            rationale += "; a later call of the same tool succeeded"
            if success_turn.turn_id not in sources:
                sources.append(success_turn.turn_id)
        issue = blocking_issue_kind(error)
        yield (
            index,
            ExtractedPlaybook(
                content=clean_text(content),
                trigger=f"When calling the {call.tool_name} tool",
                rationale=clean_text(rationale + "."),
                kind="tool_failure",
                blocking_issue_kind=issue,
                blocking_issue_details=clean_text(error_text) if issue else None,
                source_turn_ids=sources,
            ),
        )
