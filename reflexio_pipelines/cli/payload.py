"""What `reflexio-lake publish` accepts: JSON or JSONL, inline, from a file or from stdin, read into publishes.

Each JSON value (the document, each element of a top-level array, or each JSONL line) is either a turn
(`{"role": "user", "content": "..."}`) or a whole publish (`{"interactions": [...], "user_id": ..., "session_id": ...,
"agent_version": ..., "source": ...}`, the original CLI's payload; `interaction_data_list` works too). Loose turns
form one publish, in order; each whole publish is sent on its own.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from reflexio_pipelines.sdk import PublishResult, ReflexioClient

TURN_KEYS = ("interactions", "interaction_data_list")
FIELDS = ("user_id", "session_id", "agent_version", "source")


class PayloadError(ValueError):
    """The input is not a turn, a list of turns or a publish payload; the message says where."""


@dataclass
class Batch:
    """One publish: its turns and the fields its payload set (user_id, session_id, agent_version, source)."""

    turns: list[dict[str, Any]]
    fields: dict[str, str] = field(default_factory=dict)


def _values(text: str) -> list[Any]:
    try:
        document = json.loads(text)
    except json.JSONDecodeError as whole:
        lines = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
        if len(lines) < 2:
            raise PayloadError(f"not valid JSON: {whole}") from whole
        values = []
        for number, line in lines:  # JSONL: one value per line
            try:
                values.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise PayloadError(f"line {number}: not valid JSON: {exc}") from exc
        return values
    return document if isinstance(document, list) else [document]


def _batch(payload: dict[str, Any], where: str) -> Batch:
    turns = next(payload[key] for key in TURN_KEYS if key in payload)
    if not isinstance(turns, list) or not all(isinstance(t, dict) for t in turns):
        raise PayloadError(f"{where}: 'interactions' must be a list of turn objects")
    fields = {key: str(payload[key]) for key in FIELDS if payload.get(key) not in (None, "")}
    return Batch(turns=turns, fields=fields)


def parse_batches(text: str) -> list[Batch]:
    """The publishes described by `text` (JSON or JSONL)."""
    batches: list[Batch] = []
    loose: Batch | None = None
    for index, value in enumerate(_values(text), 1):
        where = f"item {index}"
        if not isinstance(value, dict):
            kind = type(value).__name__
            raise PayloadError(f"{where}: expected a turn object or a payload with 'interactions', got {kind}")
        if any(key in value for key in TURN_KEYS):
            batches.append(_batch(value, where))
        elif loose is None:
            loose = Batch(turns=[value])
            batches.append(loose)
        else:
            loose.turns.append(value)
    if not batches:
        raise PayloadError("no turns given")
    return batches


def publishes(batches: list[Batch], **options: str | None) -> list[dict[str, Any]]:
    """One publish per batch: its turns, and the command's options (`user_id`, `session_id`, `agent_version`,
    `source`) unless its payload set them."""
    return [{**options, **batch.fields, "turns": batch.turns} for batch in batches]


def send(api: ReflexioClient, publish: dict[str, Any], wait: bool) -> PublishResult:
    """Publish one of `publishes` through the SDK (both CLIs: the same request for the same input)."""
    return api.publish(
        publish["user_id"],
        publish["turns"],
        agent_version=publish["agent_version"],
        session_id=publish["session_id"],
        source=publish["source"],
        wait=wait,
    )
