"""A tiny OpenAI-compatible embeddings server (POST /v1/embeddings) with deterministic hash-derived vectors.

The vectors are deliberately NOT unit-norm, so clients' normalisation is exercised; with `reverse_order=True`
the response lists items last-first (each still carries its `index`), as some providers do.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse


def stub_vector(text: str, dim: int) -> list[float]:
    """The raw (unnormalised) vector the stub returns for `text`."""
    seed = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")
    rng = np.random.default_rng(seed)
    return (rng.normal(size=dim) * 3.0).astype(np.float32).tolist()


def make_embedding_app(default_dim: int = 64, *, reverse_order: bool = False) -> FastAPI:
    """The stub app; `app.state.requests` records each request's JSON body and Authorization header."""
    app = FastAPI()
    app.state.requests = []

    @app.post("/v1/embeddings")
    async def embeddings(request: Request) -> JSONResponse:
        body: dict[str, Any] = await request.json()
        app.state.requests.append({"body": body, "authorization": request.headers.get("authorization")})
        inputs = body.get("input")
        texts = [inputs] if isinstance(inputs, str) else list(inputs or [])
        dim = int(body.get("dimensions") or default_dim)
        data = [{"object": "embedding", "index": i, "embedding": stub_vector(str(t), dim)} for i, t in enumerate(texts)]
        if reverse_order:
            data.reverse()
        tokens = sum(len(str(t).split()) for t in texts)
        return JSONResponse(
            {
                "object": "list",
                "data": data,
                "model": body.get("model", "stub-embed"),
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )

    return app
