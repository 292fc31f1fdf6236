"""A small OpenAI-compatible chat server (POST /v1/chat/completions, GET /v1/models) acting as a fake LLM.

It answers by replaying the built-in rules, so it tests plumbing (HTTP, retries, JSON repair, concurrency, call and
token accounting), not extraction quality. Tests and benchmarks serve it on 127.0.0.1 (`devtools.servers.serve_app`,
or uvicorn in a process of its own); nothing in the pipeline or the service imports it.

The default behaviour really reads the prompt: it parses the `[T{n}] role: content` transcript and the expert
comparisons back out of the user message, runs the builtin rules over the reconstructed turns, and answers in the
extraction JSON contract, citing the `T{n}` labels as evidence. Deduplication prompts (recognised by their
`[NEW-i] (time) text` lines) are answered too: the NEW/EXISTING lines are parsed back out and grouped by a
deterministic rule close to the offline judge (see `dedup_reply`). Session-evaluation prompts are answered by the
heuristic judge's rules over the transcript parsed back (`session_evaluation_reply`), shadow-comparison prompts by a
content-word rule that ignores which answer is A (`shadow_comparison_reply`). The reply is wrapped in a ```json
fence and carries a trailing comma, so every call exercises the client's repair path. Forget requests in the
transcript ("forget that I live in Paris") are answered in the extraction prompt's `forget` list (the deletion
directive channel), found by the builtin's forget heuristic like everything else the stub extracts.

Faults for tests: garbage replies or HTTP errors for the first N calls, and `FaultPlan`: a seeded, deterministic
fraction of calls that time out (the stub sleeps past the client's timeout), answer 429 with Retry-After, answer
500, reply malformed JSON or reply JSON that violates the extraction schema. Whether a call is faulted depends on
the seed, the request body and how often that body was seen before — not on call order — so a request meets the
same sequence of faults in every run, and a retry of the same request draws again. Every request body and Authorization
header is recorded on `app.state.requests`, every injected fault on `app.state.faults`.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from reflexio_pipelines.learning.dedup import profile_slot
from reflexio_pipelines.learning.judge import compare_answers, heuristic_verdict
from reflexio_pipelines.learning.learned_rows import content_key
from reflexio_pipelines.learning.llm_judge import NO_QUESTION
from reflexio_pipelines.learning.rules.extractor import RuleExtractor
from reflexio_pipelines.learning.sessions import Session
from reflexio_pipelines.learning.transcript import CONTINUATION_INDENT
from reflexio_pipelines.learning.types import ExtractionResult, ToolCall, Turn, Window

GARBAGE_REPLY = "I'm sorry, I can't produce that right now. {{{ not json"

_SESSION_RE = re.compile(r"^=== Session: (.*) ===$")
_TURN_RE = re.compile(r"^\[T(\d+)\] ([^:\n]*): ?(.*)$")
_PAIR_RE = re.compile(r"^(User Question|Agent Response|Expert Response) \[T(\d+)\]: ?(.*)$")
_TOOL_PREFIX = "[used tool: "
_DEDUP_LINE_RE = re.compile(r"^\[(NEW|EXISTING)-(\d+)\] \(([^)]*)\) ?(.*)$")
_ITEM_KIND_RE = re.compile(r"^Item kind: (.*)$", re.M)
#: Playbooks whose word sets overlap at least this much (Jaccard) count as the same rule.
PLAYBOOK_JACCARD = 0.8


FAULT_KINDS = ("timeout", "rate_limit", "server_error", "malformed_json", "schema_violation")
#: A reply that is valid JSON with the right keys but not the extraction contract (wrong types everywhere).
SCHEMA_VIOLATING_REPLY = {"profiles": "Lives somewhere", "playbooks": [{"rule": "be nice", "evidence": 3}], "forget": 7}


@dataclass(frozen=True)
class FaultPlan:
    """Which calls fail, and how. `rate` is the fraction of calls faulted; the kind is drawn uniformly from `kinds`.

    `timeout_sleep_s` must exceed the client's timeout; `retry_after_s` is sent as the 429's Retry-After header.
    """

    rate: float = 0.3
    seed: int = 0
    kinds: tuple[str, ...] = FAULT_KINDS
    timeout_sleep_s: float = 1.5
    retry_after_s: float = 0.05

    def draw(self, body: dict[str, Any], occurrence: int) -> str | None:
        """The fault for the `occurrence`-th (1-based) call with this exact body, or None for a clean answer."""
        digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
        rng = random.Random(f"{self.seed}:{digest}:{occurrence}")
        return rng.choice(self.kinds) if rng.random() < self.rate else None


@dataclass
class StubBehaviour:
    """How the stub answers. Counters are per app (calls are counted from 1)."""

    error_first: int = 0  # the first N calls return HTTP `error_status`
    garbage_first: int = 0  # the first N calls (those not already failed by error_first) reply non-JSON, HTTP 200
    error_status: int = 500
    fence: bool = True  # wrap the JSON in ```json … ```
    trailing_comma: bool = True  # leave a trailing comma before the final brace
    responder: Callable[[dict[str, Any]], str] | None = None  # replaces the fake-LLM reply (gets the request body)
    delay_s: float = 0.0  # wait before answering (to exercise client timeouts)
    faults: FaultPlan | None = None  # seeded random faults (see FaultPlan)


def _parse_tool_prefixes(text: str) -> tuple[tuple[ToolCall, ...], str]:
    """Split leading `[used tool: NAME({json})] ` prefixes off a rendered turn."""
    calls: list[ToolCall] = []
    decoder = json.JSONDecoder()
    while text.startswith(_TOOL_PREFIX):
        open_paren = text.find("(", len(_TOOL_PREFIX))
        if open_paren < 0:
            break
        try:
            data, end = decoder.raw_decode(text, open_paren + 1)
        except ValueError:
            break
        if not text.startswith(")] ", end):
            break
        calls.append(ToolCall(tool_name=text[len(_TOOL_PREFIX) : open_paren], tool_data=data))
        text = text[end + 3 :]
    return tuple(calls), text


def _blocks(lines: list[str], head: re.Pattern[str]) -> list[tuple[re.Match[str], str]]:
    """Lines matching `head`, each with its indented continuation lines joined back (user-action lines skipped)."""
    found: list[tuple[re.Match[str], list[str]]] = []
    current: list[str] | None = None
    for line in lines:
        if match := head.match(line):
            current = [match.groups()[-1]]
            found.append((match, current))
        elif current is not None and line.startswith(CONTINUATION_INDENT):
            if not line.startswith(CONTINUATION_INDENT + "[user action:"):
                current.append(line[len(CONTINUATION_INDENT) :])
        else:
            current = None  # a header or blank line ends the block
    return [(match, "\n".join(parts)) for match, parts in found]


def window_from_prompt(prompt: str) -> Window:
    """Rebuild the window from a rendered extraction prompt; turn ids are the labels (`T1`, `T2`, …)."""
    transcript, _, expert_part = prompt.partition("Expert comparisons:")
    lines = transcript.split("\n")
    session_of: dict[str, str] = {}
    session = "session"
    for line in lines:
        if match := _SESSION_RE.match(line):
            session = match.group(1)
        elif match := _TURN_RE.match(line):
            session_of[match.group(1)] = session
    experts = {
        match.group(2): text
        for match, text in _blocks(expert_part.split("\n"), _PAIR_RE)
        if match.group(1) == "Expert Response"
    }
    turns = []
    for match, text in _blocks(lines, _TURN_RE):
        number, role = match.group(1), match.group(2)
        tools, content = _parse_tool_prefixes(text)
        turns.append(
            Turn(
                turn_id=f"T{number}",
                interaction_id=int(number),
                request_id=session_of[number],
                user_id="stub-user",
                role=role,
                content=content,
                created_at=int(number),
                session_id=session_of[number],
                tools_used=tools,
                expert_content=experts.get(number, ""),
            )
        )
    turns.sort(key=lambda t: t.interaction_id)
    return Window(user_id="stub-user", turns=tuple(turns))


def extraction_json(result: ExtractionResult) -> dict[str, Any]:
    """An ExtractionResult in the prompt's JSON contract (source turn ids are already `T{n}` labels)."""
    return {
        "profiles": [
            {"content": p.content, "time_to_live": p.time_to_live, "evidence": p.source_turn_ids}
            for p in result.profiles
        ],
        "playbooks": [
            {
                "rationale": p.rationale,
                "trigger": p.trigger,
                "content": p.content,
                "kind": p.kind,
                "blocking_issue": (
                    {"kind": p.blocking_issue_kind, "details": p.blocking_issue_details or ""}
                    if p.blocking_issue_kind
                    else None
                ),
                "evidence": p.source_turn_ids,
            }
            for p in result.playbooks
        ],
        "forget": [{"target": f.target, "evidence": f.source_turn_ids} for f in result.forget],
    }


@dataclass(frozen=True)
class DedupItem:
    """One `[NEW-i]` / `[EXISTING-j]` line of a deduplication prompt."""

    label: str
    time: str  # as rendered (`YYYY-MM-DD HH:MM UTC`): sorts chronologically as text
    text: str

    @property
    def is_new(self) -> bool:
        return self.label.startswith("NEW-")


def dedup_items_from_prompt(prompt: str) -> list[DedupItem]:
    """The NEW and EXISTING items of a rendered deduplication prompt, in prompt order."""
    return [
        DedupItem(f"{m.group(1)}-{m.group(2)}", m.group(3), m.group(4))
        for line in prompt.split("\n")
        if (m := _DEDUP_LINE_RE.match(line))
    ]


def is_dedup_prompt(prompt: str) -> bool:
    """A deduplication prompt lists `[NEW-i] (time) text` lines; extraction transcripts never do."""
    return any(item.is_new for item in dedup_items_from_prompt(prompt))


def _norm(text: str) -> str:
    return content_key(text)  # the identity key: words of every script, so two non-Latin texts never look equal


def _jaccard(a: str, b: str) -> float:
    wa, wb = set(_norm(a).split()), set(_norm(b).split())
    return len(wa & wb) / len(wa | wb) if wa | wb else 1.0


def _sortable(time: str) -> str:
    return time if time[:1].isdigit() else ""  # "unknown time" sorts oldest


def _related(a: DedupItem, b: DedupItem, playbooks: bool) -> bool:
    if _norm(a.text) == _norm(b.text):
        return True
    if playbooks:
        return _jaccard(a.text, b.text) >= PLAYBOOK_JACCARD
    slot = profile_slot(a.text)
    return slot is not None and slot == profile_slot(b.text)


def dedup_reply(prompt: str) -> dict[str, Any]:
    """The judge's answer for a rendered deduplication prompt, by a deterministic rule mirroring the offline judge:
    same normalised text, or (profiles) the same `profile_slot`, or (playbooks) word Jaccard >= 0.8 joins two items;
    EXISTING–EXISTING pairs are never joined directly; merged_content is the newest member's text (at equal times
    NEW before EXISTING, then the higher index)."""
    items = dedup_items_from_prompt(prompt)
    kind = _ITEM_KIND_RE.search(prompt)
    playbooks = bool(kind and "playbook" in kind.group(1).casefold())
    parent = list(range(len(items)))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a in range(len(items)):
        for b in range(a + 1, len(items)):
            if (items[a].is_new or items[b].is_new) and _related(items[a], items[b], playbooks):
                parent[find(b)] = find(a)
    members: dict[int, list[DedupItem]] = {}
    for i, item in enumerate(items):
        members.setdefault(find(i), []).append(item)
    groups = []
    grouped: set[str] = set()
    for group in members.values():
        if len(group) < 2 or not any(item.is_new for item in group):
            continue
        newest = max(group, key=lambda item: (_sortable(item.time), item.is_new, int(item.label.split("-")[1])))
        groups.append(
            {
                "item_ids": [item.label for item in group],
                "merged_content": newest.text,
                "reasoning": "stub: same statement" if len({_norm(i.text) for i in group}) == 1 else "stub: newer wins",
            }
        )
        grouped.update(item.label for item in group)
    unique = [item.label for item in items if item.is_new and item.label not in grouped]
    return {"duplicate_groups": groups, "unique_ids": unique}


def user_text(body: dict[str, Any]) -> str:
    """The text of the request's last user message (content blocks joined by newlines): where every prompt's
    transcript or items are."""
    user = next((m.get("content", "") for m in reversed(body.get("messages", [])) if m.get("role") == "user"), "")
    if isinstance(user, list):  # content blocks
        user = "\n".join(block.get("text", "") for block in user if isinstance(block, dict))
    return user


_MEMBER_RE = re.compile(r"^\[M\d+\] (.*)$")


def is_aggregation_prompt(prompt: str) -> bool:
    """Aggregation prompts list cluster members as `[M1] trigger: … | content: …` lines."""
    return "Members (one per user playbook):" in prompt


def aggregation_reply(prompt: str) -> dict[str, Any]:
    """A deterministic stand-in for consolidation: the member with the shortest content becomes the rule, unless an
    approved rule already states that content (then `null`, the dedup gate)."""
    members = []
    for line in prompt.splitlines():
        if match := _MEMBER_RE.match(line):
            fields = dict(part.split(": ", 1) for part in match.group(1).split(" | ") if ": " in part)
            members.append(fields)
    approved = prompt.split("Approved rules:", 1)[1] if "Approved rules:" in prompt else ""
    chosen = min(members, key=lambda f: (len(f.get("content", "")), f.get("content", "")))
    if _norm(chosen.get("content", "")) and _norm(chosen["content"]) in _norm(approved):
        return {"playbook": None}
    return {
        "playbook": {
            "trigger": chosen.get("trigger"),
            "content": chosen.get("content"),
            "rationale": f"Taught by {len(members)} users.",
            "blocking_issue": None,
        }
    }


_EVALUATION_MARKER = "Session to evaluate:"
_ANSWER_RE = re.compile(r"^(User question|Answer A|Answer B): ?(.*)$")


def is_session_evaluation_prompt(prompt: str) -> bool:
    """Session-evaluation prompts put the transcript under a `Session to evaluate:` line (turn text is always
    indented or label-prefixed, so no transcript can forge that line)."""
    return any(line.strip() == _EVALUATION_MARKER for line in prompt.split("\n"))


def is_shadow_comparison_prompt(prompt: str) -> bool:
    """Shadow-comparison prompts have `Answer A: …` and `Answer B: …` lines."""
    heads = {m.group(1) for line in prompt.split("\n") if (m := _ANSWER_RE.match(line))}
    return {"Answer A", "Answer B"} <= heads


def session_evaluation_reply(prompt: str) -> dict[str, Any]:
    """The heuristic judge's verdict (`judge.heuristic_verdict`) over the transcript parsed back from the prompt."""
    window = window_from_prompt(prompt)
    session_id = (window.turns[0].session_id if window.turns else None) or "session"
    session = Session(
        session_id=session_id, user_id=window.user_id, agent_version="", turns=window.turns, started_at=0, last_at=0
    )
    verdict = heuristic_verdict(session)
    return {
        "is_success": verdict.is_success,
        "failure_type": verdict.failure_type,
        "failure_reason": verdict.failure_reason,
        "is_escalated": verdict.is_escalated,
    }


def shadow_comparison_reply(prompt: str) -> dict[str, Any]:
    """`judge.compare_answers` over the question and the two answers parsed back: the answer covering more of the
    question's content words wins. Symmetric, so the verdict names the same answer whichever one is A."""
    parts = {match.group(1): text for match, text in _blocks(prompt.split("\n"), _ANSWER_RE)}
    question = parts.get("User question", "")
    question = "" if question.strip() == NO_QUESTION else question
    winner, significant, reason = compare_answers(question, parts.get("Answer A", ""), parts.get("Answer B", ""))
    return {
        "better": "tie" if winner is None else "AB"[winner],
        "significantly": significant,
        "reason": f"stub {reason}",
    }


def fake_llm_reply(body: dict[str, Any]) -> str:
    """For a session-evaluation or shadow-comparison prompt, the stub judge's verdict (`session_evaluation_reply`,
    `shadow_comparison_reply`); for a deduplication prompt, the stub judge's groups (`dedup_reply`); for an
    aggregation prompt, a consolidated rule (`aggregation_reply`); otherwise the extraction JSON the builtin rules
    produce for the transcript in the request's user message."""
    user = user_text(body)
    if is_session_evaluation_prompt(user):
        return json.dumps(session_evaluation_reply(user), ensure_ascii=False, indent=1)
    if is_shadow_comparison_prompt(user):
        return json.dumps(shadow_comparison_reply(user), ensure_ascii=False, indent=1)
    if is_dedup_prompt(user):
        return json.dumps(dedup_reply(user), ensure_ascii=False, indent=1)
    if is_aggregation_prompt(user):
        return json.dumps(aggregation_reply(user), ensure_ascii=False, indent=1)
    window = window_from_prompt(user)
    result = RuleExtractor().extract(window) if window.turns else ExtractionResult()
    return json.dumps(extraction_json(result), ensure_ascii=False, indent=1)


def _decorate(text: str, behaviour: StubBehaviour) -> str:
    if behaviour.trailing_comma and text.rstrip().endswith("}"):
        stripped = text.rstrip()
        text = stripped[:-1].rstrip() + ",\n}"
    return f"```json\n{text}\n```" if behaviour.fence else text


def stub_tokens(text: str) -> int:
    """Tokens as the stub's `usage` counts them: the usual ~4 characters per token, at least 1."""
    return max(1, len(text) // 4)


def request_tokens(body: dict[str, Any]) -> int:
    """The prompt tokens the stub reports for a chat request: `stub_tokens` of all its messages' contents."""
    return stub_tokens("".join(str(m.get("content", "")) for m in body.get("messages", [])))


def make_openai_stub(behaviour: StubBehaviour | None = None) -> FastAPI:
    """The stub app. `app.state.requests` holds `{"body", "authorization"}` per chat call; `app.state.calls` the
    number of chat calls so far; `app.state.in_flight` / `app.state.max_in_flight` the calls being answered now and
    the most at once; `app.state.faults` `(call, kind)` per injected fault; `app.state.behaviour` may be
    replaced between calls."""
    app = FastAPI()
    app.state.behaviour = behaviour or StubBehaviour()
    app.state.requests = []
    app.state.calls = 0
    app.state.faults = []
    app.state.in_flight = 0  # chat calls being answered right now
    app.state.max_in_flight = 0  # the most ever answered at once (what a client's concurrency reaches)
    seen: dict[str, int] = {}

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": "stub", "object": "model", "owned_by": "tests"}]}

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> JSONResponse:
        app.state.in_flight += 1  # one event loop: no lock needed
        app.state.max_in_flight = max(app.state.max_in_flight, app.state.in_flight)
        try:
            return await answer(request)
        finally:
            app.state.in_flight -= 1

    async def answer(request: Request) -> JSONResponse:
        body: dict[str, Any] = await request.json()
        app.state.requests.append({"body": body, "authorization": request.headers.get("authorization")})
        app.state.calls += 1
        call = app.state.calls
        current: StubBehaviour = app.state.behaviour
        if current.delay_s:
            await asyncio.sleep(current.delay_s)
        fault = None
        if current.faults is not None:
            key = json.dumps(body, sort_keys=True)
            seen[key] = seen.get(key, 0) + 1
            fault = current.faults.draw(body, seen[key])
            if fault is not None:
                app.state.faults.append((call, fault))
        if fault == "timeout":
            await asyncio.sleep(current.faults.timeout_sleep_s)  # the client has given up by now
        elif fault == "rate_limit":
            return JSONResponse(
                {"error": {"message": "stub rate limit", "type": "rate_limit_error", "code": "rate_limit_exceeded"}},
                status_code=429,
                headers={"Retry-After": f"{current.faults.retry_after_s:g}"},
            )
        elif fault == "server_error":
            return JSONResponse(
                {"error": {"message": "stub overloaded", "type": "server_error", "code": None}}, status_code=500
            )
        if call <= current.error_first:
            return JSONResponse(
                {"error": {"message": f"stub failure {call}", "type": "server_error", "code": None}},
                status_code=current.error_status,
            )
        if call <= current.garbage_first or fault == "malformed_json":
            content = GARBAGE_REPLY
        elif fault == "schema_violation":
            content = json.dumps(SCHEMA_VIOLATING_REPLY)
        elif current.responder is not None:
            content = current.responder(body)
        else:
            content = _decorate(fake_llm_reply(body), current)
        usage = {"prompt_tokens": request_tokens(body), "completion_tokens": stub_tokens(content)}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        return JSONResponse(
            {
                "id": f"chatcmpl-stub-{call}",
                "object": "chat.completion",
                "created": 1_767_225_600,
                "model": body.get("model", "stub"),
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
                ],
                "usage": usage,
            }
        )

    return app
