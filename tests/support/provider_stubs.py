"""LLM providers' wire protocols, served offline on 127.0.0.1: one FastAPI app per protocol, with a fake model.

Each stub checks what the real service checks (the key in that provider's header, the required version header or
query parameter, the deployment / model in the path) and answers in that provider's real response shape, so the
LiteLLM client code for each provider runs unchanged:

- `openai` — also every OpenAI-compatible server (OpenRouter, DeepSeek, xAI, vLLM, …) under any path prefix:
  `POST {prefix}/chat/completions` (`"stream": true` answered as server-sent events, as agent runtimes such as
  OpenClaw ask), `POST {prefix}/embeddings`; key `Authorization: Bearer`.
- `azure` — `POST /openai/deployments/{deployment}/chat/completions?api-version=…` and `…/{deployment}/embeddings`
  (base64 vectors, as the openai SDK asks); key `api-key`; a missing `api-version` or unknown deployment is a 404.
- `anthropic` — `POST /v1/messages` (`anthropic-version` and `max_tokens` required, `system` top-level, content
  blocks); key `x-api-key`; no embeddings.
- `gemini` — `POST /v1beta/models/{model}:generateContent` (`candidates[].content.parts`) and `…:batchEmbedContents`;
  key `x-goog-api-key` header or the documented `?key=` parameter.
- `ollama` — `POST /api/chat` and `POST /api/embed`; key `Authorization: Bearer` (a proxy in front of Ollama).

THE MODEL IS FAKE. By default the answer text comes from `openai_stub.fake_llm_reply`, which parses the prompt back
and replays the built-in rules (extraction), a deterministic dedup rule, the heuristic judges and a shortest-member
consolidation. Tests built on these stubs check plumbing and protocol — that every stage's call travels through
LiteLLM on each provider's wire format and its answer comes back — not extraction quality.

A `responder` replaces the fake model: it gets the request as an OpenAI-style body (`{"model", "messages"}`, the
provider's own shape translated) and returns a `Reply` (or a plain string): text, a finish reason (`stop`,
`length`, `refusal`), JSON sent as a tool call, reasoning sent in the provider's own reasoning channel, or OpenAI's
`refusal` field. Each protocol renders it natively (Anthropic `thinking` / `text` / `tool_use` blocks and
`stop_reason`, Gemini `thought` / `functionCall` parts and `finishReason`, Ollama `thinking` / `done_reason`, …).

Every request is recorded on `app.state.stub.seen` (method, path, raw query, headers, raw body, and the raw response
body), so a test can check where the key travelled and that it travelled nowhere else.
"""

from __future__ import annotations

import base64
import json
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from reflexio_pipelines.devtools.openai_stub import fake_llm_reply, stub_tokens, user_text
from tests.support.embedding_stub import stub_vector

PROTOCOLS = ("openai", "azure", "anthropic", "gemini", "ollama")
CREATED = 1_767_225_600
#: The name of the tool a `Reply.tool_json` answer is sent through.
TOOL_NAME = "record_memory"


@dataclass(frozen=True)
class Reply:
    """One model answer, independent of the protocol that carries it."""

    text: str = ""
    finish: str = "stop"  # stop | length (cut off at the token limit) | refusal (declined / content filter; the
    #                       text is the refusal's wording, which Ollama, having no refusal channel, sends as content)
    tool_json: str | None = None  # JSON arguments of a tool call, sent next to (or instead of) the text
    reasoning: str | None = None  # reasoning in the provider's own channel (not the text)
    refusal: str | None = None  # OpenAI's `message.refusal` (content then null); other protocols use `finish`


Responder = Callable[[dict[str, Any]], "Reply | str"]


def prompt_text(body: dict[str, Any]) -> str:
    """The last user message of an OpenAI-style body, as text (content blocks joined)."""
    return user_text(body)


def fake_model(body: dict[str, Any]) -> Reply:
    """The default answer: the fake LLM of openai_stub (built-in rules replayed), as plain JSON text."""
    return Reply(text=fake_llm_reply(body))


@dataclass
class Seen:
    """One request as it arrived, and the response body sent back."""

    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes
    kind: str = ""  # chat | embeddings | other
    status: int = 0
    response: bytes = b""

    @property
    def url(self) -> str:
        return f"{self.path}?{self.query}" if self.query else self.path


@dataclass
class StubState:
    key: str
    responder: Responder
    embedding_dim: int
    chat_deployments: frozenset[str] = frozenset()
    seen: list[Seen] = field(default_factory=list)


def _prompt_chars(body: dict[str, Any]) -> str:
    return "".join(json.dumps(m.get("content", ""), ensure_ascii=False) for m in body.get("messages", []))


def _answer(state: StubState, body: dict[str, Any]) -> Reply:
    reply = state.responder(body)
    return Reply(text=reply) if isinstance(reply, str) else reply


# --- OpenAI chat completions (OpenAI, Azure, every OpenAI-compatible server) ------------------------------------


def _openai_chat(reply: Reply, model: str, prompt: str, call: int, *, azure: bool) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    finish = {"stop": "stop", "length": "length", "refusal": "stop"}[reply.finish]
    if reply.reasoning is not None:
        message["reasoning_content"] = reply.reasoning  # DeepSeek, vLLM reasoning parsers, OpenRouter
    if reply.tool_json is not None:
        message["tool_calls"] = [
            {"id": f"call_{call}", "type": "function", "function": {"name": TOOL_NAME, "arguments": reply.tool_json}}
        ]
        finish = "tool_calls" if finish == "stop" else finish
    refusal = reply.refusal if reply.refusal is not None else (reply.text if reply.finish == "refusal" else None)
    if refusal is not None and not azure:  # OpenAI: the refusal in its own field, no content
        message["content"], message["refusal"] = None, refusal
    elif azure:
        message["refusal"] = None
    choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": finish, "logprobs": None}
    if azure:  # Azure's content filter: a refused answer is filtered, with the category that tripped
        filtered = reply.finish == "refusal"
        choice["content_filter_results"] = {
            name: {
                "filtered": filtered and name == "self_harm",
                "severity": "medium" if filtered and name == "self_harm" else "safe",
            }
            for name in ("hate", "self_harm", "sexual", "violence")
        }
        if filtered:
            choice["finish_reason"], message["content"] = "content_filter", None
    usage = {
        "prompt_tokens": stub_tokens(prompt),
        "completion_tokens": stub_tokens(reply.text + (reply.tool_json or "")),
    }
    usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
    out = {
        "id": f"chatcmpl-stub-{call}",
        "object": "chat.completion",
        "created": CREATED,
        "model": model,
        "choices": [choice],
        "usage": usage,
        "system_fingerprint": "fp_stub",
    }
    if azure:
        out["prompt_filter_results"] = [{"prompt_index": 0, "content_filter_results": {}}]
    return out


def _openai_stream(completion: dict[str, Any], include_usage: bool) -> bytes:
    """A chat completion as the server-sent events a `"stream": true` request gets: a role chunk, the content (and
    tool calls) as deltas, the finish reason, the usage chunk when `stream_options.include_usage`, then `[DONE]`."""
    choice = completion["choices"][0]
    message = choice["message"]
    base = {k: completion[k] for k in ("id", "created", "model", "system_fingerprint")}
    base["object"] = "chat.completion.chunk"

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]}

    chunks = [chunk({"role": "assistant", "content": ""})]
    if message.get("reasoning_content"):
        chunks.append(chunk({"reasoning_content": message["reasoning_content"]}))
    if message.get("content"):
        text = message["content"]
        half = len(text) // 2  # two deltas, so clients really concatenate
        chunks += [chunk({"content": part}) for part in (text[:half], text[half:]) if part]
    if message.get("refusal"):
        chunks.append(chunk({"refusal": message["refusal"]}))
    for i, call in enumerate(message.get("tool_calls") or []):
        chunks.append(chunk({"tool_calls": [{"index": i, **call}]}))
    chunks.append(chunk({}, choice["finish_reason"]))
    if include_usage:
        chunks.append({**base, "choices": [], "usage": completion["usage"]})
    events = [f"data: {json.dumps(c, ensure_ascii=False)}\n\n" for c in chunks] + ["data: [DONE]\n\n"]
    return "".join(events).encode()


def _openai_embeddings(body: dict[str, Any], dim: int, model: str) -> dict[str, Any]:
    inputs = body.get("input")
    texts = [inputs] if isinstance(inputs, str) else list(inputs or [])
    dim = int(body.get("dimensions") or dim)
    as_base64 = body.get("encoding_format") == "base64"  # the openai SDK asks for base64 and decodes it
    data = []
    for i, text in enumerate(texts):
        vector = stub_vector(str(text), dim)
        value: Any = base64.b64encode(struct.pack(f"<{dim}f", *vector)).decode() if as_base64 else vector
        data.append({"object": "embedding", "index": i, "embedding": value})
    tokens = sum(len(str(t).split()) for t in texts)
    return {"object": "list", "data": data, "model": model, "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}


# --- Anthropic Messages ---------------------------------------------------------------------------------------


def _anthropic_message(reply: Reply, model: str, prompt: str, call: int) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if reply.reasoning is not None:
        content.append({"type": "thinking", "thinking": reply.reasoning, "signature": f"sig-stub-{call}"})
    if reply.text:
        content.append({"type": "text", "text": reply.text})
    if reply.tool_json is not None:
        content.append(
            {"type": "tool_use", "id": f"toolu_stub_{call}", "name": TOOL_NAME, "input": json.loads(reply.tool_json)}
        )
    stop = {
        "stop": "tool_use" if reply.tool_json is not None else "end_turn",
        "length": "max_tokens",
        "refusal": "refusal",
    }[reply.finish]
    return {
        "id": f"msg_stub_{call}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {
            "input_tokens": stub_tokens(prompt),
            "output_tokens": stub_tokens(reply.text + (reply.tool_json or "")),
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    }


def _anthropic_as_openai(body: dict[str, Any]) -> dict[str, Any]:
    messages = [{"role": "system", "content": body["system"]}] if body.get("system") else []
    return {"model": body.get("model"), "messages": messages + list(body.get("messages", []))}


# --- Gemini generateContent -----------------------------------------------------------------------------------


def _gemini_as_openai(body: dict[str, Any], model: str) -> dict[str, Any]:
    def text(content: dict[str, Any]) -> str:
        return "\n".join(p.get("text", "") for p in content.get("parts", []) if isinstance(p, dict))

    messages = []
    if body.get("system_instruction"):
        messages.append({"role": "system", "content": text(body["system_instruction"])})
    for content in body.get("contents", []):
        messages.append({"role": "assistant" if content.get("role") == "model" else "user", "content": text(content)})
    return {"model": model, "messages": messages}


def _gemini_response(reply: Reply, model: str, prompt: str) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    if reply.reasoning is not None:
        parts.append({"text": reply.reasoning, "thought": True})
    if reply.text:
        parts.append({"text": reply.text})
    if reply.tool_json is not None:
        parts.append({"functionCall": {"name": TOOL_NAME, "args": json.loads(reply.tool_json)}})
    finish = {"stop": "STOP", "length": "MAX_TOKENS", "refusal": "SAFETY"}[reply.finish]
    candidate: dict[str, Any] = {"finishReason": finish, "index": 0}
    if reply.finish == "refusal":  # a blocked candidate carries no content, only the ratings that blocked it
        candidate["safetyRatings"] = [
            {"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH", "blocked": True}
        ]
    else:
        candidate["content"] = {"role": "model", "parts": parts}
    out_tokens = stub_tokens(reply.text + (reply.tool_json or ""))
    return {
        "candidates": [candidate],
        "modelVersion": model,
        "responseId": "stub",
        "usageMetadata": {
            "promptTokenCount": stub_tokens(prompt),
            "candidatesTokenCount": out_tokens,
            "totalTokenCount": stub_tokens(prompt) + out_tokens,
        },
    }


# --- Ollama /api/chat -----------------------------------------------------------------------------------------


def _ollama_chat(reply: Reply, model: str, prompt: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text}
    if reply.reasoning is not None:
        message["thinking"] = reply.reasoning
    if reply.tool_json is not None:
        message["tool_calls"] = [{"function": {"name": TOOL_NAME, "arguments": json.loads(reply.tool_json)}}]
    return {
        "model": model,
        "created_at": "2026-01-01T00:00:00Z",
        "message": message,
        "done": True,
        "done_reason": "length" if reply.finish == "length" else "stop",
        "total_duration": 1_000_000,
        "load_duration": 1_000,
        "prompt_eval_count": stub_tokens(prompt),
        "eval_count": stub_tokens(reply.text + (reply.tool_json or "")),
        "eval_duration": 1_000,
    }


# --- the app ---------------------------------------------------------------------------------------------------


def _error(protocol: str, status: int, message: str) -> dict[str, Any]:
    """The provider's own error body."""
    if protocol == "anthropic":
        kind = {401: "authentication_error", 404: "not_found_error"}.get(status, "invalid_request_error")
        return {"type": "error", "error": {"type": kind, "message": message}}
    if protocol == "gemini":
        return {
            "error": {
                "code": status,
                "message": message,
                "status": {400: "INVALID_ARGUMENT", 403: "PERMISSION_DENIED"}.get(status, "NOT_FOUND"),
            }
        }
    if protocol == "ollama":
        return {"error": message}
    if protocol == "azure":
        return {"error": {"code": str(status), "message": message}}
    return {"error": {"message": message, "type": "invalid_request_error", "code": "invalid_api_key"}}


def make_provider_stub(
    protocol: str,
    key: str,
    *,
    responder: Responder | None = None,
    embedding_dim: int = 32,
    deployments: tuple[str, ...] = ("reflexio-chat", "reflexio-embed"),
) -> FastAPI:
    """The stub of `protocol` (one of PROTOCOLS) accepting only `key`. `deployments` are the Azure deployment names
    it serves; `app.state.stub.seen` records every request (see `Seen`)."""
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown protocol {protocol!r}; one of {', '.join(PROTOCOLS)}")
    state = StubState(
        key=key, responder=responder or fake_model, embedding_dim=embedding_dim, chat_deployments=frozenset(deployments)
    )
    app = FastAPI()
    app.state.stub = state
    calls = {"n": 0}

    async def record(request: Request, kind: str) -> tuple[Seen, dict[str, Any]]:
        raw = await request.body()
        seen = Seen(request.method, request.url.path, request.url.query, dict(request.headers), raw, kind)
        state.seen.append(seen)
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = {}
        return seen, body

    def send(seen: Seen, payload: dict[str, Any], status: int = 200) -> JSONResponse:
        response = JSONResponse(payload, status_code=status)
        seen.status, seen.response = status, bytes(response.body)
        return response

    def auth_error(seen: Seen) -> JSONResponse | None:
        """The provider's refusal when the key is not where (and what) it expects, else None."""
        h = seen.headers
        if protocol in ("openai", "ollama"):
            ok = h.get("authorization") == f"Bearer {key}"
        elif protocol == "azure":
            ok = h.get("api-key") == key
        elif protocol == "anthropic":
            ok = h.get("x-api-key") == key
        else:  # gemini: the header, or the documented `key` query parameter
            from urllib.parse import parse_qs

            ok = h.get("x-goog-api-key") == key or parse_qs(seen.query).get("key") == [key]
        if ok:
            return None
        status = {"gemini": 403}.get(protocol, 401)
        return send(seen, _error(protocol, status, "invalid or missing API key"), status)

    def next_call() -> int:
        calls["n"] += 1
        return calls["n"]

    if protocol == "openai":

        @app.post("/{prefix:path}/chat/completions")
        async def openai_chat(request: Request) -> Response:
            seen, body = await record(request, "chat")
            if (refused := auth_error(seen)) is not None:
                return refused
            reply = _answer(state, body)
            completion = _openai_chat(reply, body.get("model", ""), _prompt_chars(body), next_call(), azure=False)
            if body.get("stream"):  # agent runtimes (OpenClaw) stream: the same answer as server-sent events
                events = _openai_stream(completion, bool((body.get("stream_options") or {}).get("include_usage")))
                seen.status, seen.response = 200, events
                return Response(events, media_type="text/event-stream")
            return send(seen, completion)

        @app.post("/{prefix:path}/embeddings")
        async def openai_embeddings(request: Request) -> JSONResponse:
            seen, body = await record(request, "embeddings")
            if (refused := auth_error(seen)) is not None:
                return refused
            return send(seen, _openai_embeddings(body, state.embedding_dim, body.get("model", "")))

    elif protocol == "azure":

        def azure_checks(seen: Seen, deployment: str) -> JSONResponse | None:
            if (refused := auth_error(seen)) is not None:
                return refused
            if "api-version=" not in seen.query:
                return send(seen, _error("azure", 404, "Resource not found"), 404)
            if deployment not in state.chat_deployments:
                return send(seen, _error("azure", 404, "The API deployment for this resource does not exist."), 404)
            return None

        @app.post("/openai/deployments/{deployment}/chat/completions")
        async def azure_chat(deployment: str, request: Request) -> JSONResponse:
            seen, body = await record(request, "chat")
            if (refused := azure_checks(seen, deployment)) is not None:
                return refused
            reply = _answer(state, {**body, "model": deployment})
            return send(
                seen, _openai_chat(reply, "gpt-4o-mini-2024-07-18", _prompt_chars(body), next_call(), azure=True)
            )

        @app.post("/openai/deployments/{deployment}/embeddings")
        async def azure_embeddings(deployment: str, request: Request) -> JSONResponse:
            seen, body = await record(request, "embeddings")
            if (refused := azure_checks(seen, deployment)) is not None:
                return refused
            return send(seen, _openai_embeddings(body, state.embedding_dim, "text-embedding-3-small"))

    elif protocol == "anthropic":

        @app.post("/v1/messages")
        async def anthropic_messages(request: Request) -> JSONResponse:
            seen, body = await record(request, "chat")
            if (refused := auth_error(seen)) is not None:
                return refused
            if not seen.headers.get("anthropic-version"):
                return send(seen, _error("anthropic", 400, "anthropic-version: header is required"), 400)
            if not isinstance(body.get("max_tokens"), int) or body["max_tokens"] < 1:
                return send(seen, _error("anthropic", 400, "max_tokens: Field required"), 400)
            if any(m.get("role") == "system" for m in body.get("messages", [])):
                return send(seen, _error("anthropic", 400, "messages: system is a top-level parameter"), 400)
            reply = _answer(state, _anthropic_as_openai(body))
            return send(seen, _anthropic_message(reply, body.get("model", ""), _prompt_chars(body), next_call()))

    elif protocol == "gemini":

        @app.post("/v1beta/models/{model}:generateContent")
        async def gemini_generate(model: str, request: Request) -> JSONResponse:
            seen, body = await record(request, "chat")
            if (refused := auth_error(seen)) is not None:
                return refused
            if not body.get("contents"):
                return send(seen, _error("gemini", 400, "contents is not specified"), 400)
            openai_body = _gemini_as_openai(body, model)
            reply = _answer(state, openai_body)
            next_call()
            return send(seen, _gemini_response(reply, model, _prompt_chars(openai_body)))

        @app.post("/v1beta/models/{model}:batchEmbedContents")
        async def gemini_embed(model: str, request: Request) -> JSONResponse:
            seen, body = await record(request, "embeddings")
            if (refused := auth_error(seen)) is not None:
                return refused
            texts = [
                "\n".join(p.get("text", "") for p in r.get("content", {}).get("parts", []))
                for r in body.get("requests", [])
            ]
            dim = int((body.get("requests") or [{}])[0].get("outputDimensionality") or state.embedding_dim)
            return send(seen, {"embeddings": [{"values": stub_vector(t, dim)} for t in texts]})

    else:  # ollama

        @app.post("/api/chat")
        async def ollama_chat(request: Request) -> JSONResponse:
            seen, body = await record(request, "chat")
            if (refused := auth_error(seen)) is not None:
                return refused
            reply = _answer(state, {"model": body.get("model"), "messages": body.get("messages", [])})
            next_call()
            return send(seen, _ollama_chat(reply, body.get("model", ""), _prompt_chars(body)))

        @app.post("/api/embed")
        async def ollama_embed(request: Request) -> JSONResponse:
            seen, body = await record(request, "embeddings")
            if (refused := auth_error(seen)) is not None:
                return refused
            inputs = body.get("input")
            texts = [inputs] if isinstance(inputs, str) else list(inputs or [])
            return send(
                seen,
                {
                    "model": body.get("model"),
                    "embeddings": [stub_vector(str(t), state.embedding_dim) for t in texts],
                    "total_duration": 1_000,
                    "load_duration": 1_000,
                    "prompt_eval_count": sum(len(str(t).split()) for t in texts),
                },
            )

    @app.api_route("/{path:path}", methods=["GET", "POST", "PUT", "DELETE"])
    async def anything_else(path: str, request: Request) -> JSONResponse:
        seen, _ = await record(request, "other")
        return send(seen, _error(protocol, 404, f"no such route on the {protocol} stub"), 404)

    return app
