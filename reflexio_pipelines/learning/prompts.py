"""Versioned prompt files: `reflexio_pipelines/prompts/<prompt_id>/v<semver>.prompt.md`.

Each file starts with a YAML front-matter block (`version`, `description`, `variables`, `changelog`) between `---`
lines, followed by the body. Bodies use `string.Template` placeholders (`$var` / `${var}`, `$$` for a literal
dollar) rather than `str.format`: the original's `str.format` rendering broke on literal JSON braces
and prompts here contain JSON examples. A line consisting of `<!-- user -->` splits the body into the system
message (before) and the user message (after).
"""

from __future__ import annotations

import functools
import re
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

PROMPTS_DIR = Path(__file__).resolve().parent.parent / "prompts"
USER_MARKER = "<!-- user -->"

_FILE_RE = re.compile(r"^v(\d+)\.(\d+)\.(\d+)\.prompt\.md$")
_FRONT_MATTER_RE = re.compile(r"\A---\s*\n(.*?)\n---\s*\n", re.DOTALL)


class PromptError(ValueError):
    """A prompt file is missing or malformed, or rendering lacks a declared variable."""


@dataclass(frozen=True)
class Prompt:
    """One version of a prompt: its body template and the variables it declares."""

    id: str
    version: str
    body: str
    variables: tuple[str, ...]
    description: str = ""
    changelog: tuple[str, ...] = field(default_factory=tuple)

    @property
    def ref(self) -> str:
        """`id@version`, the identifier recorded with every extraction."""
        return f"{self.id}@{self.version}"

    def _values(self, values: dict[str, Any]) -> dict[str, str]:
        missing = [name for name in self.variables if name not in values]
        if missing:
            raise PromptError(f"prompt {self.ref} is missing variable(s): {', '.join(missing)}")
        # None renders as empty text (the original rendered the string "None" into prompts)
        return {name: "" if values[name] is None else str(values[name]) for name in self.variables}

    def render(self, **values: Any) -> str:
        """The whole body with `$var` placeholders substituted (the system/user marker line removed)."""
        system, user = self.render_parts(**values)
        return f"{system}\n\n{user}" if system and user else system or user

    def render_parts(self, **values: Any) -> tuple[str, str]:
        """(system, user) texts; system is empty when the body has no `<!-- user -->` marker."""
        subs = self._values(values)
        system_t, user_t = _split_body(self.body)
        # substitute() is safe here: load_prompt checked every placeholder is declared, and substituted values are
        # never re-scanned, so `$` or braces inside a transcript are inert
        return (
            string.Template(system_t).substitute(subs).strip(),
            string.Template(user_t).substitute(subs).strip(),
        )

    def render_messages(self, **values: Any) -> list[dict[str, str]]:
        """Chat messages: `[system, user]`, or just `[user]` when the body has no marker."""
        system, user = self.render_parts(**values)
        messages = [{"role": "system", "content": system}] if system else []
        messages.append({"role": "user", "content": user})
        return messages


def _split_body(body: str) -> tuple[str, str]:
    lines = body.split("\n")
    for i, line in enumerate(lines):
        if line.strip() == USER_MARKER:
            return "\n".join(lines[:i]), "\n".join(lines[i + 1 :])
    return "", body


def _semver(name: str) -> tuple[int, int, int] | None:
    match = _FILE_RE.match(name)
    return (int(match.group(1)), int(match.group(2)), int(match.group(3))) if match else None


def available_versions(prompt_id: str, prompts_dir: Path = PROMPTS_DIR) -> list[str]:
    """Versions present for `prompt_id`, ascending by semver."""
    directory = prompts_dir / prompt_id
    if not directory.is_dir():
        return []
    found = sorted(v for v in (_semver(p.name) for p in directory.iterdir()) if v is not None)
    return [".".join(map(str, v)) for v in found]


def parse_prompt_file(prompt_id: str, path: Path) -> Prompt:
    """Parse and validate one prompt file (front-matter + body)."""
    text = path.read_text(encoding="utf-8")
    match = _FRONT_MATTER_RE.match(text)
    if not match:
        raise PromptError(f"{path}: missing YAML front-matter")
    try:
        meta = yaml.safe_load(match.group(1)) or {}
    except yaml.YAMLError as exc:
        raise PromptError(f"{path}: invalid front-matter: {exc}") from exc
    if not isinstance(meta, dict):
        raise PromptError(f"{path}: front-matter must be a mapping")
    file_version = ".".join(map(str, _semver(path.name) or ()))
    version = str(meta.get("version", file_version))
    if version != file_version:
        raise PromptError(f"{path}: front-matter version {version} does not match the file name")
    variables = tuple(str(v) for v in meta.get("variables") or ())
    body = text[match.end() :]
    if not string.Template(body).is_valid():
        raise PromptError(f"{path}: invalid placeholder in body; write $$ for a literal dollar")
    used = {name for part in _split_body(body) for name in string.Template(part).get_identifiers()}
    undeclared = sorted(used - set(variables))
    if undeclared:
        raise PromptError(f"{path}: body uses undeclared variable(s): {', '.join(undeclared)}")
    changelog = meta.get("changelog") or ()
    return Prompt(
        id=prompt_id,
        version=version,
        body=body,
        variables=variables,
        description=str(meta.get("description", "")),
        changelog=tuple(str(c) for c in (changelog if isinstance(changelog, list) else [changelog])),
    )


@functools.lru_cache(maxsize=64)
def _load_cached(prompt_id: str, version: str, prompts_dir: Path) -> Prompt:
    return parse_prompt_file(prompt_id, prompts_dir / prompt_id / f"v{version}.prompt.md")


def load_prompt(prompt_id: str, version: str | None = None, prompts_dir: Path = PROMPTS_DIR) -> Prompt:
    """The requested version of a prompt, or its highest semver when `version` is None."""
    versions = available_versions(prompt_id, prompts_dir)
    if not versions:
        raise PromptError(f"no prompt named {prompt_id!r} in {prompts_dir}")
    wanted = version.removeprefix("v") if version else versions[-1]
    if wanted not in versions:
        raise PromptError(f"prompt {prompt_id!r} has no version {wanted} (available: {', '.join(versions)})")
    return _load_cached(prompt_id, wanted, prompts_dir)
