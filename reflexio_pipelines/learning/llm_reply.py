"""What a chat response answered: the text the caller parses, or why there is none to parse.

LiteLLM normalises every provider's response to the OpenAI shape (`choices[0].message`, `finish_reason`), so one
reader serves them all. Checked against LiteLLM 1.110 and the protocol stubs in tests/support/provider_stubs.py
(OpenAI, Azure OpenAI, Anthropic Messages, Gemini generateContent, Ollama /api/chat):

- **Cut off** — `finish_reason == "length"` (OpenAI/Azure `length`, Anthropic `stop_reason: max_tokens`, Gemini
  `finishReason: MAX_TOKENS`, Ollama `done_reason: length`): `TruncatedReply`, whatever the text holds. A
  half-written object "repaired" shut would store half-written items; a complete-looking object before the cut
  may be a draft the model was about to revise.
- **Refused** — OpenAI's `message.refusal`, or `finish_reason == "content_filter"` (Azure's content filter,
  Anthropic `stop_reason: refusal`, Gemini `SAFETY` / `PROHIBITED_CONTENT` / …): `RefusedReply`. A refusal is a
  failed call, never an empty answer (jsonparse.py also treats prose that declines the task as one).
- **JSON inside a tool call** — a model may answer through a tool call (OpenAI `tool_calls`, Anthropic `tool_use`
  blocks, Gemini `functionCall` parts, Ollama `tool_calls`) although none was offered, or next to prose. The
  calls' arguments are appended to the message text, so the parser finds the object there (two different objects
  are ambiguous and fail).
- Reasoning a provider returns in its own channel (`reasoning_content`, Anthropic `thinking` blocks, Gemini
  `thought` parts, Ollama `thinking`) is not part of the text. Reasoning written into the text (`<think>…</think>`)
  is removed by the parser: LiteLLM moves a leading `<think>` block of an OpenAI-protocol reply into
  `reasoning_content` itself, but not, for example, one inside an Anthropic text block.

Both errors are `LLMOutputError`s: retried like any unusable reply, then recorded with a fixed description
(`summary_message`), never the model's text.
"""

from __future__ import annotations

import json
from typing import Any

from reflexio_pipelines.learning.jsonparse import RefusedReply, TruncatedReply

#: finish_reason values (as LiteLLM normalises them) that mean the model declined or was filtered.
REFUSAL_FINISH_REASONS = frozenset({"content_filter", "refusal"})


def _field(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def _tool_arguments(message: Any) -> list[str]:
    """The arguments of every tool call on `message`, as text (a dict is serialised)."""
    found = []
    for call in _field(message, "tool_calls") or []:
        arguments = _field(_field(call, "function"), "arguments")
        if isinstance(arguments, (dict, list)):
            arguments = json.dumps(arguments, ensure_ascii=False)
        if isinstance(arguments, str) and arguments.strip():
            found.append(arguments)
    return found


def answer_text(response: Any) -> str:
    """The text to parse from a chat response: the first choice's content, followed by the arguments of its tool
    calls. Raises `TruncatedReply` for a reply cut off at the token limit and `RefusedReply` for a refusal; a
    response without choices gives "" (which the parser rejects as an empty reply)."""
    try:
        choice = _field(response, "choices")[0]
    except (IndexError, KeyError, TypeError):
        return ""
    finish = str(_field(choice, "finish_reason") or "").lower()
    message = _field(choice, "message")
    if finish == "length":
        raise TruncatedReply("the provider reports the reply was cut off at the token limit (finish_reason length)")
    if finish in REFUSAL_FINISH_REASONS or _field(message, "refusal"):
        raise RefusedReply(f"the provider reports a refusal (finish_reason {finish or 'stop'})")
    content = _field(message, "content")
    text = content if isinstance(content, str) else ""
    return "\n\n".join(part for part in [text, *_tool_arguments(message)] if part.strip())
