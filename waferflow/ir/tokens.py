"""Tokens of the IR's text form, shared by the parser and its parallel clauses."""

from __future__ import annotations

import difflib
import re

# Token kinds (the regex group names).
_VAL = "val"  # %name
_TYPE = "type"  # f32[2,3]  (one token, checked by _type_of)
_WORD = "word"  # identifiers and keywords
_NUM = "num"  # -12, 1.5e-05, -inf
_STR = "str"  # a JSON string
_GNAME = "gname"  # @name
_PUNCT = "punct"  # = , : { } [ ] ( )
_LOC = "loc"  # loc("module", "aten") as printed: one token, a fast path
_COST = "cost"  # cost(flops=1, read=2, write=3) as printed: one token, a fast path
_BAD = "bad"  # any other single character
_EOF = "eof"

Token = tuple[str, str, int]  # (kind, text, offset)

_INT_RE = re.compile(r"-?[0-9]+")


def _suggest(word: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(word[:100], choices, n=3, cutoff=0.6)
    if close:
        return "; did you mean " + " or ".join(close) + "?"
    return ""
