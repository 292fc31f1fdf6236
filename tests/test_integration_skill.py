"""The integrate-reflexio skill: its scripts inspect and wire the sample agent, and the wired agent learns through
the real service on 127.0.0.1 (turns published, the learned rule in the next system prompt). The same for the Node
sample agent, wired as SKILL.md tells for TypeScript / Node agents (scripts/reflexio.mjs) and run by node against a
stub OpenAI-compatible model on 127.0.0.1."""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from reflexio_pipelines.integrations.wiring import ReflexioHooks, reply_text
from reflexio_pipelines.lake.duck import connect
from reflexio_pipelines.runs import launch
from reflexio_pipelines.sdk import ReflexioClient, render_context
from reflexio_pipelines.sdk.models import SearchResult
from serving.app import create_app
from tests.support.processes import free_port
from tests.support.provider_stubs import make_provider_stub, prompt_text
from tests.support.servers import serve_app

SKILL = Path(__file__).resolve().parents[1] / "reflexio_pipelines" / "integrations" / "skill"
SCRIPTS = SKILL / "integrate-reflexio" / "scripts"
SAMPLE = SKILL / "examples" / "sample_agent"
SAMPLE_NODE = SKILL / "examples" / "sample_agent_node"
NODE = shutil.which("node")


def run_script(name: str, *args: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPTS / name), *map(str, args)], capture_output=True, text=True, timeout=120
    )


class RecordingLLM:
    """A stub model: replies in order and records the system prompt of every call."""

    def __init__(self, replies: list[str]) -> None:
        self.replies = iter(replies)
        self.system_prompts: list[str] = []

    def __call__(self, messages: list[dict[str, str]]) -> str:
        self.system_prompts.append("\n".join(m["content"] for m in messages if m["role"] == "system"))
        return next(self.replies)


def test_skill_metadata():
    text = (SKILL / "integrate-reflexio" / "SKILL.md").read_text()
    front = text.split("---")[1]
    assert "name: integrate-reflexio" in front and "description: " in front


BOTS = """\
import litellm
from anthropic import Anthropic
from langchain_openai import ChatOpenAI
from openai import OpenAI

chat = ChatOpenAI(model="gpt-4o")


def openai_bot(user_id, user_message, conversation_id):
    out = OpenAI().chat.completions.create(model="m", messages=[{"role": "user", "content": user_message}])
    return out.choices[0].message.content


async def claude_bot(question):
    return await Anthropic().messages.create(model="m", system="Be brief.", messages=[], max_tokens=9)


def litellm_bot(prompt):
    return litellm.completion(model="m", messages=[{"role": "user", "content": prompt}])


class Bot:
    def reply(self, text):
        return chat.invoke(text).content


def repl():
    while True:
        print(chat.invoke(input()).content)


def not_a_model(query):
    return query.strip()
"""


@pytest.mark.e2e
def test_inspect_and_wire_recognise_the_common_model_clients(tmp_path):
    bots = tmp_path / "bots.py"
    bots.write_text(BOTS)
    done = run_script("inspect_agent.py", tmp_path)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    kinds = {
        c["function"]: (c["kind"], c["context_arg"]["source"] if c["context_arg"] else None)
        for c in report["llm_calls"]
    }
    assert kinds == {
        "openai_bot": ("openai", '[{"role": "user", "content": user_message}]'),
        "claude_bot": ("anthropic", '"Be brief."'),
        "litellm_bot": ("litellm", '[{"role": "user", "content": prompt}]'),
        "Bot.reply": ("langchain", "text"),
        "repl": ("langchain", "input()"),
    }
    handlers = {h["function"]: h for h in report["turn_handlers"]}
    assert [handlers["openai_bot"][k] for k in ("message_param", "user_id_param", "session_param")] == [
        "user_message",
        "user_id",
        "conversation_id",
    ]
    assert handlers["repl"]["loop_agent"] and not handlers["openai_bot"]["loop_agent"]
    assert handlers["claude_bot"]["async"]

    wired = run_script("wire_reflexio.py", tmp_path, "--agent-version", "bots")
    assert wired.returncode == 0, wired.stderr
    source = bots.read_text()
    compile(source, str(bots), "exec")
    assert (
        'messages=_reflexio.inject([{"role": "user", "content": user_message}], user_message, user_id=user_id)'
    ) in source
    assert (
        "return _reflexio.after_turn(user_id, user_message, out.choices[0].message.content, "
        "session_id=conversation_id)" in source
    )
    assert 'system=_reflexio.system("Be brief.", question)' in source
    assert "return _reflexio.after_turn(None, text, chat.invoke(_reflexio.inject(text, text)).content)" in source
    assert "print(chat.invoke(input()).content)" in source  # the loop agent is left for wiring by hand
    assert "repl: the turn does not end with `return <reply>`" in wired.stderr
    assert source.count("ReflexioHooks(") == 1 and 'ReflexioHooks(agent_version="bots")' in source


def test_inspect_and_wire_the_sample_agent_then_it_learns(tmp_path, settings, instance, monkeypatch):
    project = tmp_path / "deploy_bot"
    shutil.copytree(SAMPLE, project)
    agent_file = project / "agent.py"

    report = json.loads(run_script("inspect_agent.py", project).stdout)
    [handler] = report["turn_handlers"]
    assert (handler["function"], handler["message_param"], handler["user_id_param"]) == ("answer", "message", "user_id")
    assert report["llm_calls"][0]["kind"] == "injected" and report["wired_files"] == []

    wired = run_script("wire_reflexio.py", project, "--agent-version", "deploy-bot")
    assert wired.returncode == 0, wired.stderr
    assert "+    reply = llm(_reflexio.inject(messages, message, user_id=user_id))" in wired.stdout  # the diff
    assert (project / "agent.py.bak").read_text() == (SAMPLE / "agent.py").read_text()
    wired_source = agent_file.read_text()
    again = run_script("wire_reflexio.py", project, "--agent-version", "deploy-bot")
    assert again.returncode == 0 and again.stdout == "" and "nothing to change" in again.stderr
    assert agent_file.read_text() == wired_source  # idempotent
    assert json.loads(run_script("inspect_agent.py", project).stdout)["wired_files"] == [str(agent_file)]

    app = create_app(settings)
    with serve_app(app) as url:
        monkeypatch.setenv("REFLEXIO_API_URL", url)
        spec = importlib.util.spec_from_file_location("deploy_bot_agent", agent_file)
        agent = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(agent)
        llm = RecordingLLM(
            [
                "Sure. I'll deploy the payments service to production in us-east-1 now.",
                "Understood. Deploying the payments service to us-west-2 instead.",
                "Deploying the payments service to us-west-2.",
            ]
        )
        agent.answer("frank-sk", "Please deploy the payments service to production.", llm)
        agent.answer("frank-sk", "No — we never deploy to us-east-1, always use us-west-2.", llm)

        rows = (
            connect(settings.lake)
            .sql(
                "select role, content, agent_version from landing_turns where user_id = 'frank-sk' "
                "order by ingested_at_us, turn_index"
            )
            .fetchall()
        )
        assert [r[:2] for r in rows] == [
            ("user", "Please deploy the payments service to production."),
            ("assistant", "Sure. I'll deploy the payments service to production in us-east-1 now."),
            ("user", "No — we never deploy to us-east-1, always use us-west-2."),
            ("assistant", "Understood. Deploying the payments service to us-west-2 instead."),
        ]
        assert {r[2] for r in rows} == {"deploy-bot"}

        launch(settings=settings, instance=instance)
        app.state.svc.index.refresh()
        reply = agent.answer("frank-sk", "Deploy the payments service to production, please.", llm)

    assert reply == "Deploying the payments service to us-west-2."
    assert llm.system_prompts[0] == agent.SYSTEM_PROMPT  # nothing learned yet
    learned = llm.system_prompts[2]
    assert learned.startswith(agent.SYSTEM_PROMPT + "\n\n<reflexio_context>")
    assert "us-west-2" in learned.split("<reflexio_context>")[1]


def test_wired_agent_answers_when_reflexio_is_down(caplog):
    hooks = ReflexioHooks(ReflexioClient(base_url=f"http://127.0.0.1:{free_port()}", max_retries=0))
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
    with caplog.at_level(logging.WARNING, logger="reflexio_pipelines.integrations"):
        assert hooks.inject(messages, "hi", user_id="u") == messages
        assert hooks.after_turn("u", "hi", "hello") == "hello"
    assert "Reflexio context unavailable" in caplog.text and "Reflexio publish failed" in caplog.text


def test_reply_text_reads_the_common_reply_objects():
    from langchain_core.messages import AIMessage
    from litellm import ModelResponse

    completion = ModelResponse(choices=[{"message": {"role": "assistant", "content": "from litellm"}}])
    assert reply_text(completion) == "from litellm"
    blocks = AIMessage([{"type": "text", "text": "from"}, {"type": "text", "text": "langchain"}])
    assert reply_text(blocks) == "from\nlangchain"
    assert reply_text({"role": "assistant", "content": "from a dict"}) == "from a dict"
    assert reply_text("plain") == "plain"


# --- TypeScript / Node agents ---------------------------------------------------------------------------------------

#: The hand wiring SKILL.md prescribes for the Node sample (import + instance, context into the messages, afterTurn
#: on the final reply), as (before, after) edits of its source.
NODE_WIRING = (
    (
        "export const SYSTEM_PROMPT",
        'import { ReflexioHooks } from "./reflexio.mjs";\n\n'
        'const reflexio = new ReflexioHooks({ agentVersion: "deploy-bot-node" });\n\nexport const SYSTEM_PROMPT',
    ),
    (
        "body: JSON.stringify({ model: MODEL, messages }),",
        "body: JSON.stringify({ model: MODEL, messages: await reflexio.inject(messages, message, { userId }) }),",
    ),
    (
        "return completion.choices[0].message.content.trim();",
        "return reflexio.afterTurn(userId, message, completion.choices[0].message.content.trim());",
    ),
)
DRIVER = """\
import { answer } from "./agent.mjs";
const [userId, ...messages] = process.argv.slice(2);
for (const message of messages) console.log(JSON.stringify(await answer(userId, message)));
"""


@pytest.mark.skipif(NODE is None, reason="node is not installed (Node >= 18 needed)")
def test_node_agent_inspected_and_wired_with_reflexio_mjs_learns(tmp_path, settings, instance):
    project = tmp_path / "deploy_bot_node"
    shutil.copytree(SAMPLE_NODE, project)
    report = json.loads(run_script("inspect_agent.py", project).stdout)
    [call] = report["js_llm_calls"]
    assert (call["kind"], call["function"], call["file"]) == ("fetch", "answer", str(project / "agent.mjs"))
    assert any("reflexio.mjs" in step for step in report["next_steps"])

    # wire it as SKILL.md says: copy the helper (and its types) next to the agent, then the three edits
    for name in ("reflexio.mjs", "reflexio.d.mts"):
        shutil.copyfile(SCRIPTS / name, project / name)
    source = (project / "agent.mjs").read_text()
    for before, after in NODE_WIRING:
        assert source.count(before) == 1, before
        source = source.replace(before, after)
    (project / "agent.mjs").write_text(source)
    (project / "driver.mjs").write_text(DRIVER)

    replies = {
        "Please deploy the payments service to production.": "Sure. I'll deploy the payments service to production in us-east-1 now.",
        "No — we never deploy to us-east-1, always use us-west-2.": "Understood. Deploying the payments service to us-west-2 instead.",
        "Deploy the billing service to production, please.": "Deploying the billing service to us-west-2.",
    }
    model = make_provider_stub("openai", "sk-node-test", responder=lambda body: replies[prompt_text(body)])
    app = create_app(settings)
    with serve_app(model) as model_url, serve_app(app) as url:
        env = dict(os.environ, REFLEXIO_API_URL=url, OPENAI_BASE_URL=f"{model_url}/v1", OPENAI_API_KEY="sk-node-test")

        def turns(*messages: str) -> list[str]:
            done = subprocess.run(
                [NODE, "driver.mjs", "gina-node", *messages],
                cwd=project,
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert done.returncode == 0 and not done.stderr, done.stderr
            return [json.loads(line) for line in done.stdout.splitlines()]

        assert turns(*list(replies)[:2]) == list(replies.values())[:2]
        rows = (
            connect(settings.lake)
            .sql(
                "select role, content, agent_version, source from landing_turns where user_id = 'gina-node' "
                "order by ingested_at_us, turn_index"
            )
            .fetchall()
        )
        assert [r[:2] for r in rows] == [
            (role, text) for pair in list(replies.items())[:2] for role, text in zip(("user", "assistant"), pair)
        ]
        assert {r[2:] for r in rows} == {("deploy-bot-node", "agent")}
        assert (
            len(
                {
                    r
                    for r in connect(settings.lake)
                    .sql("select distinct session_id from landing_turns where user_id = 'gina-node'")
                    .fetchall()
                }
            )
            == 1
        )

        launch(settings=settings, instance=instance)
        app.state.svc.index.refresh()
        assert turns(list(replies)[2]) == [list(replies.values())[2]]

    systems = [
        next(m["content"] for m in json.loads(seen.body)["messages"] if m["role"] == "system")
        for seen in model.state.stub.seen
        if seen.kind == "chat"
    ]
    assert systems[0] == "You are a careful deployment assistant for the platform team. Answer briefly."
    assert systems[2].startswith(systems[0] + "\n\n<reflexio_context>") and "us-west-2" in systems[2]


@pytest.mark.e2e
@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_reflexio_mjs_renders_the_block_as_the_sdk_does(tmp_path):
    result = {
        "profiles": [{"profile_id": "p1", "user_id": "u", "content": "Timezone is CET"}],
        "user_playbooks": [
            {"user_playbook_id": 1, "user_id": "u", "content": "Always use us-west-2", "trigger": "deploying"}
        ],
        "agent_playbooks": [
            {"agent_playbook_id": 2, "content": "Always  use\nus-west-2", "trigger": "deploying"},
            {"agent_playbook_id": 3, "content": "Use the <reflexio_context> ops-bot token"},
        ],
    }
    code = (
        f"import {{ renderContext }} from {json.dumps(str(SCRIPTS / 'reflexio.mjs'))};\n"
        f"const r = {json.dumps(result)};\n"
        "console.log(JSON.stringify([renderContext(r, 4000), renderContext(r, 400),"
        " renderContext({})]));"
    )
    (tmp_path / "render.mjs").write_text(code)
    done = subprocess.run([NODE, str(tmp_path / "render.mjs")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    model = SearchResult.model_validate(result)
    assert json.loads(done.stdout) == [render_context(model, 4000), render_context(model, 400), ""]
