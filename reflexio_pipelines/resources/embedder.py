"""The embedder as a Dagster resource: the bundled local model by default, LiteLLM when configured."""

from __future__ import annotations

import dagster as dg

from reflexio_pipelines.learning.embedding import Embedder, make_embedder


class EmbedderResource(dg.ConfigurableResource):
    """`model="local"` is all-MiniLM-L6-v2 (int8 ONNX, 384-d) shipped in a PyPI package; anything else is a
    LiteLLM embedding model name (e.g. `openai/text-embedding-3-small`)."""

    model: str = "local"
    api_base: str = ""
    api_key: str = ""
    api_version: str = ""  # Azure OpenAI's api-version (empty = LiteLLM's default)
    dimensions: int | None = None

    def get(self) -> Embedder:
        """The embedder for this configuration (the local model is loaded once per process)."""
        return make_embedder(
            self.model,
            api_base=self.api_base,
            api_key=self.api_key,
            dimensions=self.dimensions,
            api_version=self.api_version,
        )
