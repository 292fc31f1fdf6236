"""Asset checks. `search_index_is_servable` is blocking: a version that fails it is never published."""


from collections import Counter

import dagster as dg
import numpy as np

from reflexio_pipelines.assets.search_index import expected_counts, search_index, staged_version
from reflexio_pipelines.resources import EmbedderResource, LakeResource
from reflexio_pipelines.search.conversation import CONTEXT_AFTER, CONTEXT_BEFORE
from reflexio_pipelines.search.conversation import ENTITY as INTERACTION
from reflexio_pipelines.search.index import ENTITY_TYPES, LoadedIndex, SearchFilters, embed_search_query

SELF_RETRIEVAL_SAMPLE = 3


@dg.asset_check(asset=search_index, blocking=True, description="Schema, counts, model and self-retrieval.")
def search_index_is_servable(
    context: dg.AssetCheckExecutionContext, lake: LakeResource, embedder: EmbedderResource
) -> dg.AssetCheckResult:
    root = lake.get().index_root
    version = staged_version(context.instance, root)
    index = LoadedIndex.load(root, version)
    model = embedder.get()
    problems = index_problems(index, expected_counts(context.instance, root), model.model_id)
    if not problems:
        problems = self_retrieval_problems(index, model)
    return dg.AssetCheckResult(
        passed=not problems,
        metadata={"version": version, "problems": "; ".join(problems) or "none"},
        description="; ".join(problems) or "index is servable",
    )


def index_problems(index: LoadedIndex, expected: dict[str, int], embedder_model_id: str) -> list[str]:
    """Structural problems: wrong embedding model, row counts that differ from what the build was given."""
    problems = []
    if index.embedder_model_id != embedder_model_id:
        problems.append(f"index vectors come from {index.embedder_model_id}, configured embedder is {embedder_model_id}")
    for entity in ENTITY_TYPES:
        if index.count(entity) != expected.get(entity, 0):
            problems.append(f"{entity}: {index.count(entity)} docs indexed, {expected.get(entity, 0)} expected")
    return problems


def _tied_out(index: LoadedIndex, entity: str, doc_id: str, text: str, query, top_k: int,
              filters: SearchFilters) -> bool:  # fmt: skip
    """Whether a doc missing from its own results only lost a tie: texts the tokenizer cannot read (symbols,
    unassigned code points) all embed alike, and equally scored docs are cut by id. Its own vector must then score
    as high against the query as the k-th nearest neighbour does; a misaligned vector would not."""
    own = index.vector(entity, doc_id)
    if query is None or own is None:
        return False
    nearest = index.search(entity, text, query, top_k=top_k, threshold=0.0, mode="vector", filters=filters)
    if len(nearest) < top_k or any(h.similarity is None for h in nearest):
        return False
    return float(own @ (query / np.linalg.norm(query))) >= nearest[-1].similarity - 1e-5


def self_retrieval_problems(index: LoadedIndex, model) -> list[str]:
    """Each sampled document must be found by its own text (catches misaligned vectors or a broken BM25 leg).

    Several users can hold the very same text (one correction, many users); the cut-off widens by the number of
    identical twins so a tie is not mistaken for a miss. A turn's text holds its neighbours' lines, so the cut-off
    also widens by the neighbours a window holds: they can match its text as well as it does."""
    problems = []
    # now=0: expired profiles stay in the index (hidden at query time) and must be findable here too.
    everything = SearchFilters(statuses=("current", "pending", "archived", "superseded"), playbook_statuses=None,
                               now=0)
    for entity in ENTITY_TYPES:
        twins = Counter(text for _, text in index.sample(entity, index.count(entity)))
        shared = CONTEXT_BEFORE + CONTEXT_AFTER if entity == INTERACTION else 0
        for doc_id, text in index.sample(entity, SELF_RETRIEVAL_SAMPLE):
            query = embed_search_query(model, text)
            top_k = 4 + twins[text] + shared
            hits = index.search(entity, text, query, top_k=top_k, threshold=0.0, mode="hybrid", filters=everything)
            if doc_id not in {hit.doc_id for hit in hits} and not _tied_out(index, entity, doc_id, text, query,
                                                                            top_k, everything):
                problems.append(f"{entity} {doc_id} is not found by its own text")
    return problems
