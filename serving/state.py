"""The service's long-lived parts, created at start-up and shared by every request."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
from fastapi.responses import JSONResponse

from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.learning.embedding import Embedder, make_embedder
from reflexio_pipelines.privacy.erasure import active_erasures
from reflexio_pipelines.search.query import LoadedIndex
from reflexio_pipelines.search.shards import shard_of
from reflexio_pipelines.search.situations import SituationMatcher
from reflexio_pipelines.search.text import embed_search_query
from reflexio_pipelines.search.versions import TURNS_WATERMARK, version_watermark
from reflexio_pipelines.settings import Settings
from serving.control import ControlOverlay
from serving.curation import CurationOverlay
from serving.erasures import ErasureGate, resume_interrupted
from serving.errors import error
from serving.fresh import FreshAdds
from serving.index import IndexHolder
from serving.landing import LandingWriter
from serving.outcomes import LearningPolicy, OutcomeOverlay
from serving.recent_turns import RecentTurns
from serving.regeneration import RegenerationJobs
from serving.reindex import Reindexer
from serving.retrievals import RetrievalLog

log = logging.getLogger(__name__)

#: Runs the learning loop for partition keys: `launcher(keys, flush="all"|"due", flush_users=[...])` (runs.launch).
Launcher = Callable[..., object]
Operator = Callable[[str, dict], dict]


@dataclass
class ServiceState:
    """Settings, the lake, the landing writer, the served index and the query embedder."""

    settings: Settings
    lake: Lake
    writer: LandingWriter
    index: IndexHolder
    launcher: Launcher
    operate: Operator
    aggregate: Callable[[dict], dict]
    evaluate: Callable[[list[str]], dict]  # grade the named sessions now: an evaluation_job run
    control: ControlOverlay
    curation: CurationOverlay
    reindexer: Reindexer
    retrievals: RetrievalLog
    org_id: str = "default"
    _embedder: Embedder | None = None
    _situations: SituationMatcher | None = None
    gate: ErasureGate | None = None  # whose publishes wait for an erasure (the writer asks it); made if not given
    fresh: FreshAdds = field(init=False)  # embeds with this state's (lazily created) embedder
    policy: LearningPolicy = field(init=False)  # the organisation's holdout and outcome settings
    outcomes: OutcomeOverlay = field(init=False)  # outcome counters and the items held out of search
    recent_turns: RecentTurns = field(init=False)  # turns published since the served version took in turns
    regenerations: RegenerationJobs = field(init=False)  # evaluation regeneration jobs in flight (serving/regeneration)

    def __post_init__(self) -> None:
        self.fresh = FreshAdds(self.curation, lambda: self.embedder)
        self.policy = LearningPolicy(self.lake, self.settings.extraction_config)
        self.outcomes = OutcomeOverlay(self.lake, self.policy)
        self.recent_turns = RecentTurns(self.lake, self.settings.recent_turns_per_user)
        self.regenerations = RegenerationJobs()
        if self.gate is None:
            self.gate = ErasureGate(self.lake)

    @classmethod
    def create(cls, settings: Settings, launcher: Launcher | None = None, org_id: str = "default") -> "ServiceState":
        lake = Lake.at(settings.lake)
        index = IndexHolder(lake.index_root, shards=settings.shard_selector())
        gate = ErasureGate(lake)
        return cls(
            settings=settings,
            lake=lake,
            writer=LandingWriter(lake, max_batch_rows=settings.landing_max_batch_rows, refuse=gate.blocks),
            gate=gate,
            index=index,
            launcher=launcher or _default_launcher(settings),
            operate=_default_operator(settings),
            aggregate=_default_aggregator(settings),
            evaluate=_default_evaluator(settings),
            control=ControlOverlay(lake),
            curation=CurationOverlay(lake),
            reindexer=Reindexer(_default_rebuild(settings, index)),
            retrievals=RetrievalLog(lake),
            org_id=org_id,
        )

    def start(self) -> None:
        self.gate.refresh()  # before the first publish: a user whose erasure was interrupted stays paused
        self.writer.start()
        if active_erasures(self.lake):  # finish what a crash or restart interrupted, without delaying start-up
            threading.Thread(target=resume_interrupted, args=(self,), name="erasure-resume", daemon=True).start()
        self.control.refresh()
        self.curation.refresh()
        self.outcomes.refresh()
        self.index.on_tick = self._tick
        self.index.start()
        self.reindexer.start()

    def refresh(self) -> None:
        """Re-read now what the service otherwise re-reads from the lake on its next tick (config, overlays,
        erasure gate): the original's admin cache invalidation."""
        self._tick()

    def _tick(self) -> None:
        self.gate.refresh()
        self.control.refresh()
        self.curation.refresh()
        self.policy.refresh()
        self.outcomes.refresh()
        self.recent_turns.refresh(self.turns_watermark(self.index.index))
        self.retrievals.flush()

    def close(self) -> None:
        self.writer.close()
        self.reindexer.close()
        self.index.close()
        self.fresh.close()
        self.retrievals.flush()

    def misdirected(self, user_id: str | None) -> JSONResponse | None:
        """421 when this replica's index shards do not hold `user_id` (the request belongs to another replica
        group), naming the shard that does; None when it may answer."""
        shards = self.index.shards
        if shards is None or shards.holds(user_id):
            return None
        return error(
            421,
            f"user_id: this replica serves index shards {shards.describe()}; the user is in shard "
            f"{shard_of(user_id, shards.count)}",
            headers={"X-Reflexio-Shard": str(shard_of(user_id, shards.count))},
        )

    def searchable(self) -> list[LoadedIndex]:
        """What a search reads: the served index version (if one was published) and the index of manual adds it does
        not hold yet (serving/fresh.py), in that order."""
        served = self.index.index  # one version for the whole request, even if a swap happens meanwhile
        fresh = self.fresh.index(served)
        return [i for i in (served, fresh) if i is not None]

    @staticmethod
    def turns_watermark(served: LoadedIndex | None) -> int:
        """Up to which ingest instant (unix µs) the `served` version holds turns (0 without a version)."""
        return version_watermark(served.manifest, TURNS_WATERMARK) if served is not None else 0

    @property
    def embedder(self) -> Embedder:
        """The query embedder, created on first use (the local model loads in well under a second)."""
        if self._embedder is None:
            e = self.settings.embedder
            self._embedder = make_embedder(
                e.model,
                api_base=e.api_base,
                api_key=e.api_key.get_secret_value(),
                dimensions=e.dimensions,
                api_version=e.api_version,
            )
        return self._embedder

    @property
    def situations(self) -> SituationMatcher:
        """The situation phrases embedded with the query embedder (search/situations.py), built on first use."""
        if self._situations is None:
            self._situations = SituationMatcher(self.embedder)
        return self._situations

    def query_vector(self, query: str, index_model_id: str) -> np.ndarray | None:
        """The query's embedding, or None when the index was built by another model (vectors must not mix)."""
        if self.embedder.model_id != index_model_id:
            log.error("index built with %s but service embeds with %s", index_model_id, self.embedder.model_id)
            return None
        return embed_search_query(self.embedder, query)


def _default_launcher(settings: Settings) -> Launcher:
    def launch(partition_keys: list[str], flush: str = "all", flush_users: list[str] | tuple[str, ...] = ()) -> object:
        from reflexio_pipelines.runs import launch as run_pipeline

        return run_pipeline(partition_keys, settings=settings, flush=flush, flush_users=flush_users)

    return launch


def _default_operator(settings: Settings) -> Operator:
    def operate(job_name: str, config: dict) -> dict:
        from reflexio_pipelines.runs import run_operation

        return run_operation(job_name, config, settings=settings)

    return operate


def _default_rebuild(settings: Settings, index: IndexHolder) -> Callable[[], None]:
    def rebuild() -> None:
        from reflexio_pipelines.runs import rebuild_index

        rebuild_index(settings=settings)
        index.refresh()

    return rebuild


def _default_aggregator(settings: Settings) -> Callable[[dict], dict]:
    def aggregate(config: dict) -> dict:
        from reflexio_pipelines.runs import run_aggregation

        return run_aggregation(config, settings=settings)

    return aggregate


def _default_evaluator(settings: Settings) -> Callable[[list[str]], dict]:
    def evaluate(sessions: list[str]) -> dict:
        from reflexio_pipelines.runs import run_evaluation

        return run_evaluation(sessions=sessions, settings=settings)

    return evaluate
