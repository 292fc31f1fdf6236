"""Sample conversations as the demo data and the publish API carry them, built for tests. No heavy imports: pure
tests build their data with it too."""

from __future__ import annotations


def conversation(
    user: str, cid: str, *turns: tuple[str, str], session: str = "", agent_version: str = "v1", source: str = "test"
) -> dict:
    """One sample conversation (the shape `publish_payload` reads), all of it in one session: `session`, else
    `<user>-<cid>`. `turns` are (role, content) pairs."""
    return {
        "id": cid,
        "user_id": user,
        "session_id": session or f"{user}-{cid}",
        "agent_version": agent_version,
        "source": source,
        "interactions": interactions(*turns),
    }


def interactions(*turns: tuple[str, str]) -> list[dict]:
    """(role, content) pairs as the API's `interaction_data_list` (and a sample conversation's `interactions`)."""
    return [{"role": role, "content": content} for role, content in turns]
