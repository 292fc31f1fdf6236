"""Conversions between lake rows (Arrow) and the learning logic's value types."""

from __future__ import annotations

import json

import pyarrow as pa

from reflexio_pipelines.learning.types import ToolCall, Turn


def turns_from_table(table: pa.Table) -> list[Turn]:
    """Turn rows of the `turns` table into Turn values (order preserved)."""
    return [
        Turn(
            turn_id=row["turn_id"],
            interaction_id=row["interaction_id"],
            request_id=row["request_id"],
            user_id=row["user_id"],
            role=row["role"] or "",
            content=row["content"] or "",
            created_at=row["created_at"],
            session_id=row["session_id"],
            source=row["source"] or "",
            agent_version=row["agent_version"] or "",
            tools_used=tuple(
                ToolCall(call.get("tool_name", ""), call.get("tool_data") or {})
                for call in json.loads(row["tools_used"] or "[]")
            ),
            expert_content=row["expert_content"] or "",
            shadow_content=row["shadow_content"] or "",
            user_action=row["user_action"] or "none",
            user_action_description=row["user_action_description"] or "",
        )
        for row in table.to_pylist()
    ]
