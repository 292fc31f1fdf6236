"""The service's long-lived parts, created at start-up and shared by every request."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable

import numpy as np

from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.learning.embedding import Embedder, make_embedder
from reflexio_pipelines.search.index import embed_search_query
from reflexio_pipelines.settings import Settings
from serving.control import ControlOverlay
from serving.curation import CurationOverlay
from serving.index import IndexHolder
from serving.landing import LandingWriter
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
    control: ControlOverlay
    curation: CurationOverlay
    reindexer: Reindexer
    retrievals: RetrievalLog
    org_id: str = "default"
    _embedder: Embedder | None = None

    @classmethod
    def create(cls, settings: Settings, launcher: Launcher | None = None, org_id: str = "default") -> "ServiceState":
        lake = Lake.at(settings.lake)
        index = IndexHolder(lake.index_root)
        return cls(
            settings=settings,
            lake=lake,
            writer=LandingWriter(lake, max_batch_rows=settings.landing_max_batch_rows),
            index=index,
            launcher=launcher or _default_launcher(settings),
            operate=_default_operator(settings),
            aggregate=_default_aggregator(settings),
            control=ControlOverlay(lake),
            curation=CurationOverlay(lake),
            reindexer=Reindexer(_default_rebuild(settings, index)),
            retrievals=RetrievalLog(lake),
            org_id=org_id,
        )

    def start(self) -> None:
        self.writer.start()
        self.control.refresh()
        self.curation.refresh()
        self.index.on_tick = self._tick
        self.index.start()
        self.reindexer.start()

    def _tick(self) -> None:
        self.control.refresh()
        self.curation.refresh()
        self.retrievals.flush()

    def close(self) -> None:
        self.writer.close()
        self.reindexer.close()
        self.index.close()
        self.retrievals.flush()

    @property
    def embedder(self) -> Embedder:
        """The query embedder, created on first use (the local model loads in well under a second)."""
        if self._embedder is None:
            e = self.settings.embedder
            self._embedder = make_embedder(
                e.model, api_base=e.api_base, api_key=e.api_key.get_secret_value(), dimensions=e.dimensions
            )
        return self._embedder

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
