"""BM25 over a handful of turns (one user's interactions), built in memory per query.

Turns are not part of the precomputed index (they are many and rarely searched); one user's turns are few enough
that a RAM index per request costs about a millisecond per hundred turns. Text goes through the same
normalisation and stemming as the precomputed index, so a query matches turns the way it matches learned items.
"""

from __future__ import annotations

from typing import Any

from reflexio_pipelines.search.index import BM25_TOKENIZER, normalize_text, query_terms


def rank_turns(rows: list[dict[str, Any]], query: str, limit: int) -> list[dict[str, Any]]:
    """`rows` (newest first) ranked by BM25 of content + action description against `query`; without query
    terms, the first `limit` rows unchanged. Ties keep the input order."""
    terms = query_terms(query)
    if not terms or not rows:
        return rows[:limit]
    import tantivy

    builder = tantivy.SchemaBuilder()
    builder.add_text_field("text", tokenizer_name=BM25_TOKENIZER, index_option="freq")
    builder.add_unsigned_field("row", stored=True, fast=True)
    schema = builder.build()
    index = tantivy.Index(schema)  # no path: in memory
    writer = index.writer(heap_size=15_000_000, num_threads=1)
    for position, row in enumerate(rows):
        text = normalize_text(f"{row.get('content') or ''} {row.get('user_action_description') or ''}")
        document = tantivy.Document()
        document.add_text("text", text)
        document.add_unsigned("row", position)  # the schema's u64 (the keyword constructor sends an i64)
        writer.add_document(document)
    writer.commit()
    writer.wait_merging_threads()
    index.reload()
    searcher = index.searcher()
    query_obj = tantivy.Query.boolean_query(
        [(tantivy.Occur.Should, tantivy.Query.term_query(schema, "text", term)) for term in terms]
    )
    hits = searcher.search(query_obj, limit).hits
    ranked = sorted(((-score, searcher.doc(address)["row"][0]) for score, address in hits))
    return [rows[position] for _, position in ranked]
