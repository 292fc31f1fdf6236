"""The pipeline extracts through the real `litellm.completion` against an OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.runs import launch
from reflexio_pipelines.search.query import LoadedIndex
from reflexio_pipelines.search.types import IndexModelMismatch, SearchFilters
from reflexio_pipelines.settings import EmbedderSettings, LLMSettings, Settings
from tests.support.embedding_stub import make_embedding_app
from tests.support.openai_stub import StubBehaviour, make_openai_stub
from tests.support.servers import serve_app

SECRET = "sk-test-do-not-leak-0123456789"


def _all_bytes_under(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in root.rglob("*") if p.is_file())


@pytest.mark.parametrize(
    ("behaviour", "failed_calls"),
    [(StubBehaviour(), 0), (StubBehaviour(error_first=1, garbage_first=2), 2)],  # call 1: HTTP 500, call 2: garbage
)
def test_pipeline_learns_through_litellm(lake: Lake, instance, landed, monkeypatch, behaviour, failed_calls):
    monkeypatch.setenv("REFLEXIO_LLM_API_KEY", SECRET)
    stub = make_openai_stub(behaviour)
    with serve_app(stub) as base_url:
        settings = Settings(
            lake=str(lake.root),
            llm=LLMSettings(model="openai/stub-extractor", api_base=f"{base_url}/v1", max_retries=3),
        )
        result = launch(settings=settings, instance=instance)
    assert result.index_version
    requests = stub.state.requests
    # one chat call per user window (four users, each with fewer turns than one window), plus the retried faults
    assert len(requests) == 4 + failed_calls
    assert all(r["authorization"] == f"Bearer {SECRET}" for r in requests)
    playbooks = lake.read_table("user_playbooks").to_pylist()
    correction = [p for p in playbooks if "us-west-2" in p["content"]]
    assert len(correction) == 1
    assert correction[0]["extractor"] == "litellm" and correction[0]["model"] == "openai/stub-extractor"
    assert correction[0]["prompt_version"].startswith("extraction@")
    assert any(p["user_id"] == "bob" for p in lake.read_table("user_profiles").to_pylist())
    index = LoadedIndex.load(lake.index_root)
    hits = index.search(
        "user_playbook", "us-west-2", None, top_k=3, threshold=0.0, mode="fts", filters=SearchFilters(user_id="alice")
    )
    assert hits and hits[0].payload["provenance"]["extractor"] == "litellm"
    assert SECRET.encode() not in _all_bytes_under(lake.root)


def test_index_built_with_a_litellm_embedder_records_its_model(lake: Lake, instance, landed):
    embed_stub = make_embedding_app(default_dim=32)
    with serve_app(embed_stub) as base_url:
        settings = Settings(
            lake=str(lake.root),
            embedder=EmbedderSettings(model="openai/stub-embed", api_base=f"{base_url}/v1", api_key="x"),
        )
        result = launch(settings=settings, instance=instance)
    index = LoadedIndex.load(lake.index_root)
    assert result.index_version == index.version
    assert index.embedder_model_id == "litellm:openai/stub-embed" and index.dim == 32
    assert embed_stub.state.requests, "document vectors came from the configured provider"
    # a query vector from another model is refused rather than compared with these vectors
    with pytest.raises(IndexModelMismatch):
        index.search(
            "user_playbook",
            "deploy",
            np.ones(384, dtype=np.float32) / np.sqrt(384),
            top_k=3,
            threshold=0.0,
            mode="vector",
            filters=SearchFilters(),
        )
