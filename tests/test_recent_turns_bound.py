"""The landing-file fallback of search_interactions is bounded (issue #41): a search ranks at most the user's newest
`recent_turns_per_user` unindexed turns, parses no landing file, embeds at most those turns' lines once, and the next
search over the same turns builds nothing; the older turns it leaves out are found once a build takes them in."""

from __future__ import annotations

from pathlib import Path

import pytest

from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.search.documents import index_documents
from reflexio_pipelines.search.incremental import stage_update
from reflexio_pipelines.search.versions import activate_version
from reflexio_pipelines.settings import Settings
from serving import recent_turns
from serving.interaction_search import search_turns
from serving.landing import LandingWriter
from serving.models.publish import PublishUserInteractionRequest
from serving.routers.publish import landing_rows
from serving.state import ServiceState

BOUND = 40
TURNS_PER_PUBLISH = 10
TOPICS = ["aardvark", "bassoon", "cathedral", "dulcimer", "espresso", "flamingo", "glacier", "harmonica"]
START = 1_700_000_000


def _land(lake: Lake) -> None:
    """One publish (one landing file) per topic for user u, oldest first, and one per topic for user v."""
    writer = LandingWriter(lake)
    writer.start()
    try:
        for n, topic in enumerate(TOPICS):
            for user in ("u", "v"):
                request_id = f"{user}-{n}"
                body = PublishUserInteractionRequest.model_validate(
                    {
                        "user_id": user,
                        "session_id": request_id,
                        "interaction_data_list": [
                            {
                                "role": "Maya",
                                "content": f"Line {j} of our chat about the {topic}, day {n}.",
                                "created_at": START + 3600 * n + j,
                            }
                            for j in range(TURNS_PER_PUBLISH)
                        ],
                    }
                )
                writer.submit(request_id, landing_rows(body, request_id)).result(timeout=30)
    finally:
        writer.close()


@pytest.fixture
def state(tmp_path: Path):
    lake = Lake.at(tmp_path / "lake")
    _land(lake)
    svc = ServiceState.create(Settings(lake=str(lake.root), recent_turns_per_user=BOUND))
    svc.recent_turns.refresh(0)  # the watcher's tick reads the landing files
    yield svc
    svc.close()


def _search(state: ServiceState, query: str) -> tuple[list[dict], list[str]]:
    return search_turns(state, "u", query, 10, "hybrid", None, None)


def test_a_search_over_a_large_backlog_stays_within_the_bound(state):
    recent = state.recent_turns
    parsed = recent.files_parsed
    assert parsed == 2 * len(TOPICS)
    views, notes = _search(state, "the harmonica chat")
    assert views[0]["content"].endswith("harmonica, day 7.")  # the newest turns are searched
    older = len(TOPICS) * TURNS_PER_PUBLISH - BOUND
    assert any(f"{older} older turns" in n for n in notes)
    assert recent.files_parsed == parsed  # the search parsed no file
    assert 0 < recent.lines_embedded <= BOUND  # only the newest BOUND turns' lines
    assert recent.corpora_built == 1
    embedded = recent.lines_embedded
    views, _ = _search(state, "what did we say about the glacier")
    assert views[0]["content"].endswith("glacier, day 6.")
    # the second search over the same turns reuses their ranking: nothing parsed, embedded or built
    assert (recent.files_parsed, recent.lines_embedded, recent.corpora_built) == (parsed, embedded, 1)


def test_older_unindexed_turns_beyond_the_bound_are_found_by_their_words(state):
    views, notes = _search(state, "aardvark")
    found = [v["content"] for v in views if "aardvark" in v["content"]]  # the oldest publish: beyond the bound
    assert len(found) >= 3 and all(f.endswith("aardvark, day 0.") for f in found)
    assert any("40 older turns not indexed yet were searched by their words only" in n for n in notes)
    assert state.recent_turns.lines_embedded <= BOUND  # their lines were not embedded
    # ... and by words alone: the vector leg does not rank them (a query of other words finds none of them)
    views, _ = _search(state, "an anteater")
    assert not any("aardvark" in v["content"] for v in views)


def test_older_unindexed_turns_are_found_once_a_build_takes_them_in(state, monkeypatch):
    monkeypatch.setattr(recent_turns, "WORDS_ONLY_FACTOR", 1)  # the newest BOUND turns only, none by words alone
    assert not any("aardvark" in v["content"] for v in _search(state, "aardvark")[0])  # beyond the bound
    lake = state.lake
    docs, _, watermarks = index_documents(lake, new_turns=True, max_new_turns=BOUND)  # the oldest BOUND turns
    activate_version(
        lake.index_root, stage_update(lake.index_root, docs, state.embedder, watermarks=watermarks).version
    )
    state.index.refresh()
    found = [v["content"] for v in _search(state, "aardvark")[0] if "aardvark" in v["content"]]
    assert found and found[0].endswith("aardvark, day 0.")  # from the index now (its leg's best)
    assert any("harmonica" in v["content"] for v in _search(state, "harmonica")[0])  # the newest: still the fallback
