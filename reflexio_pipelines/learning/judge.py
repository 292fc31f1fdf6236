"""The session-evaluation contract (`Judge`, `Verdict`, `ShadowVerdict`) and the OFFLINE HEURISTIC judge.

A judge answers two questions about a closed session:

- `evaluate`: did the agent succeed (final outcome), why not (`failure_type` ∈ FAILURE_TYPES), was it escalated?
  Only the regular agent's turns are judged — `shadow_content` is never part of it (the original evaluated the
  shadow version half the time and stored the result as the regular agent's).
- `compare`: for one turn carrying `shadow_content`, which answer is better, regular or shadow? The verdict is
  always expressed from the regular agent's side (`regular_is_better`, …, `tied`); the order a judge saw the two
  answers in is recorded as `presented_first` and decided by `presentation_order` (deterministic per pair).

`HeuristicJudge` is a RULE-BASED HEURISTIC, not a model: it reads surface patterns (thanks, corrections,
frustration and escalation phrases, tool errors, word overlap). Its rows are labelled judge="heuristic",
model="builtin", prompt_version="heuristic-v1" so they are never mistaken for an LLM's judgement. The LLM judge is
`llm_judge.LiteLLMJudge`.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, Protocol

# `APPROVAL_RE` / `LEAD_IN_RE` are the built-in rules' (private) "the user approved the result" rule, reused so the
# recipe extractor and this judge read approval the same way.
from reflexio_pipelines.learning.rules.facts import LEAD_IN_RE
from reflexio_pipelines.learning.rules.success_recipes import APPROVAL_RE
from reflexio_pipelines.learning.rules.text import content_tokens
from reflexio_pipelines.learning.rules.tool_failures import blocking_issue_kind
from reflexio_pipelines.learning.sessions import Session, corrections_in
from reflexio_pipelines.learning.transcript import preceding_index
from reflexio_pipelines.learning.types import Turn

FAILURE_TYPES = ("missing_tool", "wrong_tool", "insufficient_info_from_tool", "wrong_answer")
REGULAR_VS_SHADOW = (
    "regular_is_better",
    "regular_is_slightly_better",
    "shadow_is_better",
    "shadow_is_slightly_better",
    "tied",
)
Side = Literal["regular", "shadow"]

HEURISTIC_JUDGE = "heuristic"
HEURISTIC_MODEL = "builtin"
HEURISTIC_VERSION = "heuristic-v1"

#: Corrections (see sessions.corrections_in) from which an unapproved session counts as a wrong answer.
REPEATED_CORRECTIONS = 2
#: Difference in covered request words from which a heuristic shadow win counts as significant.
SIGNIFICANT_WORD_GAP = 2


@dataclass(frozen=True)
class Verdict:
    """The judgement of one session: success, failure classification (None on success), escalation."""

    is_success: bool
    failure_type: str | None
    failure_reason: str | None
    is_escalated: bool


@dataclass(frozen=True)
class ShadowVerdict:
    """The head-to-head of one turn's regular and shadow answers, from the regular agent's side."""

    turn_id: str
    presented_first: Side
    regular_vs_shadow: str
    reason: str = ""


class Judge(Protocol):
    """What the evaluation asset calls. Costs are (llm calls, prompt tokens, completion tokens); a judge that cannot
    reach a verdict raises (see llm_judge.JudgeFailed) rather than guessing, so the session is retried next run."""

    name: str  # the `judge` column: heuristic | litellm
    model: str
    prompt_version: str

    def evaluate(self, session: Session, success_definition: str = "") -> tuple[Verdict, int, int, int]: ...

    def compare(self, session: Session, turn: Turn, rng_seed: int | str = 0) -> tuple[ShadowVerdict, int, int, int]: ...


# ---------------------------------------------------------------------------------------------------------------
# Shared by every judge
# ---------------------------------------------------------------------------------------------------------------


def presentation_order(session_id: str, turn_id: str, rng_seed: int | str = 0) -> tuple[Side, Side]:
    """Which answer a judge sees first ("A") and second ("B"): random per pair to cancel position bias, but seeded
    with sha256(rng_seed, session id, turn id), so re-judging a pair shows it the same way."""
    seed = int.from_bytes(hashlib.sha256(f"{rng_seed}\x1f{session_id}\x1f{turn_id}".encode()).digest()[:8], "big")
    return ("regular", "shadow") if random.Random(seed).random() < 0.5 else ("shadow", "regular")


def side_verdict(winner: Side | None, significant: bool) -> str:
    """`tied` for no winner, else `<winner>_is_better` / `<winner>_is_slightly_better`."""
    if winner is None:
        return "tied"
    return f"{winner}_is_better" if significant else f"{winner}_is_slightly_better"


def question_for(session: Session, turn: Turn) -> str:
    """The user message a turn answers: the nearest earlier user turn of the session ("" when there is none)."""
    index = next((i for i, t in enumerate(session.turns) if t.turn_id == turn.turn_id), None)
    if index is None:
        raise ValueError(f"turn {turn.turn_id!r} is not part of session {session.session_id!r}")
    found = preceding_index(session.turns, index, user=True)
    return session.turns[found].content if found is not None else ""


def require_shadow(session: Session, turn: Turn) -> None:
    if not turn.shadow_content.strip():
        raise ValueError(f"turn {turn.turn_id!r} of session {session.session_id!r} has no shadow_content to compare")


def session_verdict_from_pairs(verdicts: Iterable[ShadowVerdict | str]) -> str | None:
    """The session-level `regular_vs_shadow` over its pairs; None when it had none.

    Wins are counted per side (significant or not); equal counts → `tied`. The side with more wins is
    `*_is_better` when it won a strict majority of ALL pairs (ties included) and at least half of its wins were
    significant, else `*_is_slightly_better`.
    """
    labels = [v.regular_vs_shadow if isinstance(v, ShadowVerdict) else v for v in verdicts]
    unknown = sorted(set(labels) - set(REGULAR_VS_SHADOW))
    if unknown:
        raise ValueError(f"unknown regular_vs_shadow value(s): {unknown}")
    if not labels:
        return None
    wins = {side: [label for label in labels if label.startswith(side)] for side in ("regular", "shadow")}
    if len(wins["regular"]) == len(wins["shadow"]):
        return "tied"
    winner: Side = "regular" if len(wins["regular"]) > len(wins["shadow"]) else "shadow"
    won = wins[winner]
    strong = sum(label == f"{winner}_is_better" for label in won)
    return side_verdict(winner, len(won) > len(labels) / 2 and strong * 2 >= len(won))


# ---------------------------------------------------------------------------------------------------------------
# The heuristic rules
# ---------------------------------------------------------------------------------------------------------------

# Approval anywhere in a turn ("That fixed it, thanks!"); builtin's APPROVAL_RE covers turns that open with it.
_THANKS_RE = re.compile(
    r"\b(?:thanks|thank you|thx|cheers|much appreciated|appreciate it|problem solved|all set|"
    r"(?:that|this|it) (?:worked|works now|did it|did the trick|fixed it|solved it)|works now|works perfectly)\b",
    re.I,
)
_NOT_THANKS_RE = re.compile(r"\bno,? thanks?\b|\bthanks? for nothing\b|\bthanks?,? but\b|\bthank you,? but\b", re.I)
_FRUSTRATION_RE = re.compile(
    r"\b(?:this|that|it)(?:'s| is) (?:still )?(?:wrong|incorrect|not (?:right|working|what i asked))\b|"
    r"\buseless\b|\bnot helpful\b|\bunhelpful\b|\bwaste of (?:my )?time\b|\bgive up\b|\bgiving up\b|"
    r"\bstill (?:not|doesn't|does not|isn't|is not|won't|broken|failing|wrong|the same)\b|"
    r"\byou keep\b|\byou(?:'re| are) not (?:listening|helping)\b|\bnothing works\b|\bdoesn't help\b",
    re.I,
)
_ESCALATION_RE = re.compile(
    r"\b(?:talk|speak|chat) (?:to|with) (?:a |an |the |your |some )?(?:real |actual |live )?"
    r"(?:human|person|people|manager|supervisor|agent|representative|someone)\b|"
    r"\b(?:human|live|real) (?:agent|person|support)\b|\bescalat(?:e|ed|es|ing|ion)\b|\bsupport ticket\b|"
    r"\btransfer(?:ring)? (?:me|you)\b|\b(?:get|want|need|call|fetch) (?:a|your|the) (?:manager|supervisor)\b|"
    r"\byour manager\b",
    re.I,
)


def _approves(text: str) -> bool:
    text = text.strip()
    if _NOT_THANKS_RE.search(text) or _FRUSTRATION_RE.search(text):
        return False
    return bool(APPROVAL_RE.match(LEAD_IN_RE.sub("", text)) or _THANKS_RE.search(text))


def _missing_tool_error(session: Session) -> str | None:
    """The first tool error that says the tool (or what it needs) does not exist, else None."""
    for turn in session.turns:
        for call in turn.tools_used:
            error = call.error
            if error is not None and blocking_issue_kind(error) == "missing_tool":
                return f"{call.tool_name}: {' '.join(error.split())[:160]}"
    return None


def heuristic_verdict(session: Session) -> Verdict:
    """The rules (HEURISTIC, see the module docstring):

    - success: the last user turn approves (thanks, "perfect", "that works", …) and is not frustrated;
    - otherwise failure, typed `missing_tool` when a tool call failed with a not-found / unknown-tool error,
      else `wrong_answer` when the user corrected the agent ≥ REPEATED_CORRECTIONS times or the last frustrated
      user turn comes after the last approving one, else untyped (no explicit signal: the user never approved);
    - escalated: escalation phrases in any user or agent turn ("talk to a human", "escalate", "support ticket",
      "transfer me", "your manager", …).
    """
    user_texts = [t.content for t in session.turns if t.is_user]
    escalated = any(_ESCALATION_RE.search(t.content) for t in session.turns)
    approved_at = max((i for i, text in enumerate(user_texts) if _approves(text)), default=-1)
    frustrated_at = max((i for i, text in enumerate(user_texts) if _FRUSTRATION_RE.search(text)), default=-1)
    if user_texts and approved_at == len(user_texts) - 1:
        return Verdict(True, None, None, escalated)
    corrections = corrections_in(session)
    if missing := _missing_tool_error(session):
        return Verdict(False, "missing_tool", f"heuristic: a tool was not found ({missing})", escalated)
    if frustrated_at > approved_at:
        reason = f"heuristic: the user ended frustrated ('{' '.join(user_texts[frustrated_at].split())[:120]}')"
        return Verdict(False, "wrong_answer", reason, escalated)
    if corrections >= REPEATED_CORRECTIONS:
        reason = f"heuristic: the user corrected the agent {corrections} times and did not approve the result"
        return Verdict(False, "wrong_answer", reason, escalated)
    return Verdict(False, None, "heuristic: the session ended without the user approving the result", escalated)


def compare_answers(question: str, first: str, second: str) -> tuple[int | None, bool, str]:
    """HEURISTIC head-to-head: the answer covering more of the question's content words wins (0 = first,
    1 = second, None = tie); significant when it covers ≥ SIGNIFICANT_WORD_GAP more. Symmetric by construction:
    swapping the answers swaps the winner and nothing else."""
    asked = set(content_tokens(question))
    scores = [len(asked & set(content_tokens(answer))) for answer in (first, second)]
    gap = abs(scores[0] - scores[1])
    reason = f"heuristic: the answers cover {scores[0]} and {scores[1]} of the request's {len(asked)} content words"
    if gap == 0:
        return None, False, reason
    return (0 if scores[0] > scores[1] else 1), gap >= SIGNIFICANT_WORD_GAP, reason


class HeuristicJudge:
    """OFFLINE HEURISTIC judge (rules, no model, no network): see `heuristic_verdict` and `compare_answers`.

    It exists so evaluation runs without an LLM and so tests have a reproducible reference; its verdicts are
    labelled judge="heuristic", model="builtin", prompt_version="heuristic-v1". The success definition is ignored.
    """

    name = HEURISTIC_JUDGE
    model = HEURISTIC_MODEL
    prompt_version = HEURISTIC_VERSION

    def evaluate(self, session: Session, success_definition: str = "") -> tuple[Verdict, int, int, int]:
        return heuristic_verdict(session), 0, 0, 0

    def compare(self, session: Session, turn: Turn, rng_seed: int | str = 0) -> tuple[ShadowVerdict, int, int, int]:
        require_shadow(session, turn)
        order = presentation_order(session.session_id, turn.turn_id, rng_seed)
        answers = {"regular": turn.content, "shadow": turn.shadow_content}
        winner, significant, reason = compare_answers(question_for(session, turn), answers[order[0]], answers[order[1]])
        verdict = side_verdict(None if winner is None else order[winner], significant)
        return ShadowVerdict(turn.turn_id, order[0], verdict, reason), 0, 0, 0
