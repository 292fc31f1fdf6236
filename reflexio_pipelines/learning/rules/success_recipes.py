"""Success recipes: tool calls that worked, confirmed by the user."""

from __future__ import annotations

import json
import re

from reflexio_pipelines.learning.jsonparse import clean_text
from reflexio_pipelines.learning.rules.corrections import task_request_index
from reflexio_pipelines.learning.rules.facts import LEAD_IN_RE
from reflexio_pipelines.learning.rules.text import MAX_INPUT_JSON_CHARS, MAX_RATIONALE_QUOTE, clip
from reflexio_pipelines.learning.rules.tool_failures import tool_input
from reflexio_pipelines.learning.rules.triggers import situation_trigger
from reflexio_pipelines.learning.transcript import is_agent_turn
from reflexio_pipelines.learning.types import ExtractedPlaybook, Turn

# Heuristic: an explicit thank-you or approval right after the agent's turn is the success signal.
APPROVAL_RE = re.compile(
    r"^(?:thanks|thank you|thx|perfect|great|awesome|excellent|nice|works|that works|it works|exactly|"
    r"that's (?:it|right|perfect|great)|looks good|lgtm)\b",
    re.I,
)


def success_recipe(turns: tuple[Turn, ...], index: int) -> ExtractedPlaybook | None:
    """A recipe from an agent turn whose tool calls all succeeded and that the user then approved.

    Content lists the exact calls and inputs that worked (grounded in the turn); the trigger is the request.
    """
    turn = turns[index]
    if not is_agent_turn(turn) or not turn.tools_used or any(c.error is not None for c in turn.tools_used):
        return None
    reply = next((t for t in turns[index + 1 :] if t.is_user), None)
    request_index = task_request_index(turns, index)
    if reply is None or request_index is None or not APPROVAL_RE.match(LEAD_IN_RE.sub("", reply.content.strip())):
        return None
    steps = "; then ".join(
        f"{call.tool_name}({clip(json.dumps(tool_input(call), ensure_ascii=False, default=str), MAX_INPUT_JSON_CHARS)})"
        for call in turn.tools_used
    )
    request = turns[request_index]
    return ExtractedPlaybook(
        content=clean_text(f"What worked: {steps}."),
        trigger=situation_trigger(request.content),
        rationale=clean_text(f"The user approved the result: '{clip(reply.content, MAX_RATIONALE_QUOTE)}'."),
        kind="recipe",
        source_turn_ids=[request.turn_id, turn.turn_id, reply.turn_id],
    )
