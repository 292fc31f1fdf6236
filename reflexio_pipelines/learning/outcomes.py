"""Outcome counters per learned item and correction recurrence: did what was served help, hurt or fail?

The retrieval log (`retrieval_events`, written by `/api/search`) says which learned items were served to which
user, when, and — when the caller names it — in which session. Here every serve is joined with what happened next
in that session, and each (session, served item) gets one outcome:

- `harmful`: a later user correction CONTRADICTS the item (it says the opposite of what the item told the agent);
- `missed`: the same correction came again (the item was served and the agent still made the mistake it is about),
  or a tool the item is about failed again;
- `helpful`: neither, and the session was judged successful, or the item's trigger came up with no correction
  about the item;
- no outcome otherwise (the item was served, nothing tells either way).

THE MATCHING RULES ARE A HEURISTIC over surface wording, not understanding (`RULES_VERSION` labels every row they
produce): corrections are the built-in extractor's correction rule (`sessions.corrections_in`); "contradicts" means
more than half of a clause the item negates is asserted by the correction, or the other way round (relative to the
shorter side, a non-verb among the shared words), or the correction states a different value for a profile's
single-valued attribute ("Lives in Berlin" vs "No, I live in Munich"); "the same correction" means the correction
and the item share more than half of the shorter one's content words, one of them not a verb; "the trigger came up"
means a later user turn holds at least half of the trigger's content words. An LLM judge of these
relations would be better and can replace `relate` behind the same contract.

Correction recurrence — the number self-improvement must drive to zero — is the share of a session's corrections
that repeat (the "same correction" rule) an item already learned and served to the same user before the correction
(for agent playbooks: served to the same agent version). Only treated users are served anything, so it is computed
over their sessions; `repeated_learned` counts repeats of learned items whether served or not, for both arms.

A serve belongs to the session the caller named (`session_id` in the search), else to the user's session holding
the first turn at or after the serve (client `created_at`, which is receipt time when a client sends none) —
another heuristic, documented as such.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from functools import lru_cache

from reflexio_pipelines.learning.config import HoldoutSettings, OutcomeSettings
from reflexio_pipelines.learning.dedup import profile_slot
from reflexio_pipelines.learning.holdout import CONTROL, arm_of
from reflexio_pipelines.learning.impact import day_of
from reflexio_pipelines.learning.outcome_types import (
    HARMFUL,
    HELPFUL,
    MAX_EVIDENCE,
    MISSED,
    Counters,
    FlagAction,
    ItemRef,
    LearnedItem,
    OutcomeEvent,
    OutcomeResult,
    RetrievalEvent,
    SessionOutcome,
)
from reflexio_pipelines.learning.rules.corrections import correction_rule
from reflexio_pipelines.learning.rules.profiles import facts_stated
from reflexio_pipelines.learning.rules.text import content_tokens, stem
from reflexio_pipelines.learning.rules.triggers import IMPERATIVE_VERBS
from reflexio_pipelines.learning.sessions import Session, corrected_turn_indexes

#: Share of the shorter text's content words a correction and an item must share (strictly more) for "the same
#: correction again".
REPEAT_COVERAGE = 0.5
#: Share of a negated clause's words the other text must assert for "contradicts" (strictly more than this).
CONFLICT_COVERAGE = 0.5
#: Share of a trigger's content words a later user turn must hold for "the trigger came up".
TRIGGER_COVERAGE = 0.5


def _fold(token: str) -> str:
    """A further crude fold on top of builtin's stem, so "lives" (stemmed "liv") and "live" compare equal."""
    return token[:-1] if token.isalpha() and token.endswith("e") and len(token) > 3 else token


# Words that carry the polarity or the form of a rule, not its subject (compared after stemming).
_MARKERS = frozenset(
    _fold(stem(w))
    for w in "never always don dont instead rather stop avoid use using only again when "
    "asked giving answer like calling call tool sure time".split()
)
_VERBS = frozenset(_fold(stem(w)) for w in IMPERATIVE_VERBS)
_NEGATION_RE = re.compile(
    r"\b(?:never|don't|dont|do not|does not|doesn't|did not|didn't|not|no|avoid|stop|instead of|rather than|"
    r"without)\b",
    re.I,
)
_CLAUSE_RE = re.compile(r"[.;!?,:]|\s[-\u2013\u2014]+\s|\bbut\b", re.I)


# ---------------------------------------------------------------------------------------------------------------
# The matching rules (HEURISTIC)
# ---------------------------------------------------------------------------------------------------------------


# Cached: an item's text is compared with every correction of its user's sessions.
@lru_cache(maxsize=65_536)
def _tokens(text: str) -> frozenset[str]:
    return frozenset(t for t in map(_fold, content_tokens(text)) if t not in _MARKERS)


@lru_cache(maxsize=65_536)
def _polarity(text: str) -> tuple[frozenset[str], tuple[frozenset[str], ...]]:
    """(asserted content words, negated spans): per clause, the words after a negation are one negated span."""
    asserted: set[str] = set()
    negated: list[frozenset[str]] = []
    for clause in _CLAUSE_RE.split(text):
        match = _NEGATION_RE.search(clause)
        if match is None:
            asserted |= _tokens(clause)
            continue
        asserted |= _tokens(clause[: match.start()])
        span = _tokens(clause[match.end() :])
        if span:
            negated.append(span)
    return frozenset(asserted), tuple(negated)


def _conflicts(spans: tuple[frozenset[str], ...], asserted: frozenset[str]) -> bool:
    """A negated span mostly asserted by the other text (relative to the shorter of the two), sharing a non-verb."""
    return any(
        asserted
        and (span & asserted) - _VERBS
        and len(span & asserted) / min(len(span), len(asserted)) > CONFLICT_COVERAGE
        for span in spans
    )


def relate(item: LearnedItem, correction: str) -> str | None:
    """HEURISTIC: how a user's correction relates to a learned item: `contradicts`, `repeats` (the same correction
    again) or None (unrelated). See the module docstring for the rules."""
    rule = correction_rule(correction) or correction
    if item.ref.entity == "profile":
        slot = profile_slot(item.content)
        for fact in facts_stated(correction):
            if slot is not None and profile_slot(fact) == slot and _tokens(fact) != _tokens(item.content):
                return "contradicts"
    item_asserted, item_negated = _polarity(item.content)
    rule_asserted, rule_negated = _polarity(rule)
    if _conflicts(item_negated, rule_asserted) or _conflicts(rule_negated, item_asserted):
        return "contradicts"
    said, known = _tokens(rule), _tokens(item.content)
    shared = said & known
    if said and known and len(shared) / min(len(said), len(known)) > REPEAT_COVERAGE and shared - _VERBS:
        return "repeats"
    return None


def mentions_tool(item: LearnedItem, tool_name: str) -> bool:
    """Whether the item is about a tool: its name appears as a whole word in the item's content or trigger."""
    name = tool_name.strip()
    if not name:
        return False
    pattern = re.compile(rf"(?<![\w-]){re.escape(name)}(?![\w-])", re.I)
    return bool(pattern.search(item.content) or pattern.search(item.trigger))


def trigger_met(item: LearnedItem, user_texts: Iterable[str]) -> bool:
    """HEURISTIC: a user turn holds at least TRIGGER_COVERAGE of the trigger's content words."""
    wanted = _tokens(item.trigger)
    return bool(wanted) and any(len(wanted & _tokens(text)) / len(wanted) >= TRIGGER_COVERAGE for text in user_texts)


def classify(item: LearnedItem, session: Session, start: int, succeeded: bool | None) -> tuple[str | None, str]:
    """The outcome of `item`, served before turn `start` of `session` (HEURISTIC rules; precedence harmful >
    missed > helpful). `succeeded` is the session's judged success (None when no evaluator judged it)."""
    later = range(start, len(session.turns))
    corrections = [i for i in corrected_turn_indexes(session) if i >= start]
    relations = [(i, relate(item, session.turns[i].content)) for i in corrections]
    contradicted = [i for i, r in relations if r == "contradicts"]
    if contradicted:
        return HARMFUL, f"heuristic: a correction contradicts the item (turn {session.turns[contradicted[0]].turn_id})"
    repeated = [i for i, r in relations if r == "repeats"]
    if repeated:
        return MISSED, f"heuristic: the same correction came again (turn {session.turns[repeated[0]].turn_id})"
    for i in later:
        for call in session.turns[i].tools_used:
            if call.error is not None and mentions_tool(item, call.tool_name):
                return (
                    MISSED,
                    f"heuristic: {call.tool_name}, which the item is about, failed again (turn "
                    f"{session.turns[i].turn_id})",
                )
    if succeeded:
        return HELPFUL, "heuristic: served in a session the evaluation judged successful"
    if trigger_met(item, (session.turns[i].content for i in later if session.turns[i].is_user)):
        return HELPFUL, "heuristic: the item's trigger came up and no correction about it followed"
    return None, "heuristic: no signal after the serve"


# ---------------------------------------------------------------------------------------------------------------
# Joining serves with sessions
# ---------------------------------------------------------------------------------------------------------------


SessionKey = tuple[str, str]  # (user id, session id)


def _first_after(session: Session, served_at_s: int) -> int | None:
    """The first turn at or after the serve, in whole seconds (`created_at` has no finer grain, so a turn of the
    same second counts as after: agents search before they answer)."""
    return next((i for i, t in enumerate(session.turns) if t.created_at >= served_at_s), None)


def attribute(
    events: Iterable[RetrievalEvent], sessions: Iterable[Session]
) -> dict[SessionKey, list[tuple[RetrievalEvent, int]]]:
    """Serves per session with the index of the first turn after each (HEURISTIC where the caller named no
    session: the user's session holding the first turn at or after the serve). Serves with nothing after them in
    their session, or no session yet, are left out."""
    by_user: dict[str, list[Session]] = defaultdict(list)
    for known in sessions:
        by_user[known.user_id].append(known)
    named = {(s.user_id, s.session_id): s for s in (x for group in by_user.values() for x in group)}
    out: dict[SessionKey, list[tuple[RetrievalEvent, int]]] = defaultdict(list)
    for event in events:
        served_at = event.served_at_us // 1_000_000
        if event.session_id:
            session = named.get((event.user_id, event.session_id))
            index = _first_after(session, served_at) if session is not None else None
        else:
            candidates = [
                (s.turns[i].created_at, s.session_id, i, s)
                for s in by_user.get(event.user_id, [])
                if (i := _first_after(s, served_at)) is not None
            ]
            _, _, index, session = min(candidates, key=lambda c: (c[0], c[1]), default=(0, "", None, None))
        if session is not None and index is not None:
            out[(session.user_id, session.session_id)].append((event, index))
    return out


def evaluate(
    closed: list[Session],
    all_sessions: list[Session],
    events: list[RetrievalEvent],
    items: Mapping[ItemRef, LearnedItem],
    judged: Mapping[SessionKey, bool],
    holdout: HoldoutSettings,
) -> OutcomeResult:
    """Outcomes of every (closed session, served item), the counters per item and the per-session signals.

    `all_sessions` (open ones included) decide where a serve belongs, so a serve is never credited to an older,
    closed session while the session it belongs to is still open; only closed sessions get outcomes. `judged` maps
    a session to its evaluated success (sessions no evaluator sampled are absent)."""
    counters: dict[ItemRef, Counters] = {}

    def counter(ref: ItemRef) -> Counters | None:
        item = items.get(ref)
        if item is None:
            return None  # served once, since deleted or erased: nothing to count it on
        return counters.setdefault(ref, Counters(ref, item.owner, item.agent_version))

    for event in events:
        for ref in event.items:
            if (c := counter(ref)) is not None:
                c.served += 1
    placed = attribute(events, all_sessions)
    first_served_to: dict[tuple[ItemRef, str], int] = {}
    first_served_version: dict[tuple[ItemRef, str], int] = {}
    for event in events:
        for ref in event.items:
            at = event.served_at_us // 1_000_000
            user_key = (ref, event.user_id)
            first_served_to[user_key] = min(first_served_to.get(user_key, at), at)
            item = items.get(ref)
            if item is not None:
                vkey = (ref, item.agent_version)
                first_served_version[vkey] = min(first_served_version.get(vkey, at), at)
    own_items: dict[str, list[LearnedItem]] = defaultdict(list)
    version_items: dict[str, list[LearnedItem]] = defaultdict(list)
    for item in items.values():
        if item.owner is not None:
            own_items[item.owner].append(item)
        else:
            version_items[item.agent_version].append(item)

    session_rows: list[SessionOutcome] = []
    outcome_rows: list[OutcomeEvent] = []
    for session in closed:
        key = (session.user_id, session.session_id)
        serves = placed.get(key, [])
        succeeded = judged.get(key)
        first: dict[ItemRef, tuple[RetrievalEvent, int]] = {}
        for event, index in sorted(serves, key=lambda s: s[0].served_at_us):
            for ref in event.items:
                first.setdefault(ref, (event, index))
        for ref, (event, index) in sorted(first.items(), key=lambda kv: (kv[0].entity, kv[0].item_id)):
            c = counter(ref)
            if c is None:
                continue
            c.sessions += 1
            outcome, reason = classify(items[ref], session, index, succeeded)
            if outcome is not None:
                c.evidence[outcome].append(key)
            outcome_rows.append(
                OutcomeEvent(
                    ref,
                    session.user_id,
                    session.session_id,
                    session.agent_version,
                    outcome,
                    reason,
                    event.served_at_us,
                    index,
                    day_of(session.last_at),
                )
            )
        arm = serves[0][0].arm if serves else arm_of(holdout, session.agent_version, session.user_id)
        recurring, repeated = _recurrence(
            session,
            own_items[session.user_id] + version_items[session.agent_version],
            first_served_to,
            first_served_version,
            treated=arm != CONTROL,
        )
        session_rows.append(
            SessionOutcome(
                session_id=session.session_id,
                user_id=session.user_id,
                agent_version=session.agent_version,
                arm=arm,
                override=any(e.override for e, _ in serves),
                searches=len(serves),
                items_served=len(first),
                first_search_at=min(e.served_at_us for e, _ in serves) // 1_000_000 if serves else None,
                corrections=len(corrected_turn_indexes(session)),
                recurring_corrections=recurring,
                repeated_learned_corrections=repeated,
                tool_failures=sum(call.error is not None for t in session.turns for call in t.tools_used),
                user_turns=sum(t.is_user for t in session.turns),
                started_at=session.started_at,
                closed_at=session.last_at,
                day=day_of(session.last_at),
            )
        )
    return OutcomeResult(session_rows, outcome_rows, counters)


def _recurrence(
    session: Session,
    candidates: list[LearnedItem],
    served_to: Mapping[tuple[ItemRef, str], int],
    served_version: Mapping[tuple[ItemRef, str], int],
    treated: bool,
) -> tuple[int, int]:
    """(corrections repeating an item learned and served before them, corrections repeating an item learned before
    them, served or not) in one session. Only items learned from earlier sessions count: what this session itself
    taught (its correction, or the tool failure right before it) is not a lesson the agent already had."""
    recurring = repeated = 0
    own_turns = {t.turn_id for t in session.turns}
    earlier = [item for item in candidates if not item.source_turn_ids & own_turns]
    for index in corrected_turn_indexes(session):
        turn = session.turns[index]
        learned = [item for item in earlier if item.learned_at <= turn.created_at]
        repeats = [item for item in learned if relate(item, turn.content) == "repeats"]
        if not repeats:
            continue
        repeated += 1

        def served_before(item: LearnedItem, corrected_at: int = turn.created_at) -> bool:
            if item.owner is not None:
                at = served_to.get((item.ref, session.user_id))
            else:
                at = served_version.get((item.ref, session.agent_version))
            return at is not None and at <= corrected_at

        recurring += treated and any(served_before(item) for item in repeats)
    return recurring, repeated


# ---------------------------------------------------------------------------------------------------------------
# Flags
# ---------------------------------------------------------------------------------------------------------------


def flag_state(c: Counters, settings: OutcomeSettings, harmful_when_kept: int | None) -> str:
    """`held_out` / `flagged` when harmful outcomes exceed helpful ones after `min_outcomes` outcomes (and, if a
    reviewer kept the item, there has been new harmful evidence since), else `clear`."""
    harmful = c.count(HARMFUL)
    if c.outcomes < settings.min_outcomes or harmful <= c.count(HELPFUL):
        return "clear"
    if harmful_when_kept is not None and harmful <= harmful_when_kept:
        return "clear"
    return "held_out" if settings.hold_out_flagged else "flagged"


def flag_actions(
    counters: Mapping[ItemRef, Counters],
    settings: OutcomeSettings,
    last_state: Mapping[ItemRef, str],
    harmful_when_kept: Mapping[ItemRef, int],
) -> list[FlagAction]:
    """The flag changes since the change log's last word on each item (`last_state`: flagged | held_out | clear)."""
    actions = []
    for ref in sorted(set(counters) | set(last_state), key=lambda r: (r.entity, r.item_id)):
        c = counters.get(ref)
        state = flag_state(c, settings, harmful_when_kept.get(ref)) if c is not None else "clear"
        before = last_state.get(ref, "clear")
        if state == before or c is None:
            continue
        if state == "clear":
            action, reason = "unflagged", f"heuristic counters: harmful {c.count(HARMFUL)}, helpful {c.count(HELPFUL)}"
        else:
            action = state
            reason = (
                f"heuristic counters: harmful {c.count(HARMFUL)} > helpful {c.count(HELPFUL)} after "
                f"{c.outcomes} outcomes (minimum {settings.min_outcomes})"
                + ("; held out of search pending review" if state == "held_out" else "")
            )
        evidence = tuple(c.evidence[HARMFUL][:MAX_EVIDENCE]) if state != "clear" else ()
        actions.append(FlagAction(ref, action, reason, c, evidence))
    return actions
