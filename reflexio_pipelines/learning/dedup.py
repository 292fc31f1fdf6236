"""Deduplication and conflict resolution for newly extracted items against what a user already has.

Contract (the original's): the judge sees NEW-i and EXISTING-j items and returns duplicate groups. How a group is
resolved is decided here, once, for every judge:

- NEW + EXISTING: one NEW (the merged text if the judge gave one, else the newest NEW) becomes the current item and
  every EXISTING member is *superseded* by it — never deleted; the row stays, with lineage to its replacement. If
  the surviving text is the same as an EXISTING member's, nothing new is written and that member stays current.
- NEW only: the members collapse into one item.
- EXISTING only: ignored. A judge can never cause data loss (the original deleted rows here).

Two judges implement the contract: `RuleDedupJudge` (offline, a heuristic: embedding similarity, recency and
single-valued "slots" such as where the user lives, learning/slots.py) and the LLM judge in `llm_dedup.py`. Candidates for the judge
come from an embedding pre-filter, and the judge is not called at all when nothing is close — that is where the
cost saving over the original's per-publish dedup comes from.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from reflexio_pipelines.learning.learned_rows import content_key
from reflexio_pipelines.learning.slots import is_typed
from reflexio_pipelines.learning.slots import profile_slot as _profile_slot
from reflexio_pipelines.learning.subjects import (
    about_someone_else,
    names_in,
    negated,
    states_a_change,
    subjects_of,
    things_named,
)

#: Cosine similarity at or above which two texts are considered the same statement (rule judge).
SAME_STATEMENT = 0.9
#: Pre-filter: existing items below this similarity to every NEW item are not shown to the judge.
PREFILTER_THRESHOLD = 0.4
PREFILTER_TOP_K = 5


@dataclass(frozen=True)
class Candidate:
    """One item taking part in deduplication (a profile or a playbook)."""

    item_id: str
    text: str
    created_at: int
    slot: str | None = None  # a single-valued attribute ("lives in", "timezone"): a newer value replaces an older
    key: str | None = None  # what "the same item" means (a playbook's content, whatever its trigger); default text

    @property
    def identity(self) -> str:
        return self.key if self.key is not None else self.text


@dataclass(frozen=True)
class DuplicateGroup:
    """Items the judge says state the same thing (or contradict each other on the same thing)."""

    item_ids: tuple[str, ...]  # "NEW-0", "EXISTING-2", …
    merged_content: str | None = None
    reasoning: str = ""


@dataclass
class Resolution:
    """What to write: which NEW items survive (possibly with merged text) and what each supersedes."""

    keep: dict[int, str] = field(default_factory=dict)  # NEW index -> text to write
    supersedes: dict[int, list[str]] = field(default_factory=dict)  # NEW index -> existing item ids it replaces
    duplicate_of: dict[int, str] = field(default_factory=dict)  # NEW index -> existing id it repeats (not written)
    judge_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


class DedupJudge(Protocol):
    """Groups NEW and EXISTING candidates; returns groups plus the LLM cost of doing so."""

    def judge(self, new: list[Candidate], existing: list[Candidate]) -> tuple[list[DuplicateGroup], int, int, int]:
        """(groups, calls, prompt_tokens, completion_tokens)."""
        ...


def prefilter(
    new_vectors: np.ndarray,
    existing_vectors: np.ndarray,
    threshold: float = PREFILTER_THRESHOLD,
    top_k: int = PREFILTER_TOP_K,
) -> list[int]:
    """Indices of existing items that are among the top_k most similar (>= threshold) to any NEW item."""
    if len(new_vectors) == 0 or len(existing_vectors) == 0:
        return []
    sims = new_vectors @ existing_vectors.T
    chosen: set[int] = set()
    for row in sims:
        order = np.argsort(-row, kind="stable")[:top_k]
        chosen.update(int(j) for j in order if row[j] >= threshold)
    return sorted(chosen)


def new_items_are_close(new_vectors: np.ndarray, threshold: float = SAME_STATEMENT) -> bool:
    """Whether any two NEW items are near-identical (then the judge is needed even with no EXISTING candidate)."""
    if len(new_vectors) < 2:
        return False
    sims = new_vectors @ new_vectors.T
    np.fill_diagonal(sims, -1.0)
    return bool((sims >= threshold).any())


def deduplicate(
    new: list[Candidate],
    existing: list[Candidate],
    new_vectors: np.ndarray,
    existing_vectors: np.ndarray,
    judge: DedupJudge,
) -> Resolution:
    """Pre-filter, judge (only when something is close), and resolve groups into a Resolution."""
    shown = prefilter(new_vectors, existing_vectors)
    same_slot = {
        j
        for j, e in enumerate(existing)
        if e.slot and any(n.slot == e.slot or (n.slot, e.slot) in STALE_AFTER for n in new)
    }
    shown = sorted(set(shown) | same_slot)
    resolution = Resolution(keep={i: item.text for i, item in enumerate(new)})
    slots = [n.slot for n in new if n.slot]
    if not new or (not shown and len(set(slots)) == len(slots) and not new_items_are_close(new_vectors)):
        return resolution  # nothing close to anything: no judge call at all
    candidates = [existing[j] for j in shown]
    groups, calls, prompt_tokens, completion_tokens = judge.judge(new, candidates)
    resolution.judge_calls, resolution.prompt_tokens, resolution.completion_tokens = (
        calls,
        prompt_tokens,
        completion_tokens,
    )
    for group in groups:
        _apply(group, new, candidates, resolution)
    return resolution


def _parse_ids(group: DuplicateGroup, n_new: int, n_existing: int) -> tuple[list[int], list[int]]:
    new_ids, existing_ids = [], []
    for label in group.item_ids:
        match = re.fullmatch(r"\s*(NEW|EXISTING)-(\d+)\s*", str(label), re.I)
        if not match:
            continue
        index = int(match.group(2))
        if match.group(1).upper() == "NEW" and index < n_new and index not in new_ids:
            new_ids.append(index)
        elif match.group(1).upper() == "EXISTING" and index < n_existing and index not in existing_ids:
            existing_ids.append(index)
    return new_ids, existing_ids


def _apply(group: DuplicateGroup, new: list[Candidate], existing: list[Candidate], out: Resolution) -> None:
    new_ids, existing_ids = _parse_ids(group, len(new), len(existing))
    new_ids = [i for i in new_ids if i in out.keep]  # each NEW item is resolved once (first group wins)
    if not new_ids:
        return  # EXISTING-only group: never deletes or changes anything
    survivor = max(new_ids, key=lambda i: (new[i].created_at, i))
    text = (group.merged_content or "").strip() or out.keep[survivor]
    for i in new_ids:
        if i != survivor:
            del out.keep[i]
    identity = new[survivor].identity if not group.merged_content else text
    repeated = [existing[j] for j in existing_ids if _same_text(existing[j].identity, identity)]
    if repeated:
        # The surviving statement is already current: keep it, write nothing new, supersede the rest.
        del out.keep[survivor]
        out.duplicate_of[survivor] = repeated[0].item_id
        others = [existing[j].item_id for j in existing_ids if existing[j] is not repeated[0]]
        if others:
            out.keep[survivor] = repeated[0].text
            out.supersedes[survivor] = others
        return
    out.keep[survivor] = text
    if existing_ids:
        out.supersedes[survivor] = [existing[j].item_id for j in existing_ids]


def _same_text(a: str, b: str) -> bool:
    return content_key(a) == content_key(b)  # every script: "用户住在北京" is not "用户搬到上海"


#: (slot of a NEW item, slot of an EXISTING item it makes stale): a move changes the time zone ("Is living in Tokyo"
#: replaces "Is on Eastern time"), while a time zone says nothing of the city, so the other way round nothing goes.
STALE_AFTER = frozenset({("location", "timezone")})


class RuleDedupJudge:
    """The offline judge (a heuristic, not a model): near-identical texts (cosine >= 0.9) are duplicates, and a
    NEW item with the same single-valued slot as an EXISTING one ("Lives in Berlin" vs "Lives in London")
    conflicts with it, the newer statement winning, and a new place to live makes an earlier time zone stale
    (`STALE_AFTER`). Otherwise two items in different slots are never grouped, however close their wording ("Works
    at Acme" is the employer, "Works as a data engineer" the role). Vectors are passed in so nothing is embedded
    twice."""

    #: It also applies `changed_subjects` (the LLM judge reads changes from the wording itself).
    follows_change_words = True

    def __init__(self, vectors: dict[str, np.ndarray]) -> None:
        self._vectors = vectors

    def judge(self, new: list[Candidate], existing: list[Candidate]) -> tuple[list[DuplicateGroup], int, int, int]:
        labelled = [(f"NEW-{i}", c) for i, c in enumerate(new)] + [(f"EXISTING-{j}", c) for j, c in enumerate(existing)]
        parent = {label: label for label, _ in labelled}

        def find(x: str) -> str:
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        for a in range(len(labelled)):
            for b in range(a + 1, len(labelled)):
                (la, ca), (lb, cb) = labelled[a], labelled[b]
                if la.startswith("EXISTING") and lb.startswith("EXISTING"):
                    continue  # the rule judge never regroups what the user already has
                if self._related(ca, cb) or _makes_stale(la, ca, lb, cb):
                    parent[find(lb)] = find(la)
        groups: dict[str, list[str]] = {}
        for label, _ in labelled:
            groups.setdefault(find(label), []).append(label)
        return (
            [
                DuplicateGroup(tuple(m), reasoning="rule: same statement or same slot")
                for m in groups.values()
                if len(m) > 1
            ],
            0,
            0,
            0,
        )

    def _related(self, a: Candidate, b: Candidate) -> bool:
        if a.slot and a.slot == b.slot:
            return True
        if is_typed(a.slot) and is_typed(b.slot):
            # two profiles in different typed slots ("works at" is the employer, "works as" the role): never one
            # superseding the other, however similar the wording
            return False
        va, vb = self._vectors.get(a.item_id), self._vectors.get(b.item_id)
        return va is not None and vb is not None and float(va @ vb) >= SAME_STATEMENT


def _makes_stale(label_a: str, a: Candidate, label_b: str, b: Candidate) -> bool:
    """Whether one of the two is NEW and its slot makes the other's, an EXISTING one, stale (`STALE_AFTER`)."""
    if label_a.startswith("NEW") and label_b.startswith("EXISTING"):
        return (a.slot, b.slot) in STALE_AFTER
    if label_b.startswith("NEW") and label_a.startswith("EXISTING"):
        return (b.slot, a.slot) in STALE_AFTER
    return False


def profile_slot(content: str) -> str | None:
    """The single-valued attribute a profile sets, if its wording shows one (heuristic; None when unsure): a typed
    slot (location, diet, role, team, employer, timezone, name, language, first language; see learning/slots.py)
    or the subject of a "<subject> is …" statement ("Phone number is …")."""
    return _profile_slot(content)


#: A change statement replaces an earlier item this close even without a shared subject in the lexicon ("Always scan
#: for security issues first" / "Only run a security review when the code handles user input": 0.61).
CHANGE_SIMILARITY = 0.55
#: A change that shares nothing else with the user's items replaces the nearest one at least this close. On the
#: written training pairs (benchmarks/data/updates/written_train.jsonl, the local embedder) 62% of a change's clauses
#: are this close to the statement it replaces, 0.7% to another pair's statement (0.35: 73% and 1.6%).
CHANGE_NEAREST_FLOOR = 0.40
#: A change the change head is sure of (probability >= SURE_CHANGE, or words of change) reaches the nearest item
#: from SURE_CHANGE_FLOOR ("got the keys to our own house yesterday!!!" / "Rents a two-bed flat in Bristol": 0.25).
#: Chosen on the written training pairs (head probability x cosine to the earlier statement): recall of "replaced"
#: 0.42 -> 0.51 at precision 0.85 -> 0.86, while another pair's statement is reached 0.23% -> 0.69% of the time
#: (0.7 and 0.25 reached more, 0.58, at 1.8%). The never-tuned dev pairs were printed beside it: 0.31 -> 0.47
#: recall, precision 0.89 -> 0.90.
SURE_CHANGE = 0.80
SURE_CHANGE_FLOOR = 0.30


def changed_subjects(
    new: list[tuple[str, str]],
    existing: list[str],
    new_vectors: np.ndarray,
    existing_vectors: np.ndarray,
    taken: set[int],
    announced: list[float] | None = None,
) -> dict[int, list[int]]:
    """NEW index -> EXISTING positions it replaces because the user said it changed (heuristic).

    `new` holds (item text, the user's words) in the order they were said; a NEW item replaces the EXISTING items on
    the same subject (learning/subjects.py), naming the same name or thing, or at cosine >= CHANGE_SIMILARITY when its words announce a change
    ("I moved to Denver", "from now on …", "no longer"), not an addition ("now also has a cat"); without such words,
    a NEW item naming the same thing with the other polarity (`negated`) replaces it. An EXISTING item
    goes to the last NEW item that replaces it; `taken` (already superseded) are left alone. `announced` says per NEW
    item how surely its words tell of a change, 0 when they do not (default: `subjects.states_a_change` on them, 1;
    callers add the change head's probability)."""
    out: dict[int, list[int]] = {}
    owner: dict[int, int] = {}
    existing_subjects = [subjects_of(text) for text in existing]
    existing_names = [names_in(text) for text in existing]  # "Max passed away" is about "Has a dog named Max"
    existing_things = [things_named(text) for text in existing]  # "sold the ps5" is about "Plays on their PS5"
    for i, (text, said) in enumerate(new):
        if about_someone_else(said):
            continue  # "my sister just moved to Denver" is not the user's move
        things = things_named(f"{text} {said}")
        sure = announced[i] if announced is not None else float(states_a_change(said))
        if not sure:
            # no word of change: only the same thing said with the other polarity replaces ("Has reintroduced
            # coffee" / "Does not drink coffee", "Never use tabs" / "Always use tabs")
            for j in range(len(existing)):
                if j not in taken and things & existing_things[j] and negated(text) != negated(existing[j]):
                    owner[j] = i
            continue
        subjects = subjects_of(f"{text} {said}")
        matched = False
        for j, other in enumerate(existing_subjects):
            if j in taken:
                continue
            named = any(re.search(rf"\b{name}\b", f"{text} {said}") for name in existing_names[j])
            named = named or bool(things & existing_things[j])
            if subjects & other or named or float(new_vectors[i] @ existing_vectors[j]) >= CHANGE_SIMILARITY:
                owner[j] = i
                matched = True
        free = [] if matched else [j for j in range(len(existing)) if j not in taken]
        if free:
            # nothing shares a subject, a name or a near wording: the change is about the item nearest to it, if
            # any is near enough ("Signed the mortgage papers on friday!!" / "Rents a two-bed flat in Sheffield")
            nearest = max(free, key=lambda j: float(new_vectors[i] @ existing_vectors[j]))
            floor = SURE_CHANGE_FLOOR if sure >= SURE_CHANGE else CHANGE_NEAREST_FLOOR
            if float(new_vectors[i] @ existing_vectors[nearest]) >= floor:
                owner[nearest] = i
    for j, i in owner.items():
        out.setdefault(i, []).append(j)
    return out
