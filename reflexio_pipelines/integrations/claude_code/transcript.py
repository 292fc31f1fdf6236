"""A Claude Code session transcript (the JSONL file at a hook's `transcript_path`) as Reflexio interactions.

Each line of the transcript is one entry: `{"type": "user" | "assistant" | "system" | …, "uuid", "parentUuid",
"sessionId", "timestamp", "message": {"role", "content"}, …}`. The user's prompts are `user` entries whose content is
a string or text blocks; tool results come back as `user` entries of `tool_result` blocks (`tool_use_id`, `content`,
`is_error`); the model's answers are `assistant` entries of `text` / `thinking` / `tool_use` blocks (one entry per
block when streamed). Entries of subagents (`isSidechain`), meta entries (`isMeta`: command caveats, expanded slash
commands), compaction summaries and local-command echoes are not conversation and are left out.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

#: The longest tool output / input string kept (error text is kept whole up to MAX_ERROR_CHARS).
MAX_OUTPUT_CHARS = 4000
MAX_INPUT_CHARS = 2000
MAX_ERROR_CHARS = 20_000
#: User "messages" Claude Code writes itself: slash-command echoes, caveats, interruptions, compaction.
_NOISE = re.compile(
    r"^\s*(?:<command-(?:name|message|args)>|<local-command-(?:stdout|stderr)>|<bash-(?:input|stdout|stderr)>|"
    r"Caveat: The messages below were generated|\[Request interrupted by user|"
    r"This session is being continued from a previous conversation)"
)
_CONTEXT_BLOCK = re.compile(r"<reflexio_context>.*?</reflexio_context>\s*", re.S)


def read_entries(path: str | Path) -> list[dict[str, Any]]:
    """The transcript's entries in file order; unreadable lines (a line being written) are skipped."""
    entries = []
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict):
                entries.append(entry)
    return entries


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[: limit - 1]}…"


def _text(content: Any) -> str:
    """The text of message content: a string, or the `text` of its text blocks (joined by newlines)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [b.get("text", "") for b in content if isinstance(b, Mapping) and b.get("type") == "text"]
        return "\n".join(p for p in parts if isinstance(p, str) and p)
    return ""


def _clip_input(value: Any) -> Any:
    """A tool's input with long strings (file contents of a Write, …) shortened."""
    if isinstance(value, str):
        return _clip(value, MAX_INPUT_CHARS)
    if isinstance(value, Mapping):
        return {str(k): _clip_input(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clip_input(v) for v in value]
    return value


def user_prompt(entry: Mapping[str, Any]) -> str | None:
    """The text a person typed, if `entry` is such a user entry (not a tool result, meta entry or echo)."""
    if entry.get("type") != "user" or entry.get("isMeta") or entry.get("isSidechain") or entry.get("isCompactSummary"):
        return None
    content = (entry.get("message") or {}).get("content")
    if isinstance(content, list) and any(isinstance(b, Mapping) and b.get("type") == "tool_result" for b in content):
        return None
    text = _CONTEXT_BLOCK.sub("", _text(content)).strip()
    return text if text and not _NOISE.match(text) else None


def interactions(entries: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The conversation in `entries`: each prompt as a user interaction, and the model's answer to it as one
    assistant interaction — its text blocks joined, every tool call as `tools_used` (`input`, and the result as
    `output`, or as `error` when the tool result has `is_error`, verbatim)."""
    out: list[dict[str, Any]] = []
    texts: list[str] = []
    tools: dict[str, dict[str, Any]] = {}

    def close_answer() -> None:
        if texts or tools:
            answer: dict[str, Any] = {"role": "assistant", "content": "\n\n".join(texts)}
            if tools:
                answer["tools_used"] = list(tools.values())
            out.append(answer)
        texts.clear()
        tools.clear()

    for entry in entries:
        if entry.get("isSidechain") or entry.get("isMeta"):
            continue
        content = (entry.get("message") or {}).get("content")
        if entry.get("type") == "user":
            if (prompt := user_prompt(entry)) is not None:
                close_answer()
                out.append({"role": "user", "content": prompt})
            elif isinstance(content, list):
                for block in content:
                    if not (isinstance(block, Mapping) and block.get("type") == "tool_result"):
                        continue
                    call_id = str(block.get("tool_use_id") or "")
                    tool = tools.setdefault(call_id, {"tool_name": "tool", "tool_data": {}})
                    result = _text(block.get("content"))
                    if block.get("is_error"):
                        tool["tool_data"]["error"] = _clip(result, MAX_ERROR_CHARS)
                    else:
                        tool["tool_data"]["output"] = _clip(result, MAX_OUTPUT_CHARS)
        elif entry.get("type") == "assistant":
            blocks = content if isinstance(content, list) else [{"type": "text", "text": _text(content)}]
            for block in blocks:
                if not isinstance(block, Mapping):
                    continue
                if block.get("type") == "text" and (text := str(block.get("text") or "").strip()):
                    texts.append(text)
                elif block.get("type") == "tool_use" and block.get("name"):
                    tools[str(block.get("id") or len(tools))] = {
                        "tool_name": str(block["name"]),
                        "tool_data": {"input": _clip_input(block.get("input") or {})},
                    }
    close_answer()
    return out
