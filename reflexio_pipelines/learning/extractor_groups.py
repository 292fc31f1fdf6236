"""Extractor groups: the runtime form of the extraction config, one extraction call per window each, and the
items tagged with the extractor that produced them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from reflexio_pipelines.learning.types import ExtractedPlaybook, ExtractedProfile, Turn


@dataclass(frozen=True)
class ExtractorDefinition:
    """One extractor as a prompt sees it: its name and what it extracts."""

    name: str
    prompt: str


@dataclass
class NamedProfile(ExtractedProfile):
    """A profile tagged with the extractor (definition) that produced it."""

    extractor_name: str = ""


@dataclass
class NamedPlaybook(ExtractedPlaybook):
    """A playbook tagged with the extractor (definition) that produced it."""

    extractor_name: str = ""


@dataclass(frozen=True)
class ExtractorGroup:
    """Extractors sharing one window plan and source filter, so one extraction call per window serves them all."""

    name: str
    batch_size: int
    batch_interval: int
    sources: tuple[str, ...] | None  # None = every source
    profile_extractors: tuple[ExtractorDefinition, ...]
    playbook_extractors: tuple[ExtractorDefinition, ...]
    agent_context: str = ""
    tools: tuple[tuple[str, str], ...] = ()

    def accepts(self, turn: Turn) -> bool:
        """True when the turn's source is one this group reads."""
        return self.sources is None or turn.source in self.sources

    def resolve(self, kind: Literal["profile", "playbook"], requested: Any = None) -> tuple[str | None, bool]:
        """(name of the extractor an item of `kind` belongs to, whether `requested` was usable). An absent name
        (usable) or an unknown one (not usable) falls back to the group's first extractor of that kind; the name is
        None when the group has no extractor of that kind."""
        names = [d.name for d in (self.profile_extractors if kind == "profile" else self.playbook_extractors)]
        if not names:
            return None, False
        if requested is None:
            return names[0], True
        if isinstance(requested, str) and requested.strip() in names:
            return requested.strip(), True
        return names[0], False

    def tag_profile(self, item: ExtractedProfile, requested: Any = None) -> NamedProfile | None:
        """`item` tagged with its extractor, or None when this group extracts no profiles."""
        name, _ = self.resolve("profile", requested)
        return None if name is None else NamedProfile(**_fields(item), extractor_name=name)

    def tag_playbook(self, item: ExtractedPlaybook, requested: Any = None) -> NamedPlaybook | None:
        """`item` tagged with its extractor, or None when this group extracts no playbooks."""
        name, _ = self.resolve("playbook", requested)
        return None if name is None else NamedPlaybook(**_fields(item), extractor_name=name)


def _fields(item: ExtractedProfile | ExtractedPlaybook) -> dict[str, Any]:
    fields = dict(vars(item))
    fields.pop("extractor_name", None)
    return fields
