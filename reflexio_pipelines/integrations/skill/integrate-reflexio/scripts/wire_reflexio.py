#!/usr/bin/env python3
"""Wire Reflexio into a simple Python agent: learned context goes into the system prompt before the model call, and
the finished turn is published when the handler returns.

    python wire_reflexio.py PATH [--agent-version NAME] [--function NAME] [--dry-run]

For every turn handler `inspect_agent.py` finds that is wireable — a function with one model call whose
conversation argument it can see, a parameter carrying the user's message, and `return <reply>` statements — it
makes three textual edits (the rest of the file, comments and formatting included, stays as it was):

1. after the module's imports: `from reflexio_pipelines.integrations.wiring import ReflexioHooks` and
   `_reflexio = ReflexioHooks(agent_version=...)`;
2. the model call's conversation argument `X` becomes `_reflexio.inject(X, <message>, user_id=<user id>)`
   (for anthropic, whose system prompt is an argument of its own: `system=_reflexio.system(X, <message>, …)`);
3. each `return Y` becomes `return _reflexio.after_turn(<user id>, <message>, Y)` (publishes, returns Y unchanged;
   `session_id=<param>` is added when the handler has a conversation-id parameter).

Idempotent: what is already wired is left alone, so a second run changes nothing. Before writing, the original
is saved as `<file>.bak` and a unified diff is printed; the new source must parse, or nothing is written.
Handlers it cannot wire (loops, no message parameter, anthropic calls without `system=`) are listed with the
reason, for wiring by hand as SKILL.md describes.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from inspect_agent import WIRING_MODULE, python_files, scan_source  # noqa: E402

HOOKS = "_reflexio"
IMPORT_LINE = f"from {WIRING_MODULE} import ReflexioHooks  # reflexio: wired by integrate-reflexio\n"


def _is_hook_call(node: ast.AST, method: str) -> bool:
    """`node` is already `_reflexio.<method>(...)`."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == method
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == HOOKS
    )


def _line_starts(data: bytes) -> list[int]:
    starts, offset = [0], 0
    for line in data.splitlines(keepends=True):
        offset += len(line)
        starts.append(offset)
    return starts


def _span(node: ast.AST, starts: list[int]) -> tuple[int, int]:
    # ast offsets are UTF-8 byte columns, so edits are made on the encoded source
    return starts[node.lineno - 1] + node.col_offset, starts[node.end_lineno - 1] + node.end_col_offset


def _header_end(tree: ast.Module) -> int:
    """The line after which the wiring lines go: after the last top-level import of the leading import block
    (or after the module docstring)."""
    end = 0
    for index, node in enumerate(tree.body):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            end = node.end_lineno
        elif index == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            end = node.end_lineno
        else:
            break
    return end


#: An edit: wrap the source bytes [start, end) in prefix ... suffix (start == end: a plain insertion).
Wrap = tuple[int, int, str, str]


def plan(source: str, path: str, agent_version: str, only: str | None) -> tuple[list[Wrap], list[str]]:
    """The wraps that wire `source`, and the handlers skipped with their reasons. Wraps may nest (a model call
    inside a returned expression), which is why they are wraps and not replacements."""
    found = scan_source(source, path)
    starts = _line_starts(source.encode("utf-8"))
    edits: list[Wrap] = []
    skipped: list[str] = []
    wireable = 0
    calls_by_function: dict[str, list[dict[str, Any]]] = {}
    for call in found["llm_calls"]:
        calls_by_function.setdefault(call["function"], []).append(call)
    for handler in found["turn_handlers"]:
        name = handler["function"]
        if only and name != only:
            continue
        calls = calls_by_function[name]
        reason = None
        if handler["loop_agent"] or not handler["_returns"]:
            reason = "the turn does not end with `return <reply>` (a loop agent)"
        elif handler["message_param"] is None:
            reason = "no parameter carries the user's message"
        elif len(calls) != 1 or calls[0]["_arg"] is None:
            reason = "not exactly one model call with a visible conversation (anthropic: system=) argument"
        if reason:
            skipped.append(f"{path}:{handler['line']} {name}: {reason}")
            continue
        wireable += 1
        message, user = handler["message_param"], handler["user_id_param"]
        user_kw = f", user_id={user}" if user else ""
        session_kw = f", session_id={handler['session_param']}" if handler["session_param"] else ""
        arg = calls[0]["_arg"]
        method = "system" if calls[0]["context_arg"]["keyword"] == "system" else "inject"
        if not _is_hook_call(arg, method):
            edits.append((*_span(arg, starts), f"{HOOKS}.{method}(", f", {message}{user_kw})"))
        for ret in handler["_returns"]:
            if not _is_hook_call(ret.value, "after_turn"):
                edits.append(
                    (*_span(ret.value, starts), f"{HOOKS}.after_turn({user or 'None'}, {message}, ", f"{session_kw})")
                )
    if wireable and not found["reflexio_wired"]:
        at = starts[_header_end(found["_tree"])]
        setup = (
            f"\n{IMPORT_LINE}\n{HOOKS} = ReflexioHooks(agent_version={json.dumps(agent_version)})"
            "  # reflexio: learned context in, finished turns out\n"
        )
        edits.append((at, at, setup, ""))
    return edits, skipped


def apply(source: str, edits: list[Wrap]) -> str:
    """`source` with the wraps made. At one position, closing text comes before opening text, inner closings
    before outer ones and outer openings before inner ones, so nested wraps stay balanced."""
    data = source.encode("utf-8")
    inserts = []
    for start, end, prefix, suffix in edits:
        size = end - start
        inserts += [(end, 0, size, suffix), (start, 1, -size, prefix)]
    out, last = [], 0
    for pos, _, _, text in sorted(inserts, key=lambda i: i[:3]):
        out += [data[last:pos], text.encode("utf-8")]
        last = pos
    out.append(data[last:])
    return b"".join(out).decode("utf-8")


def wire_file(path: Path, agent_version: str, only: str | None, dry_run: bool) -> tuple[bool, list[str]]:
    """Wire one file; returns (changed, skipped-handler notes). Prints the diff of a change."""
    source = path.read_text(encoding="utf-8")
    edits, skipped = plan(source, str(path), agent_version, only)
    if not edits:
        return False, skipped
    wired = apply(source, edits)
    ast.parse(wired, filename=str(path))  # never write a file that no longer parses
    sys.stdout.writelines(
        difflib.unified_diff(
            source.splitlines(keepends=True), wired.splitlines(keepends=True), f"{path} (before)", f"{path} (wired)"
        )
    )
    if not dry_run:
        path.with_name(path.name + ".bak").write_text(source, encoding="utf-8")
        path.write_text(wired, encoding="utf-8")
    return True, skipped


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", type=Path, help="agent project directory or file")
    parser.add_argument("--agent-version", help="agent version published with each turn (default: project name)")
    parser.add_argument("--function", help="wire only this handler (qualified name, e.g. Bot.reply)")
    parser.add_argument("--dry-run", action="store_true", help="print the diff, write nothing")
    args = parser.parse_args(argv)
    root = args.path.resolve()
    agent_version = args.agent_version or (root.parent.name if root.is_file() else root.name)
    changed, notes = [], []
    for path in python_files([args.path]):
        try:
            did, skipped = wire_file(path, agent_version, args.function, args.dry_run)
        except (SyntaxError, UnicodeDecodeError) as exc:
            notes.append(f"{path}: not wired ({type(exc).__name__}: {exc})")
            continue
        notes += skipped
        if did:
            changed.append(str(path))
    for note in notes:
        print(f"needs wiring by hand: {note}", file=sys.stderr)
    verb = "would wire" if args.dry_run else "wired"
    print(
        f"{verb}: {', '.join(changed)}" if changed else "nothing to change (already wired, or nothing wireable)",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
