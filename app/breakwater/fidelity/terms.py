"""The words of a fact: how a text is read (`normalise`: case, width, quoting and punctuation do not
count, where a sentence or a line ends does), where a term stands on token boundaries, and the terms
that identify a sentence, an exit status or a failure, in English and in Chinese.

`probes` builds each fact's matcher from these; `scoring` finds its terms in the requests.
"""

from __future__ import annotations

import math
import re
import unicodedata
from functools import lru_cache

KEY_WORDS = 8               # the key words of a sentence a matcher looks for, at most
KEY_IDENTS = 3              # the identifiers and numbers it requires, at most
WORD_SHARE = 0.6            # of the key words, at least this share must be there
# one regular expression: str.translate looks each character up in a dict, 50 ns a character, which
# was most of eval's time on a session with non-ASCII text
_PUNCT = re.compile("[" + re.escape("`*\"'“”‘’\\()[]{}<>,;:!?=|→…«»") + "]")
_TAG = re.compile(r"</?[A-Za-z_][\w-]*>")
_TOKEN = re.compile(r"[\w.@/+#~%-]*\w")
_CAMEL = re.compile(r"[a-z][A-Z]|[A-Z]{2,}[a-z]")
STOP = frozenset("""a about above after again all also am an and any are as at be because been before being
below between both but by can could did do does doing done down during each few for from further had has have
having he her here hers him his how i if in into is it its itself just let lets like me more most my myself
now of off on once or other our ours out over own please same she should so some such than that the their them
then there these they this those through to too under until up us very was we were what when where which while
who whom why will with would you your yours want need make sure think see look going use using get got also
may might must shall via per one two okay ok yes thanks thank hi hello""".split())
NEGATIONS = ("no", "not", "never", "without", "avoid", "don t", "doesn t", "dont", "can t", "cannot", "shouldn t",
             "mustn t", "won t", "isn t", "aren t", "off limits", "forbidden", "disallowed", "nothing", "none",
             "instead of", "rather than", "except", "only", "stop")
NEGATION_WORDS = frozenset(w for n in NEGATIONS for w in n.split())
# the same in Chinese: a negated instruction keeps its negation ("不要修改…" is not "修改…")
NEGATIONS_CJK = ("不要", "不能", "不得", "不许", "不准", "不可", "不用", "无需", "禁止", "避免", "别", "勿", "只能", "只改",
                 "只用", "而不是")
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
CJK_CHAR = re.compile(f"[{_CJK}]")
# Chinese has no spaces: a run is cut at its function words and negations, and its key words are the
# pairs of characters left (数据库迁移 -> 数据, 据库, 库迁, 迁移), as memory retrieval reads it
_CJK_CUT = re.compile("|".join(NEGATIONS_CJK) + "|谢谢|好的|明白|收到|辛苦"
                      "|[的了吗呢吧啊呀么我你他她它们是在和与及或就都也还又着过被给让对从向这那个一请帮把之其所而"
                      f"]|[^{_CJK}]+")
def status_words(code: int) -> tuple[str, ...]:
    """Every common way to say a command's exit status (`exit code 0`, `exited with status 1`,
    `returned 0`, `→ exit 0`, `each exiting with code 0`), and for success or failure the words that
    say so without the number: a summary's wording never decides whether it carries the fact."""
    c = code
    # "code N" and "status N" stand in every longer form: exit code, status code, with code, exit status
    words = [f"exit {c}", f"exits {c}", f"exited {c}", f"exiting {c}", f"code {c}", f"status {c}", f"rc {c}",
             f"returncode {c}", f"returned {c}", f"returns {c}", f"returning {c}", f"exited with {c}",
             f"exits with {c}", f"exiting with {c}", f"returned with {c}", f"exit value {c}", f"return value {c}",
             f"code of {c}", f"status of {c}"]
    words += ["succeeded", "succeeds", "success", "successful", "successfully", "passed", "passes", "ok", "worked",
              "cleanly", "without errors", "without error", "no errors"] if code == 0 \
        else ["failed", "fails", "failing", "failure", "errored", "crashed", "non-zero", "nonzero", "raised"]
    return tuple(dict.fromkeys(words))


# what says a test or a build failed: a test id or a file:line alone is no failure (a test that failed
# and later passed is named by its id both times)
FAILURE_MARKERS = ("failed", "fails", "failing", "failure", "failures", "error", "errors", "errored", "broke",
                   "broken", "assertionerror", "失败", "错误")


# where a sentence ends: . or ? after a word (not `pip install -e .`, not `...`) and before a blank,
# and the Chinese full stop; lines end at newlines. Each becomes a newline, the one break normalise
# keeps. Not `!`: npm says `npm ERR! code ERESOLVE` in one line. The stop is matched first and what
# stands before it looked behind at: a pattern starting with its character set is searched for by
# that set, three times as fast as one starting with the look-behind
_SENTENCE_END = re.compile(r"[.?](?<=[^\s.][.?])(?=\s)")


def normalise(text: str) -> str:
    """Case, width, quoting, markup and punctuation between words do not change a fact; where a
    sentence or a line ends does (a newline: the parts of a fact are found in one, `satisfied`)."""
    ascii_text = text.isascii()
    # NFKC leaves ASCII as it is, and its casefold is lower
    text = text.lower() if ascii_text else unicodedata.normalize("NFKC", text).casefold().replace("。", "\n")
    # summaries quote tool calls as JSON, where newlines and quotes come escaped
    text = _TAG.sub(" ", text.replace("\\n", " ").replace("\\t", " "))
    text = _PUNCT.sub(" ", _SENTENCE_END.sub("\n", text))
    # str.split and join per line: a regex collapsing the blanks but not the newlines took four times as long
    return "\n".join(filter(None, (" ".join(line.split()) for line in text.split("\n"))))


def _word(c: str) -> bool:
    # a Chinese or Japanese character is a word of its own: its neighbours are boundaries
    return (c.isalnum() and not CJK_CHAR.match(c)) or c == "_"


def at_boundary(text: str, start: int, end: int, prefix: bool = False) -> bool:
    """Whether text[start:end] stands on token boundaries: not inside a word, a dotted name or a path
    (a `prefix` may end inside a word)."""
    if start > 0:
        c = text[start - 1]
        if _word(c) or (c in ".-" and start > 1 and _word(text[start - 2])):
            return False
    if end < len(text) and not prefix:
        c = text[end]
        if _word(c) or (c in "./-" and end + 1 < len(text) and _word(text[end + 1])):
            return False
    return True


def _tokens(text: str) -> list[str]:
    return [t.strip(".-/") for t in _TOKEN.findall(normalise(text)) if t.strip(".-/")]


def key_terms(text: str) -> tuple[list[str], list[str]]:
    """(identifiers and numbers, key words) of a sentence: the first are what it names exactly (a
    path, a dotted or snake_case name, a number, a CamelCase name), the second its content words."""
    camel = {w.casefold() for w in re.findall(r"[\w.]+", text) if _CAMEL.search(w)}
    idents, words = [], []
    for t in _tokens(text):
        if any(c.isdigit() for c in t) or any(c in t for c in "_./@#") or t in camel:
            if len(t) >= 2 and t not in idents:
                idents.append(t)
        elif CJK_CHAR.search(t):
            words += [w for w in _cjk_words(t) if w not in words]
        elif len(t) >= 3 and t not in STOP and t not in NEGATION_WORDS and not t.isdigit():
            stem = stem_of(t)
            if stem not in words:
                words.append(stem)
    return idents, words


def _cjk_words(token: str) -> list[str]:
    """The key words of a token holding Chinese: its words in other scripts (stems), and the pairs of
    characters of its Chinese runs cut at function words and negations."""
    out = [stem_of(w) for w in re.findall(rf"[^{_CJK}]+", token) if len(w) >= 3 and w not in STOP]
    for run in _CJK_CUT.split(token):
        out += [run[i:i + 2] for i in range(len(run) - 1)]
    return out


_SUFFIXES = ("ing", "ed", "es", "s", "e", "ly")
PREFIX = "*"   # a term ending so is a stem: found at the start of a word, whatever ends it


def stem_of(word: str) -> str:
    """A key word as a stem (`touched` and `touch` -> `touch*`): a paraphrase inflects its words."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3 and word[:-len(suffix)].isalpha():
            return word[:-len(suffix)] + PREFIX
    return word + PREFIX if word.isalpha() else word


def path_tail(path: str) -> str:
    """The last two components of a path: what a summary names whether it writes it absolute or not."""
    parts = [p for p in normalise(path).split("/") if p and p != "."]
    return "/".join(parts[-2:])


# an agent says the same sentence many times (a decision restated, an error seen again): its matcher is made once
@lru_cache(maxsize=4096)
def text_parts(text: str, idents_max: int = KEY_IDENTS, extra: tuple[tuple[str, ...], ...] = ()
                ) -> tuple[tuple[tuple[str, ...], ...], int, int] | None:
    """(parts, must, need) of a sentence's matcher: its identifiers required, then `extra` parts
    required, then its key words, of which WORD_SHARE must be there."""
    idents, words = key_terms(text)
    idents = sorted(idents[:8], key=len, reverse=True)[:idents_max]
    words = words[:KEY_WORDS]
    if not idents and len(words) < 2:
        return None
    parts = tuple((i,) for i in idents) + extra + tuple((w,) for w in words)
    return parts, len(idents) + len(extra), math.ceil(WORD_SHARE * len(words))


def negated(text: str) -> bool:
    norm = f" {normalise(text)} "
    return any(f" {w} " in norm for w in NEGATIONS) or "n t " in norm or any(w in norm for w in NEGATIONS_CJK)
