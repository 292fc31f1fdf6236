"""Text in any script keeps its own identity: `content_key` (and so profile and playbook ids) keeps Unicode words,
and two facts one user stated in Chinese and Russian stay two learned profiles end to end.

The built-in extractor only learns English, so the end-to-end case extracts through LiteLLM against the
OpenAI-compatible stub on 127.0.0.1, made to answer with one Chinese and one Russian profile.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from reflexio_pipelines.devtools.openai_stub import (
    StubBehaviour,
    dedup_reply,
    is_dedup_prompt,
    make_openai_stub,
    user_text,
)
from reflexio_pipelines.devtools.servers import serve_app
from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.lake.records import live_rows
from reflexio_pipelines.learning.learned_rows import content_key, playbook_id, profile_id
from reflexio_pipelines.settings import LLMSettings, Settings
from tests.support.conversations import conversation

CHINESE = "用户对花生过敏"  # the user is allergic to peanuts
RUSSIAN = "Пользователь живёт в Казани"  # the user lives in Kazan
ARABIC = "المستخدم نباتي"  # the user is vegetarian
GREEK = "Ο χρήστης μένει στην Αθήνα"  # the user lives in Athens


def test_every_script_keeps_its_words() -> None:
    keys = {text: content_key(text) for text in (CHINESE, RUSSIAN, ARABIC, GREEK)}
    assert all(keys.values()), keys
    assert len(set(keys.values())) == 4
    assert keys[CHINESE] == CHINESE
    assert keys[RUSSIAN] == "пользователь живёт в казани"
    assert keys[ARABIC] == ARABIC
    assert keys[GREEK] == "ο χρήστησ μένει στην αθήνα"  # casefold: final sigma is sigma


def test_non_latin_keys_ignore_case_punctuation_and_width_but_not_words() -> None:
    assert content_key("Пользователь  ЖИВЁТ в Казани!") == content_key(RUSSIAN)
    assert content_key("用户对花生过敏。") == content_key(CHINESE)
    assert content_key("ＡＢＣ ｄｅｆ") == "abc def"  # NFKC: full-width letters are the plain ones
    assert content_key("用户对花生过敏") != content_key("用户对牛奶过敏")
    assert content_key(ARABIC) != content_key("المستخدم نباتية")
    # Devanagari vowel signs are marks, not separators: "काम" (work) and "कम" (less) are different words
    assert content_key("काम") != content_key("कम")
    assert content_key("Lives in São Paulo") != content_key("Lives in Sèo Paulo")


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("Lives in Berlin", "lives in berlin"),
        (
            "No — we never deploy to us-east-1, always use us-west-2.",
            "no we never deploy to us east 1 always use us west 2",
        ),
        ("Prefers snake_case; uses config.yaml (v2)!", "prefers snake case uses config yaml v2"),
        ("  Works   as a DATA engineer\n", "works as a data engineer"),
        ("", ""),
        ("!!! ...", ""),
    ],
)
def test_ascii_keys_are_what_they_always_were(text: str, key: str) -> None:
    assert content_key(text) == key


def test_ascii_ids_are_unchanged() -> None:
    """Ids of ASCII text are those the old `[a-z0-9]` key gave, so existing lakes keep their ids."""
    from reflexio_pipelines.learning.types import stable_int_id, stable_uuid

    assert profile_id("u1", "Lives in Berlin.") == stable_uuid("u1", "profile", "lives in berlin")
    assert playbook_id("u1", "When deploying", "Use us-west-2") == stable_int_id(
        "u1", "playbook", "when deploying use us west 2"
    )


def test_non_latin_profiles_get_distinct_ids() -> None:
    ids = {profile_id("u1", text) for text in (CHINESE, RUSSIAN, ARABIC, GREEK)}
    assert len(ids) == 4
    assert playbook_id("u1", "部署时", "使用 us-west-2") != playbook_id(
        "u1", "При развёртывании", "используй us-west-2"
    )


def _two_profiles(body: dict[str, Any]) -> str:
    """The stub's reply: extraction prompts get one Chinese and one Russian profile; deduplication prompts get the
    stub judge's usual answer (which must not see the two as one statement)."""
    prompt = user_text(body)
    if is_dedup_prompt(prompt):
        return json.dumps(dedup_reply(prompt), ensure_ascii=False)
    labels = [line.split("]", 1)[0][1:] for line in prompt.splitlines() if line.startswith("[T")]
    return json.dumps(
        {
            "profiles": [
                {"content": CHINESE, "time_to_live": "infinity", "evidence": labels[:1]},
                {"content": RUSSIAN, "time_to_live": "infinity", "evidence": labels[2:3] or labels[:1]},
            ],
            "playbooks": [],
            "forget": [],
        },
        ensure_ascii=False,
    )


CONVERSATION = conversation(
    "lena",
    "lena-non-latin",
    ("user", "我对花生过敏。"),
    ("assistant", "好的，我记住了。"),
    ("user", "Я живу в Казани."),
    ("assistant", "Понял, спасибо."),
    session="lena-1",
    agent_version="agent-v1",
    source="tests",
)


@pytest.mark.e2e
def test_chinese_and_russian_facts_stay_two_profiles(lake: Lake, instance: Any) -> None:
    from reflexio_pipelines.runs import launch
    from tests.support.landing import land

    land(lake, [CONVERSATION])
    stub = make_openai_stub(StubBehaviour(responder=_two_profiles))
    with serve_app(stub) as base_url:
        settings = Settings(
            lake=str(lake.root), llm=LLMSettings(model="openai/stub", api_base=f"{base_url}/v1", api_key="k")
        )
        result = launch(settings=settings, instance=instance)
    assert result.index_version
    assert stub.state.requests, "the LiteLLM path must really have been used"
    current = live_rows(lake, "profile", filters=[("user_id", "=", "lena")])
    assert sorted(p["content"] for p in current) == sorted([CHINESE, RUSSIAN])
    assert len({p["profile_id"] for p in current}) == 2
