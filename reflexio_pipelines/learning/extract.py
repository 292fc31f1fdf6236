"""The extractor interface and the factory that picks an implementation from settings."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from reflexio_pipelines.learning.builtin import EXTRACTOR_NAME as BUILTIN_NAME
from reflexio_pipelines.learning.builtin import MODEL_NAME as BUILTIN_MODEL
from reflexio_pipelines.learning.builtin import BuiltinExtractor
from reflexio_pipelines.learning.clauses.classifier import shared_classifier
from reflexio_pipelines.learning.extractor_groups import ExtractorGroup
from reflexio_pipelines.learning.jsonparse import LLMOutputError
from reflexio_pipelines.learning.llm_call import LLMEndpoint
from reflexio_pipelines.learning.llm_extract import ExtractionFailed, LiteLLMExtractor
from reflexio_pipelines.learning.rules.extractor import EXTRACTOR_NAME as RULE_NAME
from reflexio_pipelines.learning.rules.extractor import RuleExtractor
from reflexio_pipelines.learning.types import ExtractionResult, Window
from reflexio_pipelines.settings import LLMSettings

__all__ = ["BuiltinExtractor", "ExtractionFailed", "Extractor", "LLMOutputError", "LiteLLMExtractor", "make_extractor"]


def describe_extractor(llm_settings: LLMSettings) -> dict[str, object]:
    """What extracts under these settings, as the dashboard and `get_config` name it: the extractor, what kind of
    thing it is, and for the learned built-in its measured precision and recall on the lasting kinds of its
    development split (from the shipped head's metadata, never recomputed here)."""
    if llm_settings.model.strip():
        return {"name": "litellm", "model": llm_settings.model, "kind": "LLM", "precision": None, "recall": None}
    if llm_settings.builtin == "rules":
        return {"name": RULE_NAME, "model": "builtin", "kind": "heuristic (rules)", "precision": None, "recall": None}
    dev = shared_classifier().head.meta.get("dev", {}).get("lasting", {})  # the head is read once per process
    return {
        "name": BUILTIN_NAME,
        "model": BUILTIN_MODEL,
        "kind": "learned heuristic",
        "precision": dev.get("precision"),
        "recall": dev.get("recall"),
    }


@runtime_checkable
class Extractor(Protocol):
    """Turns one window of one user's turns into profiles and playbooks for one extractor group.

    Implementations must be deterministic for a given window where they can be (the builtin always is; an LLM at
    temperature 0 mostly is) and raise `ExtractionFailed` rather than return partial results. Items should be
    tagged with the group extractor that produced them (`NamedProfile` / `NamedPlaybook`); untagged items are
    attributed to the group's first extractor of their kind. A request to forget something about the user is
    reported as a `ForgetDirective` (`result.forget`), never as a profile or a playbook.
    """

    name: str

    def extract(self, window: Window, group: ExtractorGroup | None = None) -> ExtractionResult:
        """Profiles and playbooks found in `window` under the group's definitions (None = the default config's
        group); the group also carries the agent context and tools."""
        ...


def make_extractor(llm_settings: LLMSettings) -> BuiltinExtractor | RuleExtractor | LiteLLMExtractor:
    """The built-in extractor when no model is configured (the learned one, or the rule baseline when
    `llm.builtin` is "rules"), else a LiteLLM extractor on the endpoint of these settings (every setting reaches
    every call; the gate model shares them)."""
    if not llm_settings.model.strip():
        return RuleExtractor() if llm_settings.builtin == "rules" else BuiltinExtractor()
    return LiteLLMExtractor(endpoint=LLMEndpoint.from_settings(llm_settings), gate_model=llm_settings.gate_model)
