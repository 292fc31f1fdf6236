"""The LLM extractor: one LiteLLM chat call per window and extractor group, prompt `extraction`, JSON out.

The prompt lists the group's named definitions (from the extraction config); items may name the definition that
produced them in an `extractor` field (absent or unknown = the group's first extractor of that kind).

Optional cheap gate (`gate_model`): before extracting, one short call on a small model answers true/false for the
window (prompt `extraction_gate`). `false` skips the extraction call (the window still counts as processed); a gate
error or an unclear answer extracts anyway; windows with expert answers or a forget request (the builtin's wording
heuristic) skip the gate (they are explicit signal, and a lost forget request would keep a fact the user revoked).

Forget requests (prompt 1.2.0, the deletion directive channel): the reply's `forget` list names facts the user
asked the agent to forget (`{"target": "Lives in Paris", "evidence": ["T4"]}`); they come back as
`ForgetDirective`s and are matched against the user's stored profiles in learn.py, never stored as facts.

Every call (the gate's too) goes through the shared `LLMEndpoint` (llm_call.py): throttle, retries, ledger.

Differences from the original on purpose: temperature defaults to 0 (reproducible), transient failures (timeouts,
429 — honouring Retry-After —, 5xx, connection errors, unparseable or schema-violating replies) are retried with
exponential backoff and full jitter instead of a single attempt, a window that still fails raises
`ExtractionFailed` instead of silently yielding nothing, and the API key is never placed in logs, results or
exception text. Failures are described by `FailureSummary`: the error class and a fixed description, never the
provider's message or the model's reply (either may echo prompt content).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from reflexio_pipelines.learning.config import DEFAULT_GROUP
from reflexio_pipelines.learning.extractor_groups import ExtractorDefinition, ExtractorGroup
from reflexio_pipelines.learning.jsonparse import (
    EXTRACTION_KEYS,
    LLMOutputError,
    clean_text,
    dedupe_by_content,
    validate_extraction,
)
from reflexio_pipelines.learning.llm_call import LLMEndpoint
from reflexio_pipelines.learning.llm_failures import FailureSummary
from reflexio_pipelines.learning.llm_stage import LLMStage, StageFailed
from reflexio_pipelines.learning.prompts import Prompt, load_prompt
from reflexio_pipelines.learning.rules.forget_requests import has_forget_request
from reflexio_pipelines.learning.transcript import (
    indent_continuation,
    render_expert_pairs,
    render_window,
    turn_ids_for_labels,
)
from reflexio_pipelines.learning.types import (
    ExtractedPlaybook,
    ExtractedProfile,
    ExtractionResult,
    ForgetDirective,
    Window,
)

log = logging.getLogger(__name__)

EXTRACTOR_NAME = "litellm"
PROMPT_ID = "extraction"
PROMPT_VERSION = "1.2.0"
#: Top-level keys of an extraction reply (any one present makes it a reply in the contract).
REPLY_KEYS = (*EXTRACTION_KEYS, "forget")
GATE_PROMPT_ID = "extraction_gate"
GATE_PROMPT_VERSION = "1.0.0"
NOT_GIVEN = "(not given)"
NO_DEFINITIONS = "(none: return an empty list)"
_GATE_ANSWER_RE = re.compile(r"\b(true|false)\b")


class SchemaViolation(LLMOutputError):
    """The reply is JSON but not the contract: a list of the wrong type, or items none of which is valid. Retried
    like unparseable output, so garbage is never stored as an (empty or broken) extraction."""

    summary_message = "the reply is JSON but violates the extraction schema"  # read by summarize_failure


class ExtractionFailed(StageFailed):
    """A window could not be extracted after all retries (stage `extraction`). `calls` and the tokens include the
    gate's; `attempts` counts the extraction call's; the summary holds no provider text (see `FailureSummary`)."""


@dataclass
class GatedExtractionResult(ExtractionResult):
    """An LLM extraction result with the gate's share of the cost broken out (`llm_calls` and the token counts
    include the gate's). `gate_skipped`: the gate said no, so no extraction call was made."""

    gate_calls: int = 0
    gate_prompt_tokens: int = 0
    gate_completion_tokens: int = 0
    gate_skipped: bool = False


def render_definitions(definitions: Iterable[ExtractorDefinition]) -> str:
    """`- name: definition` lines (continuation lines indented); when the group has none of a kind, a note that
    the list stays empty."""
    lines = [f"- {d.name}: {indent_continuation(d.prompt)}" for d in definitions]
    return "\n".join(lines) or NO_DEFINITIONS


def render_tools(tools: Iterable[tuple[str, str]]) -> str:
    """The agent's tools as `name: description` joined by `; ` (the original's tool_can_use lines, compacted)."""
    return "; ".join(f"{name}: {description}" if description else name for name, description in tools)


def gate_decision(reply: str) -> bool | None:
    """True/False from the gate's reply (the first bare `true`/`false` word), None when it holds neither."""
    match = _GATE_ANSWER_RE.search(reply.lower())
    return None if match is None else match.group(1) == "true"


class LiteLLMExtractor(LLMStage):
    """Extracts profiles and playbooks from a window with any LiteLLM-supported chat model.

    Give it the shared `endpoint` (what the pipeline does: `make_extractor`, `ExtractorResource`), or a model and
    its settings as keywords, from which it builds one (see `LLMStage`)."""

    name = EXTRACTOR_NAME

    def __init__(
        self,
        model: str = "",
        *,
        prompt: Prompt | None = None,
        gate_model: str = "",
        gate_prompt: Prompt | None = None,
        endpoint: LLMEndpoint | None = None,
        **settings: Any,
    ) -> None:
        super().__init__(model, endpoint=endpoint, **settings)
        self.prompt = prompt or load_prompt(PROMPT_ID, PROMPT_VERSION)
        self.gate_model = gate_model.strip()
        # the gate is a second model on the same endpoint settings (and its own throttle: another model's quota)
        self.gate_endpoint = self.endpoint.with_model(self.gate_model) if self.gate_model else None
        self.gate_prompt = gate_prompt or load_prompt(GATE_PROMPT_ID, GATE_PROMPT_VERSION)

    def repr_fields(self) -> str:
        """The prompt, and the gate model when there is one."""
        gate = f", gate_model={self.gate_model!r}" if self.gate_model else ""
        return f", prompt={self.prompt.ref!r}{gate}"

    @property
    def prompt_version(self) -> str:
        """`extraction@<version>`, recorded with every result."""
        return self.prompt.ref

    def messages(self, window: Window, group: ExtractorGroup | None = None) -> list[dict[str, str]]:
        """The chat messages sent for `window` and the extractor group (default: the default config's)."""
        group = group or DEFAULT_GROUP
        return self.prompt.render_messages(
            agent_context=group.agent_context.strip() or NOT_GIVEN,
            tools=render_tools(group.tools) or NOT_GIVEN,
            profile_definitions=render_definitions(group.profile_extractors),
            playbook_definitions=render_definitions(group.playbook_extractors),
            transcript=render_window(window),
            expert_pairs=render_expert_pairs(window) or "(none)",
        )

    def gate_messages(self, window: Window, group: ExtractorGroup | None = None) -> list[dict[str, str]]:
        """The chat messages of the gate call for `window`."""
        group = group or DEFAULT_GROUP
        return self.gate_prompt.render_messages(
            agent_context=group.agent_context.strip() or NOT_GIVEN,
            profile_definitions=render_definitions(group.profile_extractors),
            playbook_definitions=render_definitions(group.playbook_extractors),
            transcript=render_window(window),
        )

    def _gate(self, window: Window, group: ExtractorGroup, result: GatedExtractionResult) -> bool:
        """Ask the gate model whether to extract; records its cost on `result`. Errors and unclear answers say yes."""
        if (
            self.gate_endpoint is None
            or any(t.expert_content.strip() for t in window.turns)
            or has_forget_request(window)
        ):
            return True
        # one attempt: a failed gate costs only the gate, since the window is then extracted anyway
        outcome = self.gate_endpoint.call(
            self.gate_messages(window, group),
            gate_decision,
            stage="gate",
            what=f"gate of window {window.window_id}",
            json_mode=False,
            max_retries=0,
        )
        result.gate_calls += outcome.calls
        result.gate_prompt_tokens += outcome.prompt_tokens
        result.gate_completion_tokens += outcome.completion_tokens
        if not outcome.ok:  # a failed gate must never cost the window its extraction
            log.warning("gate call failed for window %s, extracting anyway: %s", window.window_id, outcome.failure)
            return True
        if outcome.value is None:
            log.info("gate reply for window %s is neither true nor false; extracting", window.window_id)
        return outcome.value is not False

    def extract(self, window: Window, group: ExtractorGroup | None = None) -> GatedExtractionResult:
        """Profiles and playbooks for `window` under the group's definitions; raises `ExtractionFailed` when every
        attempt failed. With a gate model, a window the gate rejects yields an empty result (`gate_skipped`)."""
        group = group or DEFAULT_GROUP
        result = GatedExtractionResult(extractor=EXTRACTOR_NAME, model=self.model, prompt_version=self.prompt_version)
        if not self._gate(window, group, result):
            result.gate_skipped = True
            return _with_gate_cost(result)

        def validate(
            obj: dict[str, Any],
        ) -> tuple[list[ExtractedProfile], list[ExtractedPlaybook], list[ForgetDirective]]:
            profiles, playbooks, problems = named_items(obj, window, group)
            forget = forget_directives(obj, window, problems) if group.resolve("profile", None)[0] else []
            check_schema(obj, group, kept=len(profiles) + len(playbooks) + len(forget))  # raises: retried
            if problems:
                log.info("window %s: %d item problem(s) (items dropped or coerced)", window.window_id, len(problems))
            return profiles, playbooks, forget

        outcome = self.endpoint.call_json(
            self.messages(window, group),
            REPLY_KEYS,
            validate,
            f"extraction of window {window.window_id}",
            stage="extraction",
        )
        if outcome.ok and outcome.value is not None:
            result.profiles, result.playbooks, result.forget = outcome.value
            result.llm_calls, result.prompt_tokens = outcome.calls, outcome.prompt_tokens
            result.completion_tokens = outcome.completion_tokens
            return _with_gate_cost(result)
        summary = outcome.failure or FailureSummary("ExtractionFailed", "no attempt")
        # raised without chaining: the provider's exception (and its request context) could carry the key
        raise ExtractionFailed(
            f"extraction failed for window {window.window_id} after {outcome.calls} call(s) to {self.model}: {summary}",
            stage="extraction",
            attempts=outcome.calls,
            calls=outcome.calls + result.gate_calls,
            prompt_tokens=outcome.prompt_tokens + result.gate_prompt_tokens,
            completion_tokens=outcome.completion_tokens + result.gate_completion_tokens,
            summary=summary,
        ) from None


def _with_gate_cost(result: GatedExtractionResult) -> GatedExtractionResult:
    """The gate's calls and tokens added to the totals (they were paid for like any other call)."""
    result.llm_calls += result.gate_calls
    result.prompt_tokens += result.gate_prompt_tokens
    result.completion_tokens += result.gate_completion_tokens
    return result


def named_items(
    obj: dict[str, Any], window: Window, group: ExtractorGroup
) -> tuple[list[ExtractedProfile], list[ExtractedPlaybook], list[str]]:
    """Typed items from a parsed reply, each tagged with the group extractor named in its `extractor` field
    (absent or unknown = the group's first of that kind), plus problems. Items of a kind the group does not
    extract are dropped. Items are validated one by one (`validate_extraction`), so one bad item costs only itself.
    """
    problems: list[str] = []
    found: dict[str, list[Any]] = {"profiles": [], "playbooks": []}
    kinds: tuple[tuple[str, Literal["profile", "playbook"]], ...] = (("profiles", "profile"), ("playbooks", "playbook"))
    for key, kind in kinds:
        raw = obj.get(key)
        if raw is None:
            continue
        items = [raw] if isinstance(raw, dict) else raw
        if not isinstance(items, list):
            problems += validate_extraction({key: raw}, window)[2]  # reports what the value should have been
            continue
        if items and group.resolve(kind, None)[0] is None:
            problems.append(f"{key}: the group {group.name} has no {kind} extractor; {len(items)} item(s) ignored")
            continue
        for i, item in enumerate(items):
            requested = item.get("extractor") if isinstance(item, dict) else None
            if isinstance(item, dict):
                item = {k: v for k, v in item.items() if k != "extractor"}  # not a custom feature
            profiles, playbooks, item_problems = validate_extraction({key: [item]}, window)
            problems += [p.replace(f"{key}[0]", f"{key}[{i}]", 1) for p in item_problems]
            if requested is not None and not group.resolve(kind, requested)[1]:
                problems.append(
                    f"{key}[{i}]: unknown extractor {str(requested)[:60]!r}; attributed to "
                    f"{group.resolve(kind, None)[0]}"
                )
            # one item under `key`: only the list of that kind can be non-empty
            if kind == "profile":
                found[key] += [group.tag_profile(parsed, requested) for parsed in profiles]
            else:
                found[key] += [group.tag_playbook(parsed, requested) for parsed in playbooks]
    return dedupe_by_content(found["profiles"]), dedupe_by_content(found["playbooks"]), problems


def forget_directives(obj: dict[str, Any], window: Window, problems: list[str]) -> list[ForgetDirective]:
    """The reply's `forget` list as directives (a bare string is a target; evidence labels map to turn ids, none
    cited = the whole window). Bad entries are dropped and reported in `problems`."""
    raw = obj.get("forget")
    if raw is None:
        return []
    entries = [raw] if isinstance(raw, (dict, str)) else raw
    if not isinstance(entries, list):
        problems.append(f"forget: expected a list, got {type(raw).__name__}; ignored")
        return []
    directives: list[ForgetDirective] = []
    for i, entry in enumerate(entries):
        item = {"target": entry} if isinstance(entry, str) else entry
        target = item.get("target") if isinstance(item, dict) else None
        text = clean_text(target) if isinstance(target, str) else ""
        if not text:
            problems.append(f"forget[{i}]: target missing or not text; dropped")
            continue
        evidence = item.get("evidence")
        labels = [evidence] if isinstance(evidence, (str, int)) else evidence
        cited = turn_ids_for_labels(window, labels) if isinstance(labels, list) else []
        directives.append(ForgetDirective(text, cited or [t.turn_id for t in window.turns]))
    return directives


def check_schema(obj: dict[str, Any], group: ExtractorGroup, kept: int) -> None:
    """Raise `SchemaViolation` when the reply is not the contract as a whole: a top-level list of the wrong type,
    or items of kinds the group extracts of which not one was valid (`kept` counts what survived). One bad item
    among good ones is only dropped (see `named_items`)."""
    offered = 0
    keys: tuple[tuple[str, Literal["profile", "playbook"]], ...] = (
        ("profiles", "profile"),
        ("playbooks", "playbook"),
        ("forget", "profile"),
    )
    for key, kind in keys:
        value = obj.get(key)
        if value is None:
            continue
        if not isinstance(value, (list, dict)) and not (key == "forget" and isinstance(value, str)):
            raise SchemaViolation(f"{key} is a {type(value).__name__}, not a list")
        if group.resolve(kind, None)[0] is not None:
            offered += len(value) if isinstance(value, list) else 1
    if offered and not kept:
        raise SchemaViolation(f"none of the {offered} item(s) in the reply is valid")
