"""Characters stripped from text before it is stored: controls and invisible formatting.

Stored text reaches prompts, indexes, the dashboard and analysts' terminals. Control characters (C0 except tab,
newline and carriage return; DEL; C1) and invisible format characters (zero-width space and joiners, direction
marks, bidi embeddings, overrides and isolates, word joiner and invisible operators, soft hyphen, byte-order mark)
can hide or reorder what a reader sees ("Trojan Source"), so they are removed. The line and paragraph separators
U+2028 / U+2029 go with them, like the C0/C1 separators (VT, FF, FS..US, NEL): invisible in most renderings, a line
break to some parsers (JavaScript string literals before ES2019, `str.splitlines`), so text shown as one line could
be read as two.

Joiners are kept where they do real work: a zero-width joiner between two emoji (a ZWJ sequence such as a family or
a profession emoji), and either joiner between two letters of a script that shapes with them (Arabic, Persian,
Indic scripts: code points from U+0590 on). Anywhere else, e.g. inside a Latin word, they are only a disguise.
"""

from __future__ import annotations

import re
import unicodedata

_INVISIBLE_RE = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2028\u2029"
    "\u2060-\u2064\u2066-\u206f\ufeff]"
)
ZWNJ, ZWJ = "\u200c", "\u200d"
_EMOJI_MODIFIERS = "\ufe0f\u20e3"  # variation selector 16 and the keycap: an emoji's own tail
_JOINING_SCRIPTS_FROM = 0x0590


def invisible_in(text: str) -> str | None:
    """The first character `strip_invisible` would remove from `text`, or None (for identifiers, which are refused
    rather than silently changed: two ids must never become one)."""
    if not _INVISIBLE_RE.search(text):
        return None
    stripped = strip_invisible(text)
    if stripped == text:
        return None  # only joiners that join
    return next(ch for i, ch in enumerate(text) if i >= len(stripped) or stripped[i] != ch)


def strip_invisible(text: str) -> str:
    """`text` without control and invisible format characters (joiners kept where they join, see above)."""
    if not _INVISIBLE_RE.search(text):
        return text  # the common case: one regex scan
    out = []
    for i, ch in enumerate(text):
        if ch in (ZWJ, ZWNJ) and _joins(ch, text[i - 1] if i else "", text[i + 1] if i + 1 < len(text) else ""):
            out.append(ch)
        elif not _INVISIBLE_RE.match(ch):
            out.append(ch)
    return "".join(out)


def _joins(joiner: str, before: str, after: str) -> bool:
    if not before or not after:
        return False
    if joiner == ZWJ and _is_emoji(before, tail_ok=True) and _is_emoji(after):
        return True
    return all(unicodedata.category(c)[0] in "LM" and ord(c) >= _JOINING_SCRIPTS_FROM for c in (before, after))


def _is_emoji(ch: str, tail_ok: bool = False) -> bool:
    """An emoji-like symbol (category So, e.g. U+1F468, U+2640) — or, before a joiner, an emoji's modifier tail
    (VS16, keycap, a skin tone)."""
    if tail_ok and (ch in _EMOJI_MODIFIERS or 0x1F3FB <= ord(ch) <= 0x1F3FF):
        return True
    return unicodedata.category(ch) == "So"
