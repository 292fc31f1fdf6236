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

Differences from the original on purpose: temperature defaults to 0 (reproducible), transient failures (timeouts,
429 — honouring Retry-After —, 5xx, connection errors, unparseable or schema-violating replies) are retried with
exponential backoff and full jitter instead of a single attempt, a window that still fails raises
`ExtractionFailed` instead of silently yielding nothing, and the API key is never placed in logs, results or
exception text. Failures are described by `FailureSummary`: the error class and a fixed description, never the
provider's message or the model's reply (either may echo prompt content).
"""

from __future__ import annotations

import logging
import os
import random
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from reflexio_pipelines.learning.builtin import has_forget_request
from reflexio_pipelines.learning.config import DEFAULT_GROUP, ExtractorDefinition, ExtractorGroup
from reflexio_pipelines.learning.jsonparse import (
    EXTRACTION_KEYS,
    LLMOutputError,
    clean_text,
    dedupe_by_content,
    parse_llm_json,
    validate_extraction,
)
from reflexio_pipelines.learning.prompts import Prompt, load_prompt
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
RETRYABLE_STATUS = frozenset({408, 409, 425, 429})
MAX_BACKOFF_S = 30.0


class SchemaViolation(LLMOutputError):
    """The reply is JSON but not the contract: a list of the wrong type, or items none of which is valid. Retried
    like unparseable output, so garbage is never stored as an (empty or broken) extraction."""


@dataclass(frozen=True)
class FailureSummary:
    """Why a call failed, safe to store and log: the exception class and a fixed description of its kind (HTTP
    status where there is one). Never the provider's message or the model's reply: either can echo the prompt."""

    error_class: str
    message: str

    def __str__(self) -> str:
        return f"{self.error_class}: {self.message}"


def summarize_failure(exc: BaseException) -> FailureSummary:
    """The `FailureSummary` of a failed call."""
    name = type(exc).__name__
    status = _status_code(exc)
    if isinstance(exc, SchemaViolation):
        message = "the reply is JSON but violates the extraction schema"
    elif isinstance(exc, LLMOutputError):
        message = "the reply holds no usable JSON object"
    elif isinstance(exc, TimeoutError) or "timeout" in name.lower():
        message = "the call timed out"
    elif status == 429:
        message = "rate limited (HTTP 429)"
    elif status is not None and status >= 500:
        message = f"server error (HTTP {status})"
    elif status is not None:
        message = f"request refused (HTTP {status})"
    elif isinstance(exc, ConnectionError) or "connection" in name.lower():
        message = "the connection failed"
    else:
        message = "unexpected error"
    return FailureSummary(name, message)


class ExtractionFailed(RuntimeError):
    """A window could not be extracted after all retries. Carries the cost spent so the caller can record it, and
    a `FailureSummary` of the last error (the message holds no provider text, see `FailureSummary`)."""

    def __init__(self, message: str, *, attempts: int, llm_calls: int, prompt_tokens: int, completion_tokens: int,
                 summary: FailureSummary | None = None):  # fmt: skip
        super().__init__(message)
        self.summary = summary or FailureSummary(type(self).__name__, "extraction failed")
        self.attempts = attempts
        self.llm_calls = llm_calls
        self.prompt_tokens = prompt_tokens
        self.completion_tokens = completion_tokens


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


def _status_code(exc: BaseException) -> int | None:
    for attr in ("status_code", "status"):
        value = getattr(exc, attr, None)
        if isinstance(value, int):
            return value
    response = getattr(exc, "response", None)
    value = getattr(response, "status_code", None)
    return value if isinstance(value, int) else None


def is_transient(exc: BaseException) -> bool:
    """True for failures worth retrying: bad model output, timeouts, connection errors, 408/409/425/429, 5xx.

    Authentication, permission and request-shape errors (other 4xx) fail at once: retrying cannot fix them.
    """
    if isinstance(exc, (LLMOutputError, TimeoutError, ConnectionError)):
        return True
    status = _status_code(exc)
    if status is not None:
        return status in RETRYABLE_STATUS or status >= 500
    # LiteLLM maps transport problems to these class names (no status code attached)
    return type(exc).__name__ in {"Timeout", "APIConnectionError", "APITimeoutError", "ServiceUnavailableError"}


def response_usage(response: Any) -> tuple[int, int]:
    """(prompt_tokens, completion_tokens) from a chat response's usage block; (0, 0) when absent."""
    usage = getattr(response, "usage", None)
    if usage is None and isinstance(response, dict):
        usage = response.get("usage")
    if usage is None:
        return 0, 0
    get = usage.get if isinstance(usage, dict) else lambda key: getattr(usage, key, None)
    return int(get("prompt_tokens") or 0), int(get("completion_tokens") or 0)


def reply_text(response: Any) -> str:
    """The first choice's message text, or "" when the response has none."""
    try:
        return response.choices[0].message.content or ""
    except (AttributeError, IndexError, KeyError, TypeError):
        return ""


def scrub_secret(text: str, secret: str) -> str:
    """`text` with every occurrence of `secret` replaced by `***` (unchanged when there is no secret)."""
    return text.replace(secret, "***") if secret else text


def backoff_delay(attempt: int, base_s: float, rng: random.Random) -> float:
    """Exponential delay with full jitter on top, so parallel workers do not retry in lockstep: for retry number
    `attempt` (0-based) a delay in [base·2^attempt, 2·base·2^attempt], the exponential part capped at MAX_BACKOFF_S."""
    base = min(MAX_BACKOFF_S, base_s * (2**attempt))
    return base + rng.uniform(0, base)


def retry_after_s(exc: BaseException) -> float | None:
    """Seconds a rate-limited provider asked us to wait (its `Retry-After` header, in seconds), None if not given.

    LiteLLM keeps the provider's headers on the exception (`headers`, `litellm_response_headers`) or on its httpx
    response; an HTTP-date value is ignored (the exponential backoff applies)."""
    sources = (getattr(exc, "headers", None), getattr(exc, "litellm_response_headers", None),
               getattr(getattr(exc, "response", None), "headers", None))  # fmt: skip
    for headers in sources:
        if not headers or not hasattr(headers, "get"):
            continue
        value = headers.get("retry-after") or headers.get("Retry-After")
        try:
            return max(0.0, float(value))
        except (TypeError, ValueError):
            continue
    return None


def retry_delay(exc: BaseException, attempt: int, base_s: float, rng: random.Random) -> float:
    """How long to wait before retry number `attempt` (0-based) after `exc`: the jittered exponential backoff, or
    the provider's Retry-After when that is longer (both capped at MAX_BACKOFF_S)."""
    return min(MAX_BACKOFF_S, max(backoff_delay(attempt, base_s, rng), retry_after_s(exc) or 0.0))


def complete_chat(
    model: str,
    messages: list[dict[str, str]],
    *,
    api_base: str = "",
    api_key: str = "",
    timeout_s: float = 120,
    temperature: float = 0.0,
    json_mode: bool = True,
) -> Any:
    """One LiteLLM chat call (JSON mode unless `json_mode` is False), with LiteLLM's and the SDKs' own retries off
    (retries are the caller's)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # never fetch the cost map at import
    import litellm  # lazy: importing litellm takes seconds

    litellm.suppress_debug_info = True
    kwargs: dict[str, Any] = {
        "model": model,
        "messages": messages,
        "timeout": timeout_s,
        "temperature": temperature,
        "drop_params": True,  # providers without JSON mode get the prompt's JSON instruction only
        "num_retries": 0,  # retries are ours (the provider SDKs would retry silently, uncounted)
        "max_retries": 0,
    }
    if json_mode:
        kwargs["response_format"] = {"type": "json_object"}
    if api_base:
        kwargs["api_base"] = api_base
    if api_key:
        kwargs["api_key"] = api_key
    return litellm.completion(**kwargs)


class LiteLLMExtractor:
    """Extracts profiles and playbooks from a window with any LiteLLM-supported chat model."""

    name = EXTRACTOR_NAME

    def __init__(
        self,
        model: str,
        api_base: str = "",
        api_key: str = "",
        timeout_s: float = 120,
        max_retries: int = 2,
        temperature: float = 0.0,
        *,
        backoff_base_s: float = 1.0,
        sleep: Callable[[float], None] = time.sleep,
        prompt: Prompt | None = None,
        gate_model: str = "",
        gate_prompt: Prompt | None = None,
    ) -> None:
        if not model:
            raise ValueError("LiteLLMExtractor needs a model name (an empty model means the built-in extractor)")
        self.model = model
        self.api_base = api_base
        self.timeout_s = timeout_s
        self.max_retries = max(0, max_retries)
        self.temperature = temperature
        self.backoff_base_s = backoff_base_s
        self._api_key = api_key
        self._sleep = sleep
        self._rng = random.Random()
        self.prompt = prompt or load_prompt(PROMPT_ID, PROMPT_VERSION)
        self.gate_model = gate_model.strip()
        self.gate_prompt = gate_prompt or load_prompt(GATE_PROMPT_ID, GATE_PROMPT_VERSION)

    def __repr__(self) -> str:  # the key is deliberately absent
        gate = f", gate_model={self.gate_model!r}" if self.gate_model else ""
        return f"LiteLLMExtractor(model={self.model!r}, api_base={self.api_base!r}, prompt={self.prompt.ref!r}{gate})"

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

    def _scrub(self, text: str) -> str:
        return scrub_secret(text, self._api_key)

    def _complete(self, messages: list[dict[str, str]], *, model: str = "", json_mode: bool = True) -> Any:
        return complete_chat(
            model or self.model,
            messages,
            api_base=self.api_base,
            api_key=self._api_key,
            timeout_s=self.timeout_s,
            temperature=self.temperature,
            json_mode=json_mode,
        )

    def _gate(self, window: Window, group: ExtractorGroup, result: GatedExtractionResult) -> bool:
        """Ask the gate model whether to extract; records its cost on `result`. Errors and unclear answers say yes."""
        if not self.gate_model or any(t.expert_content.strip() for t in window.turns) or has_forget_request(window):
            return True
        result.gate_calls += 1
        try:
            response = self._complete(self.gate_messages(window, group), model=self.gate_model, json_mode=False)
        except Exception as exc:  # a failed gate must never cost the window its extraction
            log.warning("gate call failed for window %s, extracting anyway: %s", window.window_id,
                        self._scrub(f"{type(exc).__name__}: {exc}")[:300])  # fmt: skip
            return True
        used = response_usage(response)
        result.gate_prompt_tokens += used[0]
        result.gate_completion_tokens += used[1]
        decision = gate_decision(reply_text(response))
        if decision is None:
            log.info("gate reply for window %s is neither true nor false; extracting", window.window_id)
        return decision is not False

    def extract(self, window: Window, group: ExtractorGroup | None = None) -> GatedExtractionResult:
        """Profiles and playbooks for `window` under the group's definitions; raises `ExtractionFailed` when every
        attempt failed. With a gate model, a window the gate rejects yields an empty result (`gate_skipped`)."""
        group = group or DEFAULT_GROUP
        result = GatedExtractionResult(extractor=EXTRACTOR_NAME, model=self.model, prompt_version=self.prompt_version)
        if not self._gate(window, group, result):
            result.gate_skipped = True
            return _with_gate_cost(result)
        messages = self.messages(window, group)
        calls = prompt_tokens = completion_tokens = 0
        failure: BaseException | None = None
        attempts = self.max_retries + 1
        for attempt in range(attempts):
            if failure is not None:
                self._sleep(retry_delay(failure, attempt - 1, self.backoff_base_s, self._rng))
            calls += 1
            try:
                response = self._complete(messages)
                used = response_usage(response)
                prompt_tokens += used[0]
                completion_tokens += used[1]
                obj = parse_llm_json(reply_text(response), expected_keys=REPLY_KEYS)
                profiles, playbooks, problems = named_items(obj, window, group)
                forget = forget_directives(obj, window, problems) if group.resolve("profile", None)[0] else []
                check_schema(obj, group, kept=len(profiles) + len(playbooks) + len(forget))
            except Exception as exc:  # classified below; anything not transient ends the window at once
                failure = exc
                # the summary, not the exception text: provider messages and replies can echo prompt content
                log.warning("extraction attempt %d/%d failed for window %s: %s", attempt + 1, attempts,
                            window.window_id, summarize_failure(exc))  # fmt: skip
                if not is_transient(exc):
                    break
                continue
            result.profiles, result.playbooks, result.forget = profiles, playbooks, forget
            if problems:
                log.info("window %s: %d item problem(s) (items dropped or coerced)", window.window_id, len(problems))
            result.llm_calls, result.prompt_tokens, result.completion_tokens = calls, prompt_tokens, completion_tokens
            return _with_gate_cost(result)
        summary = summarize_failure(failure) if failure is not None else FailureSummary("ExtractionFailed", "no attempt")
        # raised without chaining: the provider's exception (and its request context) could carry the key
        raise ExtractionFailed(
            f"extraction failed for window {window.window_id} after {calls} call(s) to {self.model}: {summary}",
            attempts=calls,
            llm_calls=calls + result.gate_calls,
            prompt_tokens=prompt_tokens + result.gate_prompt_tokens,
            completion_tokens=completion_tokens + result.gate_completion_tokens,
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
    for key, kind in (("profiles", "profile"), ("playbooks", "playbook")):
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
                problems.append(f"{key}[{i}]: unknown extractor {str(requested)[:60]!r}; attributed to "
                                f"{group.resolve(kind, None)[0]}")  # fmt: skip
            tag = group.tag_profile if kind == "profile" else group.tag_playbook
            found[key] += [tag(parsed, requested) for parsed in [*profiles, *playbooks]]
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
    for key, kind in (("profiles", "profile"), ("playbooks", "playbook"), ("forget", "profile")):
        value = obj.get(key)
        if value is None:
            continue
        if not isinstance(value, (list, dict)) and not (key == "forget" and isinstance(value, str)):
            raise SchemaViolation(f"{key} is a {type(value).__name__}, not a list")
        if group.resolve(kind, None)[0] is not None:
            offered += len(value) if isinstance(value, list) else 1
    if offered and not kept:
        raise SchemaViolation(f"none of the {offered} item(s) in the reply is valid")
