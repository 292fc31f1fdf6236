"""Published turns as index documents with their conversational context (entity type "interaction").

A turn alone rarely answers a question about a conversation: "what did she say after the trip" is answered by a
turn that never names the trip. So each turn's document carries a window of the turns around it in the same session
and the session's date:

- BM25 indexes the session date, the turn's own line (twice: the turn ranks ahead of the neighbours whose windows
  hold its line, `bm25_text`) and its neighbours' lines;
- the vector is the turn's own line's embedding plus its neighbours', weighted (`SearchDoc.vector_parts`), so every
  line is embedded once through the embedding cache, however many windows it appears in, and a document whose
  window grows (a later turn arrived) is re-indexed without embedding anything;
- the payload is the original's InteractionView plus the ids of the neighbours, which search resolves into
  `neighbours` (the turns around the match, in conversation order).

Which turns a version holds is decided by the index build (up to an ingest watermark, assets/search_index.py); the
windows are computed over exactly those turns, so a version is a function of its turns.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from typing import Any

from reflexio_pipelines.lake.interactions import interaction_view
from reflexio_pipelines.search.types import SearchDoc

ENTITY = "interaction"
CONTEXT_BEFORE = 2  # neighbours before a turn in its window
CONTEXT_AFTER = 2  # and after it
# Share of a turn's vector that comes from its neighbours (their mean); the turn's own line keeps the rest. Chosen on
# benchmarks/interaction_search.py, recall@10: 0.865 without neighbours (context questions 0.83), 0.885 at 0.2,
# 0.892 at 0.35, 0.89 at 0.5 (a plateau; context questions 0.93 at 0.35). On conversations we did not write
# (benchmarks/interaction_ranking.py --corpus public --ablation) the window (text and vector) gives 0.58 vs 0.49
# without it on the dev draw, 0.41 vs 0.425 on the held-out one (about one question of 89): kept.
NEIGHBOUR_WEIGHT = 0.35
NEIGHBOURS_KEY = "neighbour_turn_ids"  # payload key; serving replaces it with the neighbours' views


def turn_line(row: dict[str, Any]) -> str:
    """What one turn says, as it is embedded and shown in its neighbours' windows: content and action description.
    Not the speaker: a name in every line makes every short turn of that speaker look like any question naming them
    (on an earlier version of benchmarks/interaction_corpus.py, recall@10 0.62 with names, 0.72 without, other
    settings equal); speakers are matched from the turn's role instead (serving/interaction_search.py)."""
    return " ".join(part for part in (row.get("content"), row.get("user_action_description")) if part)


def session_date(created_at: int) -> str:
    """A session's date as BM25 text ("8 May 2023"): month and year words a temporal question can match."""
    moment = datetime.fromtimestamp(int(created_at), tz=timezone.utc)
    return f"{moment.day} {moment:%B %Y}"


def conversations(rows: Iterable[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Turns grouped by (user, session; else request), each group in conversation order."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["user_id"], row.get("session_id") or row["request_id"]), []).append(row)
    return [sorted(group, key=_conversation_order) for _, group in sorted(groups.items())]


def _conversation_order(row: dict[str, Any]) -> tuple:
    return (row["created_at"], row["ingested_at_us"], row["request_id"], row["turn_index"])


def window(turns: Sequence[dict[str, Any]], position: int) -> list[dict[str, Any]]:
    """The neighbours of turns[position] within its conversation (the turn itself excluded), in order."""
    start = max(0, position - CONTEXT_BEFORE)
    return [*turns[start:position], *turns[position + 1 : position + 1 + CONTEXT_AFTER]]


def vector_parts(own: str, lines: Sequence[str]) -> tuple[tuple[str, float], ...]:
    """How a turn's vector is made: its own line, and its neighbours' lines sharing `NEIGHBOUR_WEIGHT`."""
    if not lines:
        return ((own, 1.0),)
    return ((own, 1.0 - NEIGHBOUR_WEIGHT), *((line, NEIGHBOUR_WEIGHT / len(lines)) for line in lines))


def bm25_text(date: str, own: str, lines: Sequence[str]) -> str:
    """What BM25 indexes for a turn: the session date, the turn's own line twice, then its neighbours' lines. Each
    window line appears in five documents, so with every line once the neighbours' documents tied with the turn that
    said it (and the shorter ones won on length): real chat ranked the answer below its neighbours. Twice, the turn's
    own words count more than its context's (BM25's saturating term frequency), and the window still lifts the turn
    a question describes only by what was said around it. On real people's chats (benchmarks/
    interaction_realtalk_corpus.py, dev) recall@1 0.230 -> 0.249 at the BM25 weight 0.6 (0.237 -> 0.256 at 0.8);
    our template corpus 0.497 -> 0.492 (recall@10 0.873 -> 0.858)."""
    return " ".join([date, own, own, *lines])


def turn_docs(rows: Iterable[dict[str, Any]]) -> list[SearchDoc]:
    """Search documents for turns (lake rows), each with its window of neighbours and its session's date."""
    docs = []
    for turns in conversations(rows):
        date = session_date(turns[0]["created_at"])
        for position, row in enumerate(turns):
            neighbours = window(turns, position)
            own = turn_line(row)
            lines = [turn_line(n) for n in neighbours]
            docs.append(
                SearchDoc(
                    entity_type=ENTITY,
                    doc_id=row["turn_id"],
                    text=bm25_text(date, own, lines),
                    payload={**interaction_view(row), NEIGHBOURS_KEY: [n["turn_id"] for n in neighbours]},
                    user_id=row["user_id"],
                    agent_version=row.get("agent_version"),
                    created_at=int(row["created_at"]),
                    vector_parts=vector_parts(own, lines),
                )
            )
    return docs
