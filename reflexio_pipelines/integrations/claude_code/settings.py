"""Reflexio's hooks in a Claude Code settings file (`.claude/settings.json`): install, uninstall, find.

    {"hooks": {"UserPromptSubmit": [{"hooks": [{"type": "command", "command": "<python> -m …hooks context", …}]}],
               "Stop": [...publish...], "SessionEnd": [...publish...]}}

Reflexio's hooks are recognised by the module in their command (HOOK_MODULE), so installing twice leaves one copy,
uninstalling removes exactly them, and every other setting and hook in the file stays as it was.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

HOOK_MODULE = "reflexio_pipelines.integrations.claude_code.hooks"
#: event -> (hook action, timeout in seconds)
EVENTS: dict[str, tuple[str, int]] = {
    "UserPromptSubmit": ("context", 15),
    "Stop": ("publish", 60),
    "SessionEnd": ("publish", 60),
}


class SettingsError(ValueError):
    """The settings file cannot be read as a JSON object (it is left untouched)."""


def hook_command(python: str, action: str, options: Mapping[str, str | None]) -> str:
    """The shell command Claude Code runs: `<python> -m HOOK_MODULE <action> [--option value ...]`."""
    argv = [python, "-m", HOOK_MODULE, action]
    for name, value in options.items():
        if value:
            argv += [f"--{name}", value]
    return shlex.join(argv)


def is_reflexio_hook(hook: Any) -> bool:
    return isinstance(hook, Mapping) and HOOK_MODULE in str(hook.get("command") or "")


def read_settings(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8") or "{}")
    except ValueError as exc:
        raise SettingsError(f"{path} is not valid JSON ({exc}); fix it, then run the command again") from exc
    if not isinstance(data, dict):
        raise SettingsError(f"{path} does not hold a JSON object")
    return data


def _without_reflexio(groups: Any) -> list[Any]:
    """An event's matcher groups without Reflexio's hooks; groups left with no hook are dropped."""
    kept = []
    for group in groups if isinstance(groups, list) else []:
        if isinstance(group, Mapping) and isinstance(group.get("hooks"), list):
            hooks = [h for h in group["hooks"] if not is_reflexio_hook(h)]
            if not hooks:
                continue
            group = {**group, "hooks": hooks}
        kept.append(group)
    return kept


def _has_reflexio(groups: Any) -> bool:
    return any(
        is_reflexio_hook(hook)
        for group in (groups if isinstance(groups, list) else [])
        if isinstance(group, Mapping)
        for hook in (group.get("hooks") or [])
    )


def uninstalled(settings: Mapping[str, Any]) -> dict[str, Any]:
    """`settings` without Reflexio's hooks; an event (and the `hooks` key) that only held them is removed, anything
    else is kept as it was."""
    out = dict(settings)
    if not isinstance(out.get("hooks"), Mapping) or not any(map(_has_reflexio, out["hooks"].values())):
        return out
    hooks = {}
    for event, groups in out["hooks"].items():
        if not _has_reflexio(groups):
            hooks[event] = groups
        elif kept := _without_reflexio(groups):
            hooks[event] = kept
    if hooks:
        out["hooks"] = hooks
    else:
        del out["hooks"]
    return out


def installed(settings: Mapping[str, Any], commands: Mapping[str, str]) -> dict[str, Any]:
    """`settings` with one Reflexio hook per event in `commands` (event -> command), replacing earlier ones."""
    out = dict(settings)
    hooks = dict(out["hooks"]) if isinstance(out.get("hooks"), Mapping) else {}
    for event, command in commands.items():
        timeout = EVENTS[event][1]
        hooks[event] = [
            *_without_reflexio(hooks.get(event)),
            {"hooks": [{"type": "command", "command": command, "timeout": timeout}]},
        ]
    out["hooks"] = hooks
    return out


def reflexio_hooks(settings: Mapping[str, Any]) -> dict[str, list[str]]:
    """event -> the commands of Reflexio's hooks configured for it."""
    found: dict[str, list[str]] = {}
    hooks = settings.get("hooks")
    for event, groups in hooks.items() if isinstance(hooks, Mapping) else []:
        for group in groups if isinstance(groups, list) else []:
            for hook in (group.get("hooks") or []) if isinstance(group, Mapping) else []:
                if is_reflexio_hook(hook):
                    found.setdefault(event, []).append(str(hook["command"]))
    return found


def write_settings(path: Path, settings: Mapping[str, Any]) -> None:
    """Write `settings` (2-space JSON) atomically, creating `.claude/` when needed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.reflexio.tmp")
    temporary.write_text(json.dumps(settings, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    temporary.replace(path)


def commands_for(
    python: str, options: Mapping[str, str | None], events: Sequence[str] = tuple(EVENTS)
) -> dict[str, str]:
    """event -> the hook command for it."""
    return {event: hook_command(python, EVENTS[event][0], options) for event in events}
