"""Asset checks. `search_index_is_servable` is blocking: a version that fails it is never published."""


from collections import Counter

import dagster as dg

from reflexio_pipelines.assets.search_index import expected_counts, search_index, staged_version
from reflexio_pipelines.resources import EmbedderResource, LakeResource
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


def self_retrieval_problems(index: LoadedIndex, model) -> list[str]:
    """Each sampled document must be found by its own text (catches misaligned vectors or a broken BM25 leg).

    Several users can hold the very same text (one correction, many users); the cut-off widens by the number of
    identical twins so a tie is not mistaken for a miss."""
    problems = []
    everything = SearchFilters(statuses=("current", "pending", "archived", "superseded"), playbook_statuses=None)
    for entity in ENTITY_TYPES:
        twins = Counter(text for _, text in index.sample(entity, index.count(entity)))
        for doc_id, text in index.sample(entity, SELF_RETRIEVAL_SAMPLE):
            hits = index.search(entity, text, embed_search_query(model, text), top_k=4 + twins[text], threshold=0.0,
                                mode="hybrid", filters=everything)  # fmt: skip
            if doc_id not in {hit.doc_id for hit in hits}:
                problems.append(f"{entity} {doc_id} is not found by its own text")
    return problems
