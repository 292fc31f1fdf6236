"""Typed profile slots: the single-valued attributes a profile states — a HEURISTIC over the wording, not a model.

A profile "in a slot" says the one current value of an attribute of the user: where they live, their diet, their
role, their team, their employer, their timezone, their name, the language they want answers in, their first
language. Two profiles in the same slot cannot both be current, so the newer supersedes the older ("Lives in
London" -> "Lives in Austin", "Is pescatarian" -> "Is vegetarian", "Is strictly backend" -> "Is full-stack");
profiles in different slots never do ("Works at Acme" is the employer, "Works as a data engineer" the role).

`profile_slot` reads the slot from a profile's text, whichever extractor wrote it (the built-in rules phrase facts
canonically, an LLM in its own words), so the patterns accept the usual third-person phrasings ("Lives in", "Is
based in", "Resides in", "User lives in"). Anything else falls back to the older rule: a "<subject> is/are …"
statement is single-valued by its subject ("Phone number is …" -> "phone number"); other profiles have no slot
(many can hold at once: "Has a dog", "Likes jazz", "Speaks German").

Limits, on purpose: values are not understood (a city is a capitalised name after "lives in"), a compound fact
("Is a data engineer at Acme") gets its first slot only (role), and a diet means a regime (vegetarian, vegan, keto,
…) — restrictions and allergies ("Is gluten-free", "Has a peanut allergy") are multi-valued, never superseded by a
regime change.
"""

from __future__ import annotations

import re

#: The typed slots, in the order they are tried.
SLOTS = ("name", "timezone", "native_language", "language", "diet", "location", "team", "role", "employer")

LANGUAGES = (
    "english|spanish|french|german|italian|portuguese|dutch|polish|czech|slovak|hungarian|romanian|bulgarian|greek|"
    "turkish|russian|ukrainian|swedish|norwegian|danish|finnish|icelandic|estonian|latvian|lithuanian|croatian|"
    "serbian|slovenian|albanian|arabic|hebrew|persian|farsi|hindi|urdu|bengali|punjabi|tamil|telugu|marathi|"
    "gujarati|chinese|mandarin|cantonese|japanese|korean|vietnamese|thai|indonesian|malay|filipino|tagalog|swahili|"
    "amharic|yoruba|zulu|afrikaans|catalan|basque|galician|welsh|irish|esperanto"
)
LANGUAGE_RE = re.compile(rf"\b(?:{LANGUAGES})\b", re.I)

#: Diet regimes (one at a time); restrictions and allergies are deliberately not here.
DIET_REGIMES = (
    r"vegetarian|vegan|pescatarian|pescetarian|flexitarian|omnivore|omnivorous|keto|ketogenic|paleo|carnivore|"
    r"plant[- ]based|low[- ]carb|raw[- ]food|fruitarian|lacto[- ]ovo[- ]vegetarian|mediterranean diet"
)
DIET_RE = re.compile(rf"\b(?:{DIET_REGIMES})\b", re.I)
#: Eating anything / meat again: a regime too (the absence of one).
OMNIVORE_RE = re.compile(
    r"\beats? (?:everything|anything|all kinds of food|meat(?: again)?|fish and meat)\b|\bno dietary restrictions\b|"
    r"\b(?:does not|doesn't|no longer|never) eats? (?:meat|animal products)\b|\b(?:stopped|quit) eating meat\b",
    re.I,
)

_TZ_ABBREVIATIONS = (
    "UTC|GMT|CET|CEST|EET|EEST|WET|WEST|BST|IST|MSK|JST|KST|HKT|SGT|AEST|AEDT|ACST|AWST|NZST|NZDT|PST|PDT|MST|MDT|CST|"
    "CDT|EST|EDT|AKST|AKDT|HST|AST|ADT|NST|BRT|ART|WIB|ICT|PHT|SAST|CAT|EAT|WAT"
)
#: A timezone value: an abbreviation (with an offset), a named zone ("Pacific time"), or an IANA name.
TZ_VALUE = (
    rf"(?:(?:{_TZ_ABBREVIATIONS})(?:\s?[+-]\s?\d{{1,2}}(?::?\d\d)?)?\b|"
    r"(?:pacific|eastern|central|mountain|atlantic|alaska|hawaii|greenwich|central european|eastern european|"
    r"western european|british summer|india|japan|china|australian eastern)(?: standard| daylight| summer)?"
    r" (?:time|timezone|time zone)\b|"
    r"(?:Africa|America|Asia|Atlantic|Australia|Europe|Indian|Pacific)/[A-Z][A-Za-z_]+(?:/[A-Z][A-Za-z_]+)?)"
)
_TZ_ABBREV_RE = re.compile(rf"\b(?:{_TZ_ABBREVIATIONS})\b")  # case-sensitive: "est" in prose is not a zone

#: Nouns that name an occupation ("a site reliability engineer", "the on-call SRE", "a paralegal").
ROLE_NOUNS = (
    r"engineer|developer|dev|programmer|coder|designer|manager|director|analyst|scientist|researcher|architect|"
    r"consultant|teacher|professor|lecturer|instructor|tutor|student|nurse|doctor|physician|surgeon|dentist|"
    r"pharmacist|therapist|psychologist|psychiatrist|counsel+or|lawyer|attorney|solicitor|paralegal|accountant|"
    r"auditor|bookkeeper|writer|author|editor|journalist|reporter|copywriter|translator|interpreter|marketer|"
    r"recruiter|founder|co-?founder|ceo|cto|cfo|coo|cio|cpo|vp|president|lead|head|pm|sre|devops|admin|"
    r"administrator|technician|mechanic|electrician|plumber|carpenter|chef|cook|baker|barista|waiter|waitress|"
    r"bartender|librarian|officer|clerk|intern|freelancer|contractor|specialist|coordinator|owner|entrepreneur|"
    r"artist|musician|photographer|illustrator|animator|pilot|driver|farmer|salesperson|seller|rep|representative|"
    r"executive|secretary|receptionist|tester|strategist|economist|statistician|mathematician|physicist|chemist|"
    r"biologist|veterinarian|vet|paramedic|firefighter|soldier|coach|trainer|dietitian|nutritionist|caregiver|"
    r"nanny|social worker|product owner|scrum master|data steward|advisor|adviser|planner|producer|actor|"
    r"dancer|singer|professional|practitioner|midwife|radiologist|optician|surveyor|realtor|agent|broker|banker|"
    r"trader|investor|cashier|homemaker|retiree|pensioner|postdoc|phd candidate|hacker|maintainer|operator"
)
ROLE_NOUN_RE = re.compile(rf"\b(?:{ROLE_NOUNS})s?\b", re.I)
#: A specialisation that says the role ("strictly backend", "full-stack").
ROLE_SPECIALISATIONS = (
    r"back[- ]?end|front[- ]?end|full[- ]?stack|devops|mobile|ios|android|embedded|data|ml|machine learning|"
    r"infra|infrastructure|platform|security|qa|ux|ui|web|game|cloud|database|dba"
)
_ROLE_SPECIAL_RE = re.compile(
    rf"^is (?:now |strictly |mostly |purely |mainly |only |fully |a |an |more )*(?:{ROLE_SPECIALISATIONS})"
    rf"(?: (?:only|now|these days|developer|engineer|person|dev))?\b(?!\s+(?:team|squad|group|department))",
    re.I,
)
#: Words that make "the X <word>" a team rather than a place or a role.
TEAM_WORDS = (
    r"team|squad|group|department|dept|org|organisation|organization|unit|crew|tribe|guild|division|pod|chapter"
)

_SUBJECT_PREFIX_RE = re.compile(r"^(?:the user|user|they|he|she)(?:'s)?\s+(?=[a-z])", re.I)
_LEAD_ADVERB_RE = re.compile(r"^(?:now|currently|recently|these days|nowadays|still|also|just)\s+", re.I)

_NAME_RE = re.compile(
    r"^(?:(?:first |full |given |preferred )?name is|name's|is named|is called|goes by|prefers to be called|"
    r"wants to be called|likes to be called|asks to be called)\b",
    re.I,
)
_TIMEZONE_RE = re.compile(
    rf"^(?:(?:preferred |local )?time ?zone is\b|time ?zone:|(?:is|works|lives) (?:on|in) (?:the )?{TZ_VALUE}|"
    rf"(?:is |works )?(?:on|in) (?:the )?\S+(?: \S+)? time ?zone\b|uses (?:the )?{TZ_VALUE})",
    re.I,
)
_NATIVE_LANGUAGE_RE = re.compile(
    r"^(?:(?:first|native|mother) (?:language|tongue) is|is a native (?:\w+ )?speaker|"
    rf"(?:{LANGUAGES}) is (?:their|the user's|his|her) (?:first|native) language)\b",
    re.I,
)
_LANGUAGE_RE = re.compile(
    r"^(?:(?:prefers|wants|likes|needs|asks for|expects) (?:(?:to (?:get|receive|have|be answered|be addressed|be "
    r"spoken to|be written to|communicate|talk|chat)|answers|replies|responses|messages|communication|everything|"
    r"all (?:answers|replies|responses|communication)|the agent to (?:answer|reply|respond|write|speak|talk)|"
    r"being answered|being addressed)\s+)*(?:(?:written |only )?in )?"
    rf"(?:{LANGUAGES})\b|(?:preferred|reply|answer|response|working) language is)",
    re.I,
)
_DIET_VERB_RE = re.compile(
    r"^(?:is|has become|became|went|has gone|follows|eats|is on|keeps|maintains|diet is|has (?:switched|changed) to|"
    r"switched to|is following|has a|prefers|does not eat|doesn't eat|no longer eats|avoids|stopped eating|"
    r"started eating|eats)\b",
    re.I,
)
_LOCATION_RE = re.compile(
    r"^(?i:lives|is living|resides|is based|is located|is settled|has settled|settled|has moved|moved|has relocated|"
    r"relocated|lives and works|is now based|home is|hometown is|current city is|city is)"
    r"(?i: (?:now|currently|permanently|full[- ]time))?"
    r"(?i: (?:in|to|out of|near|outside|at))?(?i: the)? (?:[A-Z]|(?i:city of |town of )[A-Z])",
)
_TEAM_RE = re.compile(
    rf"^(?:(?:is|works|sits) (?:now )?(?:on|in|with|part of|a member of) (?:the |a |an )?(?:[\w&/-]+ ){{0,4}}?"
    rf"(?:{TEAM_WORDS})\b|(?:leads|manages|runs|heads|joined|has joined|belongs to|moved to|switched to) "
    rf"(?:the |a |an )(?:[\w&/-]+ ){{0,4}}?(?:{TEAM_WORDS})\b|team is\b)",
    re.I,
)
_ROLE_RE = re.compile(
    r"^(?:works as|is working as|role is|job is|job title is|title is|position is|occupation is|profession is|"
    r"has been promoted to|was promoted to|got promoted to|is promoted to|"
    r"is (?:now |currently )?(?:working|employed) as|"
    rf"(?:became|has become|is becoming) (?:a |an |the )?(?:[\w/&'-]+ ){{0,4}}?(?:{ROLE_NOUNS})s?)\b",
    re.I,
)
_IS_ROLE_RE = re.compile(
    rf"^is (?:now |currently |still )?(?:a |an |the )?(?:[\w/&'-]+ |[\w/&']+-){{0,5}}?(?:{ROLE_NOUNS})s?\b", re.I
)
_EMPLOYER_RE = re.compile(
    r"^(?:(?i:works (?:at|for)|is employed (?:at|by)|employer is|company is|started (?:a new job |working )?at)|"
    r"(?i:has joined|joined|is at|is (?:now )?with) [A-Z][\w&.-]*(?: [A-Z][\w&.-]*)*(?i: since| now|$| as\b))",
)
#: "<role> at <Org>" inside a compound fact ("Is a data engineer at Acme").
_ROLE_AT_RE = re.compile(
    rf"\b(?:works|working|{ROLE_NOUNS})s? (?:at|for) (?!(?:the |a |an )?(?:[\w-]+ )?(?:{TEAM_WORDS})\b)", re.I
)
#: The older catch-all: "<subject> is/are …" is single-valued by its subject.
_SUBJECT_IS_RE = re.compile(r"^([\w'-]+(?: [\w'-]+){0,2}) (?:is|are)\b", re.I)
_NOT_SUBJECTS = {"is", "it", "this", "that", "there", "what", "who", "he", "she", "they", "one", "each", "all"}
_POSSESSIVE_RE = re.compile(r"^(?:their|his|her|the user's|user's)\s+", re.I)


def _core(content: str) -> str:
    text = " ".join(content.replace("\u2019", "'").split()).strip().rstrip(".!")
    text = _SUBJECT_PREFIX_RE.sub("", text)
    text = _LEAD_ADVERB_RE.sub("", text)
    return text[:1].upper() + text[1:] if text else text


def typed_slots(content: str) -> list[str]:
    """Every typed slot a profile's wording shows, in `SLOTS` order ([] when none does)."""
    text = _core(content)
    lower = text.lower()
    found: list[str] = []
    if _NAME_RE.match(text):
        found.append("name")
    short = len(text.split())
    if (
        _TIMEZONE_RE.match(text)
        or (short <= 8 and re.search(r"\btime ?zone\b", lower))
        or (short <= 6 and re.match(r"^(?:is |works )?(?:on|in) ", lower) and _TZ_ABBREV_RE.search(text))
    ):
        found.append("timezone")
    if _NATIVE_LANGUAGE_RE.match(text):
        found.append("native_language")
    elif _LANGUAGE_RE.match(text):
        found.append("language")
    if (
        _DIET_VERB_RE.match(text)
        and (DIET_RE.search(text) or OMNIVORE_RE.search(text))
        and not re.search(r"\b(?:restaurants?|recipes?|cafes?|places|options|food trucks?|cookbooks?)\b", lower)
    ) or OMNIVORE_RE.match(text):
        found.append("diet")
    if "timezone" not in found and _LOCATION_RE.match(text) and not re.search(rf"\b(?:{TEAM_WORDS})\b", lower):
        found.append("location")
    if _TEAM_RE.match(text):
        found.append("team")
    if "team" not in found and (_ROLE_RE.match(text) or _IS_ROLE_RE.match(text) or _ROLE_SPECIAL_RE.match(text)):
        found.append("role")
    elif "team" in found and _IS_ROLE_RE.match(text) and not re.match(r"^is (?:on|in|with|part of)\b", lower):
        found.append("role")
    if (_EMPLOYER_RE.match(text) or _ROLE_AT_RE.search(text)) and not re.match(
        r"^works (?:at|for) (?:home|night|nights|weekends|a living|the moment)\b", lower
    ):
        found.append("employer")
    return [slot for slot in SLOTS if slot in found]


def profile_slot(content: str) -> str | None:
    """The single-valued attribute a profile sets, if its wording shows one (heuristic; None when unsure): the
    first typed slot (`typed_slots`), else the subject of a "<subject> is/are …" statement."""
    typed = typed_slots(content)
    if typed:
        return typed[0]
    text = _core(content)
    match = _SUBJECT_IS_RE.match(text)
    if match:
        subject = _POSSESSIVE_RE.sub("", match.group(1).lower())
        if subject.split(" ", 1)[0] not in _NOT_SUBJECTS:
            return subject
    return None


def is_typed(slot: str | None) -> bool:
    return slot in SLOTS


#: How a request names a slot without its value ("forget my diet", "where I work").
_SLOT_NAMES = (
    ("diet", r"\b(?:diet|dietary|what (?:they|i) eat|eating habits)\b"),
    ("location", r"\b(?:address|where (?:they|i) live|home town|hometown|city|location|where (?:they're|i'm) based)\b"),
    ("employer", r"\b(?:employer|company|where (?:they|i) work)\b"),
    ("role", r"\b(?:job|role|title|occupation|profession)\b"),
    ("team", r"\bteam\b"),
    ("timezone", r"\btime ?zone\b"),
    ("name", r"\bname\b"),
    ("language", r"\blanguage\b"),
)


def slot_named(text: str) -> str | None:
    """The typed slot a text names by its attribute ("Their diet" -> diet, "Where they work" -> employer), if any."""
    lower = text.lower()
    for slot, pattern in _SLOT_NAMES:
        if re.search(pattern, lower):
            return slot
    return None
