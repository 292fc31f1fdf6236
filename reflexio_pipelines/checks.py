"""Asset checks. `search_index_is_servable` is blocking: a version that fails it is never published."""

import dagster as dg
import numpy as np

from reflexio_pipelines.assets.search_index import expected_counts, search_index, staged_version
from reflexio_pipelines.learning.embedding import l2_normalize
from reflexio_pipelines.resources import EmbedderResource, LakeResource
from reflexio_pipelines.search.conversation import ENTITY as INTERACTION
from reflexio_pipelines.search.conversation import NEIGHBOURS_KEY, turn_line, vector_parts
from reflexio_pipelines.search.query import LoadedIndex
from reflexio_pipelines.search.text import embed_search_query, normalize_text
from reflexio_pipelines.search.types import ENTITY_TYPES, SearchFilters

SELF_RETRIEVAL_SAMPLE = 3


@dg.asset_check(asset=search_index, blocking=True, description="Schema, counts, model and self-retrieval.")
def search_index_is_servable(
    context: dg.AssetCheckExecutionContext, lake: LakeResource, embedder: EmbedderResource
) -> dg.AssetCheckResult:
    root = lake.get().index_root
    version = staged_version(context.instance, root, context.run.run_id)
    index = LoadedIndex.load(root, version)
    model = embedder.get()
    problems = index_problems(index, expected_counts(context.instance, root, context.run.run_id), model.model_id)
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
        problems.append(
            f"index vectors come from {index.embedder_model_id}, configured embedder is {embedder_model_id}"
        )
    for entity in ENTITY_TYPES:
        if index.count(entity) != expected.get(entity, 0):
            problems.append(f"{entity}: {index.count(entity)} docs indexed, {expected.get(entity, 0)} expected")
    return problems


def tied_out(
    index: LoadedIndex, entity: str, doc_id: str, text: str, query, top_k: int, filters: SearchFilters
) -> bool:
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
    """Each sampled learned item must be found by its own text (catches misaligned vectors or a broken BM25 leg).

    Several users can hold the very same text (one correction, many users); the cut-off widens by the number of
    identical twins so a tie is not mistaken for a miss. Turns are checked by `turn_vector_problems` instead."""
    problems = []
    # now=0: expired profiles stay in the index (hidden at query time) and must be findable here too.
    everything = SearchFilters(statuses=("current", "pending", "archived", "superseded"), playbook_statuses=None, now=0)
    for entity in ENTITY_TYPES:
        if entity == INTERACTION:
            problems += turn_vector_problems(index, model)
            continue
        for doc_id, text in index.sample(entity, SELF_RETRIEVAL_SAMPLE):
            query = embed_search_query(model, text)
            top_k = 4 + index.text_count(entity, text)
            hits = index.search(entity, text, query, top_k=top_k, threshold=0.0, mode="hybrid", filters=everything)
            if doc_id not in {hit.doc_id for hit in hits} and not tied_out(
                index, entity, doc_id, text, query, top_k, everything
            ):
                problems.append(f"{entity} {doc_id} is not found by its own text")
    return problems


def turn_vector_problems(index: LoadedIndex, model) -> list[str]:
    """Each sampled turn's stored vector must be the one its lines make (its own and its neighbours', embedded now).

    Not self-retrieval: a turn's document holds its neighbours' lines, and under template-like traffic (many users
    saying the same sentences on the same day) other turns' windows can match its text better than its own mixed
    vector does. One sampled turn in three such builds missed its own top-k under steady publishing and blocked the
    version; recomputing the vector catches the misalignment self-retrieval is there for, without ties."""
    problems = []
    for doc_id, _ in index.sample(INTERACTION, SELF_RETRIEVAL_SAMPLE):
        payload = index.payload(INTERACTION, doc_id) or {}
        neighbours = [index.payload(INTERACTION, n) for n in payload.get(NEIGHBOURS_KEY, [])]
        if any(n is None for n in neighbours):
            problems.append(f"{INTERACTION} {doc_id} names a neighbour the version does not hold")
            continue
        parts = vector_parts(turn_line(payload), [turn_line(n) for n in neighbours])
        vectors = l2_normalize(np.asarray(model.embed([normalize_text(text) for text, _ in parts]), dtype=np.float32))
        weights = np.asarray([w for _, w in parts], dtype=np.float32)[:, None]
        expected = l2_normalize((vectors * weights).sum(axis=0, keepdims=True))[0]
        stored = index.vector(INTERACTION, doc_id)
        if stored is None or float(stored @ expected) < 0.99:  # the same model gives the same vector to ~1e-6
            problems.append(f"{INTERACTION} {doc_id}'s vector is not the one its lines make")
    return problems
