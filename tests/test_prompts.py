"""Versioned prompt files: selection by semver, front-matter checks, `$var` rendering that ignores JSON braces."""

from __future__ import annotations

from pathlib import Path

import pytest

from reflexio_pipelines.learning.prompts import PromptError, available_versions, load_prompt


def write(directory: Path, prompt_id: str, version: str, body: str, variables: str = "[name]") -> None:
    folder = directory / prompt_id
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"v{version}.prompt.md").write_text(
        f"---\nversion: {version}\ndescription: test\nvariables: {variables}\nchangelog:\n  - first\n---\n{body}"
    )


def test_extraction_prompt_loads_and_renders_both_messages() -> None:
    prompt = load_prompt("extraction", "1.0.0")
    assert (prompt.id, prompt.version, prompt.ref) == ("extraction", "1.0.0", "extraction@1.0.0")
    assert prompt.variables == ("agent_context", "transcript", "expert_pairs")
    assert prompt.changelog and prompt.description
    system, user = prompt.render_parts(
        agent_context="a coding assistant",
        transcript='[T1] user: {"json": "braces"} costs $5 ${not_a_var}',
        expert_pairs="(none)",
    )
    assert "a coding assistant" in system
    assert '{"profiles": [{"content"' in system  # literal JSON in the body survives rendering
    assert '[T1] user: {"json": "braces"} costs $5 ${not_a_var}' in user  # values are never re-scanned
    assert "$agent_context" not in system
    assert "$transcript" not in user and "$expert_pairs" not in user
    messages = prompt.render_messages(agent_context="x", transcript="t", expert_pairs="e")
    assert [m["role"] for m in messages] == ["system", "user"]
    assert len(system) < 3_500  # compact: the system prompt is paid on every window


def test_extraction_prompt_lists_named_definitions_and_tools() -> None:
    prompt = load_prompt("extraction")
    assert prompt.ref == "extraction@1.2.0"  # the newest version (1.1.0 + the forget channel) is what LiteLLM uses
    assert prompt.variables == (
        "agent_context",
        "tools",
        "profile_definitions",
        "playbook_definitions",
        "transcript",
        "expert_pairs",
    )
    system, user = prompt.render_parts(
        agent_context="an ops agent",
        tools="create_issue: files a ticket",
        profile_definitions="- team_facts: which team the user is on",
        playbook_definitions="- escalations: when to escalate\n- tone: how to phrase answers",
        transcript="[T1] user: hi",
        expert_pairs="(none)",
    )
    assert "an ops agent" in system and "create_issue: files a ticket" in system
    assert "- team_facts: which team the user is on" in system and "- tone: how to phrase answers" in system
    assert '"extractor": "<name>"' in system  # several definitions: items name theirs
    assert "[T1] user: hi" in user and "Expert comparisons:" in user
    assert len(system) < 2_400  # fixed text; the definitions are the config's (token cost: see test_config)


def test_missing_variable_is_a_clear_error() -> None:
    prompt = load_prompt("extraction", "1.0.0")
    with pytest.raises(PromptError, match=r"extraction@1\.0\.0 is missing variable\(s\): transcript, expert_pairs"):
        prompt.render(agent_context="x")


def test_none_renders_as_empty_text(tmp_path: Path) -> None:
    write(tmp_path, "p", "1.0.0", "Hello $name!")
    assert load_prompt("p", prompts_dir=tmp_path).render(name=None) == "Hello !"


def test_highest_semver_wins_and_explicit_versions(tmp_path: Path) -> None:
    for version in ("1.2.0", "1.10.0", "1.9.3"):
        write(tmp_path, "p", version, f"v{version} $name")
    assert available_versions("p", tmp_path) == ["1.2.0", "1.9.3", "1.10.0"]
    assert load_prompt("p", prompts_dir=tmp_path).version == "1.10.0"
    assert load_prompt("p", "1.2.0", prompts_dir=tmp_path).render(name="x") == "v1.2.0 x"
    assert load_prompt("p", "v1.9.3", prompts_dir=tmp_path).version == "1.9.3"
    with pytest.raises(PromptError, match=r"no version 2\.0\.0"):
        load_prompt("p", "2.0.0", prompts_dir=tmp_path)
    with pytest.raises(PromptError, match="no prompt named"):
        load_prompt("nope", prompts_dir=tmp_path)


def test_no_marker_means_a_single_user_message(tmp_path: Path) -> None:
    write(tmp_path, "p", "1.0.0", "Only $name")
    assert load_prompt("p", prompts_dir=tmp_path).render_messages(name="me") == [{"role": "user", "content": "Only me"}]


@pytest.mark.parametrize(
    ("body", "variables", "error"),
    [
        ("Hi $other", "[name]", "undeclared variable"),
        ("Costs $ 5 $name", "[name]", "invalid placeholder"),
    ],
)
def test_malformed_bodies_fail_at_load(tmp_path: Path, body: str, variables: str, error: str) -> None:
    write(tmp_path, "p", "1.0.0", body, variables)
    with pytest.raises(PromptError, match=error):
        load_prompt("p", prompts_dir=tmp_path)


def test_front_matter_problems(tmp_path: Path) -> None:
    folder = tmp_path / "p"
    folder.mkdir()
    (folder / "v1.0.0.prompt.md").write_text("no front matter here")
    with pytest.raises(PromptError, match="front-matter"):
        load_prompt("p", prompts_dir=tmp_path)
    write(tmp_path, "q", "1.0.0", "x")
    path = tmp_path / "q" / "v1.0.0.prompt.md"
    path.write_text(path.read_text().replace("version: 1.0.0", "version: 2.0.0"))
    with pytest.raises(PromptError, match="does not match"):
        load_prompt("q", prompts_dir=tmp_path)


def test_literal_dollar_via_double_dollar(tmp_path: Path) -> None:
    write(tmp_path, "p", "1.0.0", "Price $$5 for $name")
    assert load_prompt("p", prompts_dir=tmp_path).render(name="you") == "Price $5 for you"
