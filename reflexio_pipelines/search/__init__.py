"""Hybrid (BM25 + vector) search over precomputed, immutable, versioned index directories.

Pure Python: no Dagster, no FastAPI. The pipeline publishes versions; the serving process loads them read-only.
"""

from reflexio_pipelines.search.build import build_index
from reflexio_pipelines.search.query import LoadedIndex
from reflexio_pipelines.search.text import embed_search_query, normalize_text, query_terms
from reflexio_pipelines.search.types import (
    ENTITY_TYPES,
    SEARCH_MODES,
    IndexCorrupt,
    IndexModelMismatch,
    SearchDoc,
    SearchFilters,
    SearchHit,
    SearchIndexError,
    SearchMode,
)
from reflexio_pipelines.search.versions import (
    current_version,
    list_versions,
    new_version_id,
    prune_versions,
    publish_index,
)

__all__ = [
    "ENTITY_TYPES",
    "SEARCH_MODES",
    "IndexCorrupt",
    "IndexModelMismatch",
    "LoadedIndex",
    "SearchDoc",
    "SearchFilters",
    "SearchHit",
    "SearchIndexError",
    "SearchMode",
    "build_index",
    "embed_search_query",
    "current_version",
    "list_versions",
    "new_version_id",
    "normalize_text",
    "prune_versions",
    "publish_index",
    "query_terms",
]
