"""Agent integrations of Reflexio, all built on the SDK (`reflexio_pipelines.sdk`); see docs/integrations.md.

- `integrations.mem0`: drop-in `Memory` / `AsyncMemory` (mem0's self-hosted memory) and `MemoryClient` /
  `AsyncMemoryClient` (mem0's platform clients) that also publish every `add()` to Reflexio. Extra:
  `reflexio-lake[mem0]`.
- `integrations.langchain`: `ReflexioChatModel`, a wrapper of any chat model that injects what was learned into the
  system prompt and publishes each exchange; a callback handler that publishes each finished model turn; a retriever
  over learned profiles and playbooks. Extra: `reflexio-lake[langchain]`.
- `integrations.wiring`: `ReflexioHooks`, the two calls the integrate-reflexio skill wires into a plain agent.
- `integrations.claude_code`: Claude Code hooks (context before each prompt, the transcript published after each
  response), installed into a project's `.claude/settings.json` by `reflexio-lake setup claude-code`.
- `integrations/skill/`: the integrate-reflexio skill for coding agents; `integrations/openclaw/`: the OpenClaw plugin
  (an npm package).

Every integration fails open: Reflexio being unreachable is logged and never breaks the host's call.
"""
