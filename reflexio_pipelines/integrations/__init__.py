"""Agent integrations of Reflexio, all built on the SDK (`reflexio_pipelines.sdk`); see docs/integrations.md.

- `integrations.mem0`: drop-in `MemoryClient` / `AsyncMemoryClient` (mem0's platform clients) that also publish every
  `add()` to Reflexio. Extra: `reflexio-lake[mem0]`.
- `integrations.langchain`: a callback handler that publishes each finished model turn, and a retriever over learned
  profiles and playbooks. Extra: `reflexio-lake[langchain]`.
- `integrations.wiring`: `ReflexioHooks`, the two calls the integrate-reflexio skill wires into a plain agent.
- `integrations/skill/`: the integrate-reflexio skill for coding agents; `integrations/openclaw/`: the OpenClaw plugin
  (an npm package).

Every integration fails open: Reflexio being unreachable is logged and never breaks the host's call.
"""
