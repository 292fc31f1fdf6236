#!/usr/bin/env python3
"""Find where an agent calls its model and where a turn is handled: for Python a static scan with `ast`, for
TypeScript / JavaScript a scan of the source text (nothing in the project is imported or run). Prints a JSON report;
`wire_reflexio.py` acts on the Python findings, TypeScript / Node agents are wired by hand with `reflexio.mjs`.

    python inspect_agent.py PATH [PATH ...]      # files or directories (virtualenvs, caches and tests skipped)

Model calls recognised:
- openai:    `<x>.chat.completions.create(...)`, `<x>.responses.create(...)` (and their awaits)
- anthropic: `<x>.messages.create(...)` / `<x>.messages.stream(...)`
- litellm:   `litellm.completion(...)` / `acompletion`, or `completion(...)` imported from litellm
- langchain: `.invoke/.ainvoke/.stream/.astream/.batch` on a name bound to a `Chat*` / `*LLM` class from a
             langchain package, or on a receiver named like a model (`llm`, `model`, `chat_model`, `self.llm`, …)
- injected:  a call of a function parameter named like a model (`llm`, `model`, `complete`, `generate`, …)

For each model call the report names the argument the learned context goes into (`context_arg`): the conversation
(`messages=` / `input=` / `prompt=` or the first positional argument), or for anthropic the `system=` prompt.

A turn handler is the function containing a model call. For each one the report names the parameters carrying the
user's message, the user id and the conversation id (by name), its return statements (where the turn ends), and
whether the model call sits in a loop inside it (a REPL-style agent, whose turn ends at the end of the loop body).
TypeScript / JavaScript (`.ts .tsx .mts .cts .js .jsx .mjs .cjs`, node_modules and build output skipped):
`node_projects` lists each package.json with the agent frameworks it depends on, `js_llm_calls` each model call —
openai (`.chat.completions.create`, `.responses.create`), anthropic (`.messages.create` / `.stream`), the Vercel AI
SDK (`generateText`, `streamText`, `generateObject`, `streamObject`), LangChain.js (`.invoke` / `.stream` on a
receiver named like a model) and `fetch` to a `/chat/completions` or `/v1/messages` URL — with the line, the
enclosing function (best effort) and the argument the learned context goes into.

Standard library only, so it runs in the agent project's own Python environment.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from pathlib import Path
from typing import Any

SKIP_DIRS = {
    ".git",
    ".venv",
    "venv",
    "env",
    "node_modules",
    "__pycache__",
    "site-packages",
    "build",
    "dist",
    ".tox",
    ".mypy_cache",
    ".pytest_cache",
    "tests",
    "test",
}
MODEL_NAME = re.compile(
    r"^(llm|model|chat|chat_model|chat_llm|client_llm|complete|completion|generate|call_llm|"
    r"call_model|ask_llm|ask_model|query_llm|run_llm|lm)$",
    re.IGNORECASE,
)
MODEL_RECEIVER = re.compile(r"(^|_)(llm|model|chat|chain|agent)(_|$)", re.IGNORECASE)
LANGCHAIN_METHODS = {"invoke", "ainvoke", "stream", "astream", "batch", "abatch"}
MESSAGE_PARAMS = (
    "message",
    "user_message",
    "user_input",
    "user_msg",
    "msg",
    "query",
    "question",
    "prompt",
    "text",
    "input_text",
    "utterance",
    "request",
)
USER_PARAMS = ("user_id", "user", "uid", "username", "customer_id", "account_id")
SESSION_PARAMS = ("session_id", "conversation_id", "thread_id", "chat_id")
MESSAGES_KEYWORDS = ("messages", "input", "prompt")
WIRING_MODULE = "reflexio_pipelines.integrations.wiring"


def dotted(node: ast.AST) -> str | None:
    """`a.b.c` for a Name/Attribute chain, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def call_name(func: ast.AST) -> str:
    """The dotted name of a called expression, reading through constructor calls in the chain:
    `OpenAI().chat.completions.create` -> "OpenAI.chat.completions.create"; "" when there is no name."""
    parts = []
    while True:
        if isinstance(func, ast.Attribute):
            parts.append(func.attr)
            func = func.value
        elif isinstance(func, ast.Call):
            func = func.func
        else:
            if isinstance(func, ast.Name):
                parts.append(func.id)
            return ".".join(reversed(parts))


def _langchain_bound(tree: ast.Module) -> set[str]:
    """Names assigned from calls of model classes (`Chat*`, `*LLM`) imported from langchain packages."""
    classes = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("langchain")
        for alias in node.names
        if alias.name.startswith("Chat") or alias.name.endswith("LLM")
    }
    bound = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            if call_name(node.value.func).split(".")[-1] in classes:
                bound.update(d for d in (dotted(t) for t in node.targets) if d)
    return bound


def _litellm_names(tree: ast.Module) -> set[str]:
    return {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "litellm"
        for alias in node.names
        if alias.name in {"completion", "acompletion"}
    }


def classify(call: ast.Call, params: set[str], lc_bound: set[str], litellm_names: set[str]) -> str | None:
    """The kind of model call `call` is, or None when it is not one."""
    name = call_name(call.func)
    parts = name.split(".")
    if name.endswith("chat.completions.create") or name.endswith("responses.create"):
        return "openai"
    if len(parts) >= 2 and parts[-2] == "messages" and parts[-1] in {"create", "stream"}:
        return "anthropic"
    if parts[0] == "litellm" and parts[-1] in {"completion", "acompletion"} or name in litellm_names:
        return "litellm"
    if len(parts) >= 2 and parts[-1] in LANGCHAIN_METHODS:
        receiver = ".".join(parts[:-1])
        if receiver in lc_bound or MODEL_RECEIVER.search(parts[-2]):
            return "langchain"
    if isinstance(call.func, ast.Name) and call.func.id in params and MODEL_NAME.match(call.func.id):
        return "injected"
    return None


def context_argument(call: ast.Call, kind: str) -> dict[str, Any] | None:
    """Where learned context can go into the call: anthropic's `system=` prompt (its messages take no system
    role); else the conversation — the `messages`/`input`/`prompt` keyword, or the first positional argument."""
    wanted = ("system",) if kind == "anthropic" else MESSAGES_KEYWORDS
    for keyword in call.keywords:
        if keyword.arg in wanted:
            return {"how": "keyword", "keyword": keyword.arg, "node": keyword.value}
    if call.args and kind != "anthropic":
        return {"how": "positional", "keyword": None, "node": call.args[0]}
    return None


def _own_nodes(func: ast.AST) -> list[ast.AST]:
    """Nodes of `func`'s body, not descending into nested functions, lambdas or classes."""
    out, stack = [], list(ast.iter_child_nodes(func))
    while stack:
        node = stack.pop()
        out.append(node)
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(node))
    return out


def _in_loop(func: ast.AST, target: ast.AST) -> bool:
    for node in _own_nodes(func):
        if isinstance(node, (ast.For, ast.AsyncFor, ast.While)) and any(n is target for n in ast.walk(node)):
            return True
    return False


def _pick(params: list[str], candidates: tuple[str, ...]) -> str | None:
    return next((c for c in candidates if c in params), None)


def scan_source(source: str, path: str) -> dict[str, Any]:
    """Findings for one module's source: model calls and turn handlers; `_`-prefixed keys hold the AST nodes
    `wire_reflexio.py` edits (a call's context argument, a handler's return statements) and the module tree."""
    tree = ast.parse(source, filename=path)
    lc_bound = _langchain_bound(tree)
    litellm_names = _litellm_names(tree)
    wired = any(isinstance(node, ast.ImportFrom) and node.module == WIRING_MODULE for node in ast.walk(tree))
    calls, handlers = [], []

    def examine(owner: ast.AST, qualname: str, params: list[str]) -> None:
        own = _own_nodes(owner)
        found = []
        for sub in own:
            if isinstance(sub, ast.Call) and (kind := classify(sub, set(params), lc_bound, litellm_names)):
                arg = context_argument(sub, kind)
                found.append(
                    {
                        "file": path,
                        "line": sub.lineno,
                        "end_line": sub.end_lineno,
                        "function": qualname,
                        "kind": kind,
                        "callee": call_name(sub.func),
                        "context_arg": None
                        if arg is None
                        else {
                            "how": arg["how"],
                            "keyword": arg["keyword"],
                            "source": ast.get_source_segment(source, arg["node"]),
                        },
                        "in_loop": _in_loop(owner, sub),
                        "_arg": None if arg is None else arg["node"],
                    }
                )
        if not found:
            return
        found.sort(key=lambda c: c["line"])
        calls.extend(found)
        returns = [r for r in own if isinstance(r, ast.Return) and r.value is not None]
        handlers.append(
            {
                "file": path,
                "function": qualname,
                "line": getattr(owner, "lineno", 1),
                "end_line": getattr(owner, "end_lineno", None),
                "async": isinstance(owner, ast.AsyncFunctionDef),
                "params": params,
                "message_param": _pick(params, MESSAGE_PARAMS),
                "user_id_param": _pick(params, USER_PARAMS),
                "session_param": _pick(params, SESSION_PARAMS),
                "llm_call_lines": [c["line"] for c in found],
                "returns": [
                    {"line": r.lineno, "source": ast.get_source_segment(source, r.value)}
                    for r in sorted(returns, key=lambda r: r.lineno)
                ],
                "loop_agent": any(c["in_loop"] for c in found),
                "_returns": returns,
            }
        )

    def visit(scope: list[str], owner: ast.AST) -> None:
        # definitions anywhere in this scope's body (also under if/try/with), in source order
        nodes = [n for n in _own_nodes(owner) if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))]
        for node in sorted(nodes, key=lambda n: (n.lineno, n.col_offset)):
            if isinstance(node, ast.ClassDef):
                visit([*scope, node.name], node)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                params = [a.arg for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)]
                examine(node, ".".join([*scope, node.name]), params)
                visit([*scope, node.name], node)

    examine(tree, "<module>", [])  # script-style agents call the model at module level
    visit([], tree)
    return {"file": path, "reflexio_wired": wired, "llm_calls": calls, "turn_handlers": handlers, "_tree": tree}


def python_files(paths: list[Path]) -> list[Path]:
    """The .py files under `paths`, skipping virtualenvs, caches, build output and tests."""
    files = []
    for root in paths:
        if root.is_file():
            if root.suffix == ".py":
                files.append(root)
            continue
        for path in sorted(root.rglob("*.py")):
            if not SKIP_DIRS.intersection(part for part in path.relative_to(root).parts[:-1]):
                files.append(path)
    return files


# --- TypeScript / JavaScript ---------------------------------------------------------------------------------------

JS_SUFFIXES = {".ts", ".tsx", ".mts", ".cts", ".js", ".jsx", ".mjs", ".cjs"}
JS_SKIP_DIRS = SKIP_DIRS | {"node_modules", ".next", ".turbo", "out", "coverage", "__tests__"}
#: (kind, pattern, the argument the learned context goes into)
JS_CALLS = (
    ("openai", re.compile(r"\.chat\.completions\.(?:create|stream|parse)\s*\("), "messages (the system message)"),
    ("openai", re.compile(r"\.responses\.(?:create|stream)\s*\("), "instructions"),
    ("anthropic", re.compile(r"\.messages\.(?:create|stream)\s*\("), "system"),
    ("ai-sdk", re.compile(r"\b(?:generateText|streamText|generateObject|streamObject)\s*\("), "system"),
    (
        "langchain",
        re.compile(
            r"\b(?:llm|model|chat|chatModel|chat_model|this\.llm|this\.model)\s*\.\s*"
            r"(?:invoke|stream|batch)\s*\("
        ),
        "messages (the system message)",
    ),
    ("fetch", re.compile(r"\bfetch\s*\([^;]*?(?:/chat/completions|/v1/messages)"), "messages (the system message)"),
)
JS_FUNCTION = re.compile(
    r"(?:function\s*\*?\s*([A-Za-z_$][\w$]*)\s*\(|"  # function name(
    r"(?:const|let|var)\s+([A-Za-z_$][\w$]*)\s*=\s*(?:async\s*)?(?:function\b|\([^)]*\)\s*=>|[A-Za-z_$][\w$]*\s*=>)|"
    r"^\s*(?:public\s+|private\s+|protected\s+|static\s+)*(?:async\s+)?([A-Za-z_$][\w$]*)\s*\([^)]*\)\s*(?::[^{]*)?\{)",
    re.M,
)
JS_FRAMEWORKS = (
    "openai",
    "@anthropic-ai/sdk",
    "ai",
    "@ai-sdk/openai",
    "@ai-sdk/anthropic",
    "langchain",
    "@langchain/core",
    "@langchain/openai",
    "@langchain/anthropic",
    "@langchain/langgraph",
    "@openai/agents",
    "@mastra/core",
    "openclaw",
)
JS_KEYWORDS = {"if", "for", "while", "switch", "catch", "return", "function", "await", "typeof", "new"}


def js_files(paths: list[Path]) -> list[Path]:
    """The TypeScript / JavaScript sources under `paths` (no declaration files, dependencies or build output)."""
    files = []
    for root in paths:
        candidates = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
        for path in candidates:
            if path.suffix not in JS_SUFFIXES or path.name.endswith((".d.ts", ".d.mts", ".d.cts")):
                continue
            parts = path.relative_to(root).parts[:-1] if root.is_dir() else ()
            if not JS_SKIP_DIRS.intersection(parts):
                files.append(path)
    return files


def _enclosing_function(source: str, offset: int) -> str | None:
    """The name of the last function defined before `offset` (best effort, by text)."""
    names = [next(n for n in m.groups() if n) for m in JS_FUNCTION.finditer(source, 0, offset)]
    names = [n for n in names if n not in JS_KEYWORDS]
    return names[-1] if names else None


def scan_js(source: str, path: str) -> list[dict[str, Any]]:
    calls = []
    for kind, pattern, context_arg in JS_CALLS:
        for match in pattern.finditer(source):
            calls.append(
                {
                    "file": path,
                    "line": source.count("\n", 0, match.start()) + 1,
                    "kind": kind,
                    "call": match.group(0).strip().rstrip("(").strip(),
                    "context_arg": context_arg,
                    "function": _enclosing_function(source, match.start()),
                }
            )
    return sorted(calls, key=lambda c: c["line"])


def node_projects(paths: list[Path]) -> list[dict[str, Any]]:
    """Each package.json under `paths` (not in node_modules) with the agent frameworks it depends on."""
    found = []
    for root in paths:
        manifests = [root / "package.json"] if root.is_dir() else []
        if root.is_dir():
            manifests += [
                p
                for p in sorted(root.rglob("package.json"))
                if p != root / "package.json" and not JS_SKIP_DIRS.intersection(p.relative_to(root).parts)
            ]
        for manifest in manifests:
            if not manifest.is_file():
                continue
            try:
                data = json.loads(manifest.read_text(encoding="utf-8"))
            except (ValueError, UnicodeDecodeError):
                continue
            deps = {**data.get("dependencies", {}), **data.get("devDependencies", {})}
            found.append(
                {
                    "dir": str(manifest.parent),
                    "package": data.get("name"),
                    "module_type": data.get("type", "commonjs"),
                    "frameworks": [name for name in JS_FRAMEWORKS if name in deps],
                }
            )
    return found


def public(finding: dict[str, Any]) -> dict[str, Any]:
    """A finding without its AST nodes (the `_`-prefixed keys), for JSON."""
    return {
        k: [public(i) if isinstance(i, dict) else i for i in v] if isinstance(v, list) else v
        for k, v in finding.items()
        if not k.startswith("_")
    }


def inspect_paths(paths: list[Path]) -> dict[str, Any]:
    """The JSON-ready report for `paths`."""
    report: dict[str, Any] = {
        "files_scanned": 0,
        "llm_calls": [],
        "turn_handlers": [],
        "wired_files": [],
        "errors": [],
        "next_steps": [],
    }
    for path in python_files(paths):
        report["files_scanned"] += 1
        try:
            found = scan_source(path.read_text(encoding="utf-8"), str(path))
        except (SyntaxError, UnicodeDecodeError) as exc:
            report["errors"].append({"file": str(path), "error": f"{type(exc).__name__}: {exc}"})
            continue
        report["llm_calls"] += [public(c) for c in found["llm_calls"]]
        report["turn_handlers"] += [public(h) for h in found["turn_handlers"]]
        if found["reflexio_wired"]:
            report["wired_files"].append(str(path))
    for handler in report["turn_handlers"]:
        where = f"{handler['file']}:{handler['line']} {handler['function']}"
        if handler["loop_agent"] or not handler["returns"]:
            report["next_steps"].append(f"{where}: the turn ends inside a loop; publish at the end of the loop body")
        elif handler["message_param"] is None:
            report["next_steps"].append(f"{where}: no parameter carries the user's message; wire it by hand")
        else:
            report["next_steps"].append(f"{where}: wireable with wire_reflexio.py")
    report["node_projects"] = node_projects(paths)
    report["js_llm_calls"] = []
    for path in js_files(paths):
        report["files_scanned"] += 1
        try:
            report["js_llm_calls"] += scan_js(path.read_text(encoding="utf-8"), str(path))
        except UnicodeDecodeError as exc:
            report["errors"].append({"file": str(path), "error": f"{type(exc).__name__}: {exc}"})
    if any("openclaw" in p["frameworks"] for p in report["node_projects"]):
        report["next_steps"].append(
            "an OpenClaw agent: install the Reflexio OpenClaw plugin instead of wiring code "
            "(docs/integrations.md#openclaw)"
        )
    for call in report["js_llm_calls"]:
        where = f"{call['file']}:{call['line']} {call['function'] or '<top level>'}"
        report["next_steps"].append(
            f"{where}: {call['kind']} call in TypeScript/JavaScript; wire by hand with "
            f"scripts/reflexio.mjs (SKILL.md, TypeScript / Node agents): context into "
            f"{call['context_arg']}, afterTurn when the reply is final"
        )
    if not report["llm_calls"] and not report["js_llm_calls"]:
        report["next_steps"].append("no model call found: look for a custom client wrapper and wire it by hand")
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", type=Path, help="agent project directories or files")
    args = parser.parse_args(argv)
    report = inspect_paths(args.paths)
    json.dump(report, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0 if report["llm_calls"] or report["js_llm_calls"] else 1


if __name__ == "__main__":
    sys.exit(main())
