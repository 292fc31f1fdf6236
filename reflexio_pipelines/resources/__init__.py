"""Dagster resources: configured handles on the lake, the extractor (LLM or built-in) and the embedder."""

from reflexio_pipelines.resources.embedder import EmbedderResource
from reflexio_pipelines.resources.extractor import ExtractorResource
from reflexio_pipelines.resources.lake import LakeResource

__all__ = ["EmbedderResource", "ExtractorResource", "LakeResource"]
