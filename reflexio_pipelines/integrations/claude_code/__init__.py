"""Claude Code integration: hooks that put what Reflexio learned into each prompt (UserPromptSubmit) and publish the
session transcript after each response (Stop) and when the session ends (SessionEnd).

    reflexio-lake setup claude-code [--project-dir DIR] [--user-id U] [--agent-version V]   # writes the hooks
    reflexio-lake setup claude-code --uninstall                                               # removes them

`settings` edits `.claude/settings.json`, `hooks` is what the hooks run (`python -m
reflexio_pipelines.integrations.claude_code.hooks context|publish`), `transcript` reads Claude Code's JSONL
transcripts. See docs/integrations.md.
"""
