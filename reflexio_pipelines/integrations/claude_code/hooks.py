"""The Claude Code hook commands: `python -m reflexio_pipelines.integrations.claude_code.hooks context|publish`.

Claude Code runs a command hook with the event's JSON on stdin (`session_id`, `transcript_path`, `cwd`,
`hook_event_name`, and `prompt` for UserPromptSubmit) — `reflexio-lake setup claude-code` configures:

- UserPromptSubmit → `context`: searches Reflexio with the prompt and prints
  `{"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": "<reflexio_context>…"}}`, which
  Claude Code adds to what the model sees with the prompt; nothing is printed when nothing was learned.
- Stop (after every response) and SessionEnd → `publish`: publishes the part of the session transcript not published
  yet — the prompts verbatim, the answers with their tool calls and exact tool errors — under the Claude Code
  session id. Where it got to is kept per session in a small state file, and each publish carries an idempotency
  key, so a repeated hook publishes nothing twice.

Both fail open: any failure is one line on stderr and exit status 0, so a prompt or a response is never blocked.
Settings: `--server-url` (else $REFLEXIO_API_URL, else http://127.0.0.1:8081), $REFLEXIO_API_KEY (never written into
settings files), `--user-id` (else $REFLEXIO_USER_ID, else the login name), `--agent-version` (else
$REFLEXIO_AGENT_VERSION, else "claude-code"). State files live in $REFLEXIO_CLAUDE_CODE_STATE_DIR, else
$XDG_STATE_HOME/reflexio-lake/claude-code (~/.local/state/reflexio-lake/claude-code).
"""

from __future__ import annotations

import argparse
import getpass
import hashlib
import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from reflexio_pipelines.integrations.claude_code.transcript import interactions, read_entries
from reflexio_pipelines.sdk import ReflexioClient

SOURCE = "claude-code"
DEFAULT_AGENT_VERSION = "claude-code"
#: Interactions per publish (the service takes up to 1000 per request).
BATCH = 500


def state_dir() -> Path:
    if configured := os.environ.get("REFLEXIO_CLAUDE_CODE_STATE_DIR"):
        return Path(configured)
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "reflexio-lake" / "claude-code"


def _state_file(session_id: str) -> Path:
    return state_dir() / f"{hashlib.sha256(session_id.encode()).hexdigest()[:32]}.json"


def _load_state(session_id: str) -> dict[str, Any]:
    try:
        state = json.loads(_state_file(session_id).read_text())
        return state if isinstance(state, dict) else {}
    except (OSError, ValueError):
        return {}


def _save_state(session_id: str, state: dict[str, Any]) -> None:
    path = _state_file(session_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(state))
    temporary.replace(path)


def user_id(option: str | None) -> str:
    if option:
        return option
    if configured := os.environ.get("REFLEXIO_USER_ID"):
        return configured
    try:
        return getpass.getuser()
    except Exception:  # no login name (containers without a passwd entry)
        return "claude-code-user"


def _client(args: argparse.Namespace, *, prompt: bool = False) -> ReflexioClient:
    """The SDK client; before a prompt one short attempt (the UserPromptSubmit hook's budget is 15 s), after a
    response a retry too."""
    if prompt:
        return ReflexioClient(base_url=args.server_url, timeout=min(args.timeout, 6.0), max_retries=0)
    return ReflexioClient(base_url=args.server_url, timeout=args.timeout, max_retries=1)


def context(payload: Mapping[str, Any], args: argparse.Namespace, out: TextIO) -> None:
    """UserPromptSubmit: the learned context for the prompt, as Claude Code's `additionalContext`."""
    prompt = str(payload.get("prompt") or "").strip()
    if not prompt:
        return
    with _client(args, prompt=True) as client:
        block = client.context(
            prompt[:4096],
            user_id=user_id(args.user_id),
            agent_version=args.agent_version,
            top_k=args.top_k,
            max_chars=args.max_chars,
        )
    if block:
        out.write(
            json.dumps({"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": block}}) + "\n"
        )


def publish(payload: Mapping[str, Any], args: argparse.Namespace, out: TextIO) -> None:
    """Stop / SessionEnd: publish what the transcript gained since the last publish of this session."""
    session_id = str(payload.get("session_id") or "")
    transcript = payload.get("transcript_path")
    if not session_id or not transcript or not Path(str(transcript)).is_file():
        return
    entries = read_entries(str(transcript))
    uuids = [str(e.get("uuid") or "") for e in entries]
    state = _load_state(session_id)
    last = state.get("last_uuid")
    start = uuids.index(last) + 1 if last in uuids else 0
    if start >= len(entries):
        return
    turns = interactions(entries[start:])
    end_uuid = next((u for u in reversed(uuids) if u), str(len(entries)))
    if turns:
        with _client(args) as client:
            for i in range(0, len(turns), BATCH):
                client.publish(
                    user_id(args.user_id),
                    turns[i : i + BATCH],
                    agent_version=args.agent_version,
                    session_id=session_id,
                    source=SOURCE,
                    idempotency_key=f"{SOURCE}:{session_id}:{last or ''}:{end_uuid}:{i}"[:256],
                )
    _save_state(session_id, {"last_uuid": end_uuid, "transcript_path": str(transcript)})


ACTIONS = {"context": context, "publish": publish}


def parser() -> argparse.ArgumentParser:
    cli = argparse.ArgumentParser(
        prog=f"python -m {__name__}", description="Claude Code hook commands for Reflexio (hook JSON on stdin)."
    )
    cli.add_argument("action", choices=sorted(ACTIONS))
    cli.add_argument("--server-url", default=None, help="default: $REFLEXIO_API_URL, else http://127.0.0.1:8081")
    cli.add_argument("--user-id", default=None, help="default: $REFLEXIO_USER_ID, else the login name")
    cli.add_argument("--agent-version", default=os.environ.get("REFLEXIO_AGENT_VERSION") or DEFAULT_AGENT_VERSION)
    cli.add_argument("--top-k", type=int, default=5)
    cli.add_argument("--max-chars", type=int, default=4000)
    cli.add_argument("--timeout", type=float, default=10.0, help="seconds per call to the service")
    return cli


def main(argv: Sequence[str] | None = None, stdin: TextIO | None = None, stdout: TextIO | None = None) -> int:
    """Run one hook; always 0 (a Reflexio problem must never block Claude Code), problems go to stderr."""
    args = parser().parse_args(argv)
    try:
        payload = json.load(stdin or sys.stdin)
        if not isinstance(payload, dict):
            raise ValueError("the hook input is not a JSON object")
        ACTIONS[args.action](payload, args, stdout or sys.stdout)
    except Exception as exc:  # fail open
        print(f"reflexio: {args.action} skipped: {type(exc).__name__}: {exc}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
