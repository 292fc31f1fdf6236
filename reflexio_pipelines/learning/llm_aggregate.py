"""The LLM consolidator: one chat call per changed cluster, prompt `aggregation`, `{"playbook": {...} | null}`.

The prompt asks for a rule generalised across the members, without facts about anyone; whatever the model answers
is then worded by `aggregate.shared_rule`, so a word only one member's user wrote never reaches a shared item."""

from __future__ import annotations

from typing import Any

from reflexio_pipelines.learning.aggregate import Member, NothingShared, Rule, shared_rule
from reflexio_pipelines.learning.jsonparse import LLMOutputError, clean_text
from reflexio_pipelines.learning.llm_call import LLMEndpoint
from reflexio_pipelines.learning.llm_stage import LLMStage, StageFailed
from reflexio_pipelines.learning.prompts import load_prompt

PROMPT_ID = "aggregation"
PROMPT_VERSION = "1.1.0"
BLOCKING_KINDS = {"missing_tool", "permission_denied", "external_dependency", "policy_restriction"}
MAX_FIELD_CHARS = 1_000


def render_members(members: list[Member]) -> str:
    """`[M1] trigger: … | content: … | rationale: …` lines (one line each, cleaned)."""
    lines = []
    for i, m in enumerate(members, 1):
        parts = [
            f"trigger: {m.trigger}" if m.trigger else None,
            f"content: {m.content}",
            f"rationale: {m.rationale}" if m.rationale else None,
        ]
        lines.append(f"[M{i}] " + " | ".join(" ".join(clean_text(p, MAX_FIELD_CHARS).split()) for p in parts if p))
    return "\n".join(lines)


def render_rules(rules: list[Rule]) -> str:
    if not rules:
        return "(none)"
    return "\n".join(
        f"- {' '.join(clean_text((r.trigger + ': ') if r.trigger else '', 300).split())}"
        f"{' '.join(clean_text(r.content, MAX_FIELD_CHARS).split())}"
        for r in rules
    )


def parse_rule(obj: dict[str, Any]) -> Rule | None:
    """The rule in a reply, None for an explicit null; raises LLMOutputError for anything unusable (retried)."""
    if "playbook" not in obj:
        raise LLMOutputError("reply has no 'playbook' key")
    raw = obj["playbook"]
    if raw is None:
        return None
    if not isinstance(raw, dict) or not isinstance(raw.get("content"), str) or not raw["content"].strip():
        raise LLMOutputError("playbook must be null or an object with a non-empty content")
    blocking = raw.get("blocking_issue")
    issue: dict[str, Any] = blocking if isinstance(blocking, dict) else {}
    kind = issue.get("kind") if issue.get("kind") in BLOCKING_KINDS else None

    def text(key: str) -> str | None:
        value = raw.get(key)
        return clean_text(value, MAX_FIELD_CHARS) or None if isinstance(value, str) else None

    return Rule(
        content=clean_text(raw["content"], MAX_FIELD_CHARS),
        trigger=text("trigger"),
        rationale=text("rationale"),
        blocking_issue_kind=kind,
        blocking_issue_details=clean_text(str(issue.get("details") or ""), 300) or None if kind else None,
    )


class LiteLLMConsolidator(LLMStage):
    """A `Consolidator` backed by any LiteLLM chat model. A cluster whose call keeps failing yields no rule this
    run (it is not recorded as covered, so the next run tries again) — never a half-made playbook. Runs on the
    shared `endpoint`, or on one built from a model and its settings as keywords (see `LLMStage`)."""

    def __init__(
        self, model: str = "", *, agent_version: str = "", endpoint: LLMEndpoint | None = None, **settings: Any
    ) -> None:
        super().__init__(model, endpoint=endpoint, **settings)
        self.agent_version = agent_version
        self.prompt = load_prompt(PROMPT_ID, PROMPT_VERSION)
        self.prompt_version = self.prompt.ref

    def consolidate(self, members: list[Member], approved: list[Rule]) -> tuple[Rule | None, int, int, int]:
        messages = self.prompt.render_messages(
            agent_version=self.agent_version or "(unspecified)",
            members=render_members(members),
            approved_rules=render_rules(approved),
        )
        outcome = self.endpoint.call_json(messages, ("playbook",), parse_rule, "aggregation", stage="consolidation")
        if not outcome.ok:
            raise ConsolidationFailed.of(outcome.error, outcome, stage="consolidation")
        rule = outcome.value
        if rule is not None:
            try:
                rule = shared_rule(rule, members)
            except NothingShared as nothing:  # the call was made and paid for
                raise NothingShared(outcome.calls, outcome.prompt_tokens, outcome.completion_tokens) from nothing
        return rule, outcome.calls, outcome.prompt_tokens, outcome.completion_tokens


class ConsolidationFailed(StageFailed):
    """A cluster could not be consolidated after the retries (stage `consolidation`; carries the cost spent)."""
