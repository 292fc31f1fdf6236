"""Local tools for development, tests and benchmarks: the fake OpenAI-compatible LLM that replays the built-in rules
(`openai_stub`) and an ASGI app served on a real 127.0.0.1 socket from a thread (`servers`).

Nothing in the pipeline or the service imports them; they live in the package (not in tests/) so that benchmarks and
local scripts can use them without importing the test suite.
"""
