"""The wording of planted facts and recall probes, and how a reply is judged.

One grammar shared by the agent that plants a fact and asks about it (`session`) and
by the twin that answers from the prompt it was sent (`twin`): a fact is a statement
that names a *key* and a *value*; a probe is a question that names the key. Reading a
prompt with this grammar is all the twin knows of facts — it has no other channel to
the answer, so on the twin an answer is right exactly when the statement is in the
prompt (recall = retention, by construction).

Pure functions over strings; no randomness here (values are drawn by the planter).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Literal, get_args

FactKind = Literal["user_value", "tool_value", "decision", "edited_path"]
FACT_KINDS: tuple[FactKind, ...] = get_args(FactKind)

# What the twin replies when the prompt holds no statement for the asked key.
UNKNOWN_ANSWER = "I don't know."
QUESTION_MARK = "Recall check:"

_VALUE = r"[A-Za-z0-9][A-Za-z0-9_.:/-]*[A-Za-z0-9]"


@dataclass(frozen=True, slots=True)
class Fact:
    """One planted fact of one session: `key` names it in the statement and the
    question; `value` is the expected answer (unique per session and run)."""

    fact_id: str          # e.g. "s0003:f2"
    kind: FactKind
    key: str
    value: str
    turn: int             # the turn it is planned for (planted at the first eligible one)


def statement(kind: FactKind, key: str, value: str) -> str:
    """The text that carries the fact (edited_path: the Edit call's `old_string`
    names the key; the value is the call's `file_path`, see `edit_input`)."""
    if kind == "user_value":
        return f"Remember for later: the {key} is {value}."
    if kind == "tool_value":
        return f'{key} = "{value}"'
    if kind == "decision":
        return f"Decision: the {key} will be {value}."
    return f"def {key}(self) -> None:"


def edit_input(key: str, value: str) -> dict[str, str]:
    """The Edit tool call's input that plants an edited_path fact."""
    old = statement("edited_path", key, value)
    return {"file_path": value, "old_string": old, "new_string": old + "\n    return None"}


def question(kind: FactKind, key: str) -> str:
    """The probe's question (appended to the last user message of the context)."""
    if kind == "tool_value":
        what = f"what is `{key}` set to in the file you read"
    elif kind == "edited_path":
        what = f"which file did you edit to change `{key}`"
    else:
        what = f"what is the {key}"
    return f"{QUESTION_MARK} {what}? Reply with the value only."


_QUESTIONS: tuple[tuple[FactKind, re.Pattern[str]], ...] = (
    ("tool_value", re.compile(re.escape(QUESTION_MARK)
                              + r" what is `([^`\n]+)` set to in the file you read\?")),
    ("edited_path", re.compile(re.escape(QUESTION_MARK)
                               + r" which file did you edit to change `([^`\n]+)`\?")),
    ("user_value", re.compile(re.escape(QUESTION_MARK) + r" what is the ([^?\n]+)\?")),
)


def parse_question(text: str) -> tuple[FactKind, str, int] | None:
    """(kind, key, where the question starts) of the last probe question in `text`
    (user_value stands for decision too: both ask "what is the KEY")."""
    best: tuple[FactKind, str, int] | None = None
    for kind, pat in _QUESTIONS:
        for m in pat.finditer(text):
            if best is None or m.start() > best[2]:
                best = (kind, m.group(1), m.start())
    return best


def find_value(text: str, kind: FactKind, key: str) -> str | None:
    """The value the earliest statement of `key` in `text` gives, or None (the
    earliest: a later copy of a settings line may have been edited)."""
    k = re.escape(key)
    if kind == "tool_value":
        pats = [rf'{k} = "({_VALUE})"']
    elif kind == "edited_path":
        pats = [rf'"file_path":\s*"({_VALUE})"[^{{}}]*?def {k}\(']
    else:   # the question does not say whether the user or the assistant stated it
        pats = [rf"the {k} is ({_VALUE})\.", rf"the {k} will be ({_VALUE})\."]
    found: tuple[int, str] | None = None
    for p in pats:
        m = re.search(p, text)
        if m is not None and (found is None or m.start() < found[0]):
            found = (m.start(), m.group(1))
    return None if found is None else found[1]


def answer_from(text: str) -> str | None:
    """The twin's reply to a prompt whose end holds a probe question: the value stated
    for its key before the question, or UNKNOWN_ANSWER; None when there is no question."""
    q = parse_question(text)
    if q is None:
        return None
    kind, key, at = q
    value = find_value(text[:at], kind, key)
    return UNKNOWN_ANSWER if value is None else value


_SALIENT = re.compile(rf"Remember for later: the [^\n]*? is {_VALUE}\."
                      rf"|Decision: the [^\n]*? will be {_VALUE}\.")


def summary_keeps(text: str) -> list[str]:
    """The statements the twin's synthetic summary carries over, in order, once each:
    what the user asked to be remembered and the decisions the assistant stated.
    Values seen only in tool results and the paths of edited files are not kept
    (artifact details are what summaries lose most often)."""
    seen: dict[str, None] = {}
    for m in _SALIENT.finditer(text):
        seen.setdefault(m.group(0), None)
    return list(seen)


def normalise(text: str) -> str:
    """Case-folded, NFKC, quotes/backticks/brackets and a leading "./" of a path
    dropped, whitespace collapsed."""
    t = unicodedata.normalize("NFKC", text).casefold()
    t = re.sub(r"[`'\"*()\[\]<>]", " ", t)
    t = re.sub(r"(?<![\w./-])\./", "", t)
    return " ".join(t.split())


def is_correct(reply: str, expected: str) -> bool:
    """The reply names the expected value (normalised; not as part of a longer value)."""
    r, e = normalise(reply), normalise(expected)
    if not e:
        return False
    return re.search(rf"(?<![a-z0-9_.:/-]){re.escape(e)}(?![a-z0-9_/-]|[.:][a-z0-9])", r) is not None
