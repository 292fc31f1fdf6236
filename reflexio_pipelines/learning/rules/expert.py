"""Expert answers: a playbook when an expert's answer differs in substance from the agent's (token-set heuristic)."""

from __future__ import annotations

from reflexio_pipelines.learning.jsonparse import clean_text
from reflexio_pipelines.learning.rules.text import MAX_TRIGGER_CHARS, clip, content_tokens, normalise
from reflexio_pipelines.learning.transcript import preceding_index
from reflexio_pipelines.learning.types import ExtractedPlaybook, Turn

EXPERT_JACCARD_THRESHOLD = 0.6
MAX_MISSED_TOKENS = 10
MAX_EXPERT_CHARS = 400


def _expert_gap(agent: str, expert: str) -> list[str]:
    """Content tokens the expert used and the agent lacked, if the answers differ in substance; else [].

    HEURISTIC, not understanding: "substance" means the expert introduces new content words AND the two token
    sets overlap less than EXPERT_JACCARD_THRESHOLD. Reordering, casing, punctuation and filler words leave the
    sets unchanged and yield nothing; a paraphrase with many synonyms may be misread as substantive.
    """
    agent_tokens = set(content_tokens(agent))
    expert_ordered = content_tokens(expert)
    expert_tokens = set(expert_ordered)
    missed = [t for t in expert_ordered if t not in agent_tokens]
    union = agent_tokens | expert_tokens
    jaccard = len(agent_tokens & expert_tokens) / len(union) if union else 1.0
    return missed if missed and jaccard < EXPERT_JACCARD_THRESHOLD else []


def expert_playbook(turns: tuple[Turn, ...], index: int) -> ExtractedPlaybook | None:
    turn = turns[index]
    expert = turn.expert_content.strip()
    if not expert:
        return None
    missed = _expert_gap(turn.content, expert)
    if not missed:
        return None
    question_index = preceding_index(turns, index, user=True)
    if question_index is not None:
        trigger = f"When asked: {normalise(turns[question_index].content)}"
        sources = [turns[question_index].turn_id, turn.turn_id]
    else:
        trigger = f"When answering like: {normalise(turn.content)}"
        sources = [turn.turn_id]
    return ExtractedPlaybook(
        content=clean_text(f"Answer as the expert did: {clip(normalise(expert), MAX_EXPERT_CHARS)}"),
        trigger=clean_text(clip(trigger, MAX_TRIGGER_CHARS)),
        rationale=clean_text(
            "The expert answer covers points the agent's answer missed: " + ", ".join(missed[:MAX_MISSED_TOKENS])
        ),
        kind="expert",
        source_turn_ids=sources,
    )
