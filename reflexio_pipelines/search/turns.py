"""BM25 over a handful of texts, built in memory per query: the turns published since the served index version
took in turns (serving/recent_turns.py), few by construction.

Text goes through the same normalisation and stemming as the precomputed index, so a query matches these turns the
way it matches indexed ones.
"""

from __future__ import annotations

from collections.abc import Sequence

from reflexio_pipelines.search.text import BM25_TOKENIZER, normalize_text, query_terms


def rank_texts(texts: Sequence[str], query: str, limit: int) -> list[int]:
    """Positions of the `limit` texts best matching `query` by BM25, best first (ties: lower position first);
    [] without query terms."""
    terms = query_terms(query)
    if not terms or not texts:
        return []
    import tantivy

    builder = tantivy.SchemaBuilder()
    builder.add_text_field("text", tokenizer_name=BM25_TOKENIZER, index_option="freq")
    builder.add_unsigned_field("row", stored=True, fast=True)
    schema = builder.build()
    index = tantivy.Index(schema)  # no path: in memory
    writer = index.writer(heap_size=15_000_000, num_threads=1)
    for position, text in enumerate(texts):
        document = tantivy.Document()
        document.add_text("text", normalize_text(text))
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
    return [position for _, position in sorted((-score, searcher.doc(address)["row"][0]) for score, address in hits)]
