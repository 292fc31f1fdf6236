"""A development corpus for search_interactions from real people's chats: REALTALK (danny911kr/REALTALK, 2025),
read at run time from the fetched mirror, never copied into git (the repository states no licence).

REALTALK is ten 21-day conversations between two people who messaged each other every day (18-25 sessions, 410-1,548
turns per pair), with questions written on them in LoCoMo's format: each question lists the turns (`dia_id`s) that
hold its answer. Unlike the other two corpora nobody here wrote the words, the questions or the evidence: the turns
are real chat (typos, small talk, photos talked about, digressions), and the questions share words with their
answers as people's questions do, so plain BM25 is a fair baseline here (on the SPC corpus it is not, by design).

The repository also carries a copy of LoCoMo under `data/locomo/`: it is never read (LoCoMo is a benchmark that judges
this project from outside). Only `data/Chat_*.json` is.

One pair is one user of the service (the first speaker owns it; both speakers' turns are published with their names
as roles). Dev = chats 1-5, held-out = chats 6-10. Categories: REALTALK's 1 = multi_hop (several turns, often in
different sessions), 2 = temporal (asks when, or names a date), 3 = inference (commonsense over what was said).
Evidence ids that name no turn (typos in the data: 188 of 1,742) are dropped, and a question left without evidence is
dropped. Limits: the questions name the speakers by the pseudonyms the two used with each other, which are not always
the names the data gives them ("Emi" is "Kate" in the questions), so the speaker leg sees fewer names than in chat.
"""

from __future__ import annotations

import json
import re
import subprocess
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from benchmarks.interaction_corpus import Conversation, Question

MIRROR = Path("/work/.mirror")
REPO = "danny911kr/REALTALK"
COMMIT = "b903e06a9770bf4e5fe9018c3e132889666d3b4a"
CHATS = {
    "dev": [
        "Chat_1_Emi_Elise",
        "Chat_2_Kevin_Elise",
        "Chat_3_Kevin_Paola",
        "Chat_4_Emi_Paola",
        "Chat_5_Nicolas_Nebraas",
    ],
    "heldout": [
        "Chat_6_Vanessa_Nicolas",
        "Chat_7_Nebraas_Vanessa",
        "Chat_8_Akib_Muhhamed",
        "Chat_9_Fahim_Akib",
        "Chat_10_Fahim_Muhhamed",
    ],
}
CATEGORIES = {1: "multi_hop", 2: "temporal", 3: "inference"}
_SESSION = re.compile(r"session_(\d+)")


def _read(mirror: Path, chat: str) -> dict[str, Any]:
    gitdir = mirror / REPO.replace("/", "+") / "repo"
    if not gitdir.exists():
        raise FileNotFoundError(f"{gitdir} is missing: fetch github:{REPO} first (the search tool's fetch)")
    shown = subprocess.run(
        ["git", "-C", str(gitdir), "show", f"{COMMIT}:data/{chat}.json"], check=True, capture_output=True
    )
    return json.loads(shown.stdout.decode("utf-8"))


def _date(text: str) -> datetime:
    return datetime.strptime(text, "%d.%m.%Y, %H:%M:%S").replace(tzinfo=timezone.utc)


def conversation(data: dict[str, Any], user_id: str) -> Conversation:
    """One chat as one user's sessions, with its questions' evidence as "s<session>:t<turn>" keys."""
    numbers = sorted(int(m.group(1)) for key in data if (m := _SESSION.fullmatch(key)))
    names = data["name"]
    c = Conversation(user_id=user_id, speakers=(names["speaker_1"], names["speaker_2"]))
    keys: dict[str, str] = {}
    for number in numbers:
        turns = [t for t in data[f"session_{number}"] if t["clean_text"].strip()]
        if not turns:
            continue
        session = len(c.sessions)
        c.sessions.append([(t["speaker"], t["clean_text"].strip()) for t in turns])
        c.dates.append(_date(data.get(f"session_{number}_date_time") or turns[0]["date_time"]))
        keys.update({t["dia_id"]: f"s{session}:t{i}" for i, t in enumerate(turns)})
    for qa in data.get("qa", []):
        evidence = [keys[e] for e in qa.get("evidence", []) if e in keys]
        category = CATEGORIES.get(qa.get("category"))
        if evidence and category:
            c.questions.append(Question(qa["question"], category, evidence))
    return c


def corpus(users: int = 5, split: str = "dev", mirror: Path = MIRROR) -> list[Conversation]:
    """The split's chats (at most `users` of them), one user each."""
    return [conversation(_read(mirror, chat), f"rt-{split}-{i}") for i, chat in enumerate(CHATS[split][:users])]
