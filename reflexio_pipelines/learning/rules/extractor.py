"""The rule extractor: the previous built-in extractor, an offline, deterministic, RULE-BASED BASELINE — a HEURISTIC
over the wording, not a model. The default built-in extractor is now the learned one (learning/builtin.py); this one
stays as the baseline `benchmarks/extraction_generalisation.py` measures it against, and as the answer the local
OpenAI-compatible stub gives (devtools/openai_stub.py), so the LLM path has reproducible, realistic answers. It recognises families of explicit surface patterns:

- profiles: first-person statements in user turns, phrased canonically so their typed slot is recognised
  (learning/slots.py): location incl. moves ("I just moved to Austin" -> "Lives in Austin"), diet ("I had to go
  fully vegetarian" -> "Is vegetarian"), role, team, employer (a compound "I'm a data engineer at Acme" is split into
  its slots), timezone, name, reply language, first language; "I have …" for stable things (conditions, allergies,
  family, pets, vehicles, a commute); likes, dislikes, habits, "my X is Y". Facts inside requests are kept ("I'm
  vegetarian, so no meat please" -> "Is vegetarian"); questions, passing states and stories about the past are not
  facts;
- correction playbooks: a user turn right after an agent turn that corrects or gives feedback on it — marker words
  ("no", "wrong", "don't", "never", "instead", "use X not Y", …), style feedback about length, tone and format ("Way
  too long. Keep it to three bullets."), process feedback ("You should have asked me before booking anything." ->
  "Ask me before booking anything."), a convention of the user's team ("Actually we use pnpm in this repo."); trigger
  = the situation taken from the request the agent was answering, content = the user's words rewritten mechanically
  as a rule. Sentences that tell a story (several past-tense verbs, or long) contribute only the instruction clauses
  in them: narrative is never stored verbatim as a rule;
- standing instructions in any user turn ("from now on …", "whenever you X, Y", "always/never …", polite requests
  about every answer's form): playbooks that need no agent turn to answer;
- one-off slips ("No, I meant the staging server.", "Not that one, the prod one.") are session context
  (`ExtractionResult.session_context`), never rules, unless the same sentence says something durable;
- tool-failure playbooks: every tool call with an error, naming the tool and the cause, pointing at a later call
  of the same tool that worked;
- expert playbooks: an expert answer whose content words differ substantially from the agent's (token-set
  heuristic, see `_expert_gap`);
- forget requests ("forget that I live in Paris", "delete what you know about my address", "don't keep anything
  about my kids"): a HEURISTIC over the wording (`forget_target`). They become forget directives, never profiles or
  correction playbooks; which stored profiles they remove is matched in learn.py (learning/forget.py).

Anything phrased less explicitly is missed, and the wording is mechanical; configure an LLM for real use. Measured
per category on the project's labelled set by benchmarks/extraction_quality.py (docs/configuration.md lists the
scores). Same window in, same output out (same order); identical contents are emitted once per window.

The rules live in `learning/rules/`, one module per family; this module combines them into the extractor.
"""

from __future__ import annotations

from reflexio_pipelines.learning.config import DEFAULT_GROUP
from reflexio_pipelines.learning.extractor_groups import ExtractorGroup
from reflexio_pipelines.learning.jsonparse import dedupe_by_content
from reflexio_pipelines.learning.rules.corrections import corrected_agent_index, correction_playbook, session_notes
from reflexio_pipelines.learning.rules.expert import expert_playbook
from reflexio_pipelines.learning.rules.forget_requests import forget_directives
from reflexio_pipelines.learning.rules.profiles import profiles_from_turn
from reflexio_pipelines.learning.rules.standing import standing_playbooks
from reflexio_pipelines.learning.rules.success_recipes import success_recipe
from reflexio_pipelines.learning.rules.tool_failures import tool_failure_playbooks
from reflexio_pipelines.learning.types import (
    ExtractedPlaybook,
    ExtractedProfile,
    ExtractionResult,
    ForgetDirective,
    Window,
)

EXTRACTOR_NAME = "builtin-rules"
PROMPT_VERSION = "rules-v2"
MODEL_NAME = "builtin"


class RuleExtractor:
    """Rule-based baseline extractor (see the module docstring); needs no network and makes no LLM calls."""

    name = EXTRACTOR_NAME

    def extract(self, window: Window, group: ExtractorGroup | None = None) -> ExtractionResult:
        """Profiles and playbooks the rules find in `window`. The group's definitions and agent context are
        ignored (the rules do not read them); items are tagged with the group's first profile/playbook extractor,
        and a kind the group has no extractor for is not extracted."""
        group = group or DEFAULT_GROUP
        turns = window.turns
        profiles: list[ExtractedProfile] = []
        playbooks: list[ExtractedPlaybook] = []
        forget: list[ForgetDirective] = []
        tool_failures: dict[int, list[ExtractedPlaybook]] = {}
        for index, playbook in tool_failure_playbooks(turns):
            tool_failures.setdefault(index, []).append(playbook)
        notes: list[str] = []
        for index, turn in enumerate(turns):
            correction = correction_playbook(turns, index)
            if turn.is_user:
                corrected = correction is not None or corrected_agent_index(turns, index) is not None
                profiles.extend(profiles_from_turn(turn, is_correction_turn=corrected))
                forget.extend(forget_directives(turn))
                if corrected:  # one-off fixes hold for this conversation only
                    notes.extend(session_notes(turn.content))
                else:  # a standing instruction needs no agent turn to answer
                    playbooks.extend(standing_playbooks(turns, index))
            if correction is not None:
                playbooks.append(correction)
            playbooks.extend(tool_failures.get(index, []))
            if (expert := expert_playbook(turns, index)) is not None:
                playbooks.append(expert)
            if (recipe := success_recipe(turns, index)) is not None:
                playbooks.append(recipe)
        return ExtractionResult(
            profiles=[named_profile for p in dedupe_by_content(profiles) if (named_profile := group.tag_profile(p))],
            playbooks=[
                named_playbook for p in dedupe_by_content(playbooks) if (named_playbook := group.tag_playbook(p))
            ],
            # forgetting is about profiles: a group without a profile extractor has nothing to forget
            forget=forget if group.resolve("profile", None)[0] is not None else [],
            extractor=EXTRACTOR_NAME,
            model=MODEL_NAME,
            prompt_version=PROMPT_VERSION,
            llm_calls=0,
            session_context=list(dict.fromkeys(notes)),
        )
