"""Supersession by a stated change: "I moved to Denver", "switched to Neovim", "from now on, short paragraphs" replace
the user's earlier items on the same subject, which the offline judge's similarity test misses (dedup.py
`changed_subjects` decides which, learning/subjects.py says what an item is about). The user's own words are read
where the extractor kept them. A revocation with no replacement ("drop the rule about bullet points") withdraws the
playbooks it names (`revoked_playbooks`), as a forget request removes profiles (learning/forget.py)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import numpy as np

from reflexio_pipelines.learning.clauses.classifier import shared_classifier
from reflexio_pipelines.learning.clauses.features import change_clauses
from reflexio_pipelines.learning.dedup import Resolution, changed_subjects
from reflexio_pipelines.learning.embedding import Embedder
from reflexio_pipelines.learning.forget import match_profiles
from reflexio_pipelines.learning.learned_rows import provenance
from reflexio_pipelines.learning.lifecycle import FORGOTTEN, REPLACED
from reflexio_pipelines.learning.rules.text import content_tokens
from reflexio_pipelines.learning.subjects import states_a_change
from reflexio_pipelines.learning.types import ExtractionResult, ForgetDirective, Turn, Window, stable_int_id
from reflexio_pipelines.learning.windows import turn_sort_key

#: How the built-in extractor opens a playbook's rationale: the user's clause follows, quoted.
SAID_PREFIX = "The user said: "
#: The built-in extractor's mark (in a profile's custom_features) on a clause that only tells of a change ("got the
#: keys to our own house yesterday!!!"): learned when it replaces an earlier item, dropped otherwise (learn.py).
UPDATE_ONLY = "update_only"
#: The built-in extractor's mark on a profile whose turn the change head read as a change (the head reads the whole
#: turn: "infra finally bumped prod to python 3.12 this sprint, so the old version constraint is gone").
TOLD_A_CHANGE = "change"


def _features(row: dict[str, Any]) -> dict[str, Any]:
    features = row.get("custom_features")
    if isinstance(features, str) and features.startswith("{"):
        parsed = json.loads(features)
        return parsed if isinstance(parsed, dict) else {}
    return features if isinstance(features, dict) else {}


def replaces_something(profile: dict[str, Any], retiring: set[Any]) -> bool:
    """Whether a new profile is learned: always, unless it only tells of a change (`UPDATE_ONLY`); then only if it
    supersedes a profile or retires a rule (`retiring`: the ids of the profiles `replace_rules` retired rules for)."""
    if not _features(profile).get(UPDATE_ONLY):
        return True
    return bool(profile.get("supersedes")) or profile["profile_id"] in retiring


def _announced(rows: list[dict[str, Any]]) -> list[float]:
    """Per row, how surely the user's words behind it tell of a change (0: they do not): words of change (sure,
    1.0), the extractor's mark of its turn (`TOLD_A_CHANGE`, the change head's probability; `True` on rows marked
    before it was kept: the head's bar), or else the change head on the words (a playbook's, an LLM extractor's row;
    the classifier's vectors are cached, so clauses it classified at extraction cost no second embedding)."""
    classifier = shared_classifier()
    bar = classifier.change_bar
    marks = [_features(r).get(TOLD_A_CHANGE) for r in rows]
    marked = [bar if m is True else float(m) if isinstance(m, (int, float)) and m >= bar else 0.0 for m in marks]
    said = [said_by_user(r) for r in rows]
    unmarked = [i for i, m in enumerate(marked) if not m]
    learned = classifier.change_probabilities([change_clauses(said[i]) for i in unmarked])
    for i, p in zip(unmarked, learned):
        marked[i] = p if p >= bar else 0.0
    return [1.0 if states_a_change(words) else m for m, words in zip(marked, said)]


def said_by_user(row: dict[str, Any]) -> str:
    """The user's own words behind a learned row, where the extractor kept them (the built-in extractor keeps the
    clause in a profile's custom_features and quotes it in a playbook's rationale); else the row's text."""
    said = _features(row).get("said")
    if isinstance(said, str):
        return said
    rationale = row.get("rationale") or ""
    if rationale.startswith(SAID_PREFIX):
        return rationale[len(SAID_PREFIX) :]
    return row.get("content") or ""


def supersede_stated_changes(
    resolution: Resolution,
    new_rows: list[dict[str, Any]],
    existing_rows: list[dict[str, Any]],
    new_vectors: np.ndarray,
    existing_vectors: np.ndarray,
    text_of: Callable[[dict[str, Any]], str],
    id_column: str,
) -> None:
    """Add to `resolution.supersedes` the existing items that kept new items replace by a stated change."""
    # a passing state ("I left my phone at home this morning": one_day) replaces no earlier item; it expires itself
    kept = [i for i in sorted(resolution.keep) if new_rows[i].get("profile_time_to_live") in (None, "infinity")]
    if not kept or not existing_rows:
        return
    ids = [str(r[id_column]) for r in existing_rows]
    taken = {ids.index(x) for group in resolution.supersedes.values() for x in group if x in ids}
    taken |= {ids.index(x) for x in resolution.duplicate_of.values() if x in ids}
    replaced = changed_subjects(
        [(resolution.keep[i], said_by_user(new_rows[i])) for i in kept],
        [text_of(r) for r in existing_rows],
        new_vectors[kept],
        existing_vectors,
        taken,
        announced=_announced([new_rows[i] for i in kept]),
    )
    for position, positions in replaced.items():
        i = kept[position]
        resolution.supersedes[i] = list(resolution.supersedes.get(i, [])) + [ids[j] for j in positions]


#: The words of revoking ("the old rule from before", "what I told you about") say which rule by the rest.
_REVOKING_WORDS_RE = re.compile(
    r"\b(?:the|that|this|those|these|my|our|old|previous|earlier|former|whole|rules?|instructions?|thing|stuff|"
    r"about|regarding|from before|before|is gone|are gone|no longer applies|anymore|i (?:gave|told) you|"
    r"i (?:said|asked for)|you|please)\b",
    re.I,
)
#: Content of a revocation's tombstone row: the withdrawn rule is not repeated in it.
REVOKED_CONTENT = "(withdrawn by the user)"
#: Content of the tombstone that retires rules a changed fact replaced.
REPLACED_CONTENT = "(replaced by a change the user stated)"
_PROVENANCE: tuple[str, ...] = (
    "source_turn_ids",
    "source_interaction_ids",
    "extraction_window_id",
    "extractor",
    "prompt_version",
)
_PROVENANCE += ("model", "run_id", "window")


def revoked_playbooks(target: str, playbooks: list[dict[str, Any]], embedder: Embedder) -> list[dict[str, Any]]:
    """The user's playbooks a revocation names ("forget the bullet points rule" -> "Use bullet points in
    summaries"): `forget.match_profiles`'s test (most of the content words, or a near paraphrase) on what is left of
    the target once the words of revoking are taken out; nothing when nothing is left ("override that rule")."""
    words = _REVOKING_WORDS_RE.sub(" ", target.replace("-", " "))  # "the every-file rule" names files
    if not playbooks or not content_tokens(words):
        return []
    texts = [" ".join(p for p in (r.get("trigger"), r["content"]) if p) for r in playbooks]
    return [playbooks[m.profile_index] for m in match_profiles(words, texts, embedder)]


def withdraw_playbooks(
    requests: list[tuple[ForgetDirective, Turn, Window, ExtractionResult, Any]],
    existing: list[dict[str, Any]],
    embedder: Embedder,
    window: str,
    run_id: str,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Apply revocations, in turn order, to the user's current playbooks: each matched playbook is superseded by a
    tombstone row (status `forgotten`, never served). Returns (tombstones, the playbooks left)."""
    tombstones: list[dict[str, Any]] = []
    left = list(existing)
    for directive, asked, win, result, _ in sorted(requests, key=lambda r: turn_sort_key(r[1])):
        matched = revoked_playbooks(directive.target, left, embedder)
        if not matched:
            continue
        ids = sorted({r["user_playbook_id"] for r in matched})
        left = [r for r in left if r["user_playbook_id"] not in ids]
        first = matched[0]
        tombstones.append(
            {
                "user_playbook_id": stable_int_id(asked.user_id, FORGOTTEN, asked.turn_id, directive.target),
                "user_id": asked.user_id,
                "agent_version": first.get("agent_version"),
                "request_id": asked.request_id,
                "playbook_name": first.get("playbook_name"),
                "created_at": asked.created_at,
                "content": REVOKED_CONTENT,
                "trigger": None,
                "rationale": None,
                "kind": first.get("kind"),
                "blocking_issue_kind": None,
                "blocking_issue_details": None,
                "status": FORGOTTEN,
                "source": asked.source,
                "supersedes": ids,
                **provenance(win, [asked], result, window, run_id),
            }
        )
    return tombstones, left


def _rule_text(row: dict[str, Any]) -> str:
    return " ".join(p for p in (row.get("trigger"), row["content"], said_by_user(row)) if p)


def replace_rules(
    new_profiles: list[dict[str, Any]], playbooks: list[dict[str, Any]], embedder: Embedder
) -> tuple[list[dict[str, Any]], set[Any]]:
    """Rules a new fact replaces because the user said it changed ("I've moved my workouts to the evenings" retires
    "Don't put anything before 8", which was said with "I work out at 6 am"; "I go by Lexi these days" retires "Call
    the user Alex"): `dedup.changed_subjects`, with a rule read together with the user's words behind it. Each
    replacing profile writes one tombstone (status `replaced`) into the playbooks superseding what it retires.
    Returns the tombstones and the ids of the profiles that retired rules. Only this direction: a new rule said "from
    now on" is too common to retire the user's facts by subject."""
    candidates = [r for r in new_profiles if r.get("status") != FORGOTTEN]
    if not candidates or not playbooks:
        return [], set()
    certainty = [(r, sure) for r, sure in zip(candidates, _announced(candidates)) if sure]
    changed = [r for r, _ in certainty]
    if not changed:
        return [], set()
    texts = [r["content"] for r in changed] + [_rule_text(r) for r in playbooks]
    vectors = embedder.embed(texts)
    replaced = changed_subjects(
        [(r["content"], said_by_user(r)) for r in changed],
        texts[len(changed) :],
        vectors[: len(changed)],
        vectors[len(changed) :],
        set(),
        announced=[sure for _, sure in certainty],
    )
    tombstones = []
    for i, positions in sorted(replaced.items()):
        profile, retired = changed[i], [playbooks[j] for j in positions]
        ids = sorted({r["user_playbook_id"] for r in retired})
        tombstones.append(
            {
                "user_playbook_id": stable_int_id(profile["user_id"], REPLACED, str(profile["profile_id"])),
                "user_id": profile["user_id"],
                "agent_version": retired[0].get("agent_version"),
                "request_id": profile.get("generated_from_request_id"),
                "playbook_name": retired[0].get("playbook_name"),
                "created_at": profile.get("last_modified_timestamp"),
                "content": REPLACED_CONTENT,
                "trigger": None,
                "rationale": f"replaced by profile {profile['profile_id']}",
                "kind": retired[0].get("kind"),
                "blocking_issue_kind": None,
                "blocking_issue_details": None,
                "status": REPLACED,
                "source": profile.get("source"),
                "supersedes": ids,
                **{k: profile.get(k) for k in _PROVENANCE},
            }
        )
    return tombstones, {changed[i]["profile_id"] for i in replaced}
