"""The tolerant JSON/JSONC parser: every error becomes a :class:`JsonIssue` with the edits that repair it.

How it reads a document (:class:`_Parser`, one method per state or construct):

1. **Wrappers.** Leading prose lines of a chat reply and a Markdown code fence around the document are reported
   (with edits that delete them) and the parsed span shrinks to what is inside.
2. **One left-to-right pass** over the tokens of :mod:`.jsonc_lex`, driven by a stack of open containers and one
   state: ``value`` (a value is expected), ``key`` (a property name), ``colon``, ``after`` (a value inside a
   container was read: a comma or a closer should follow) and ``done`` (the top-level value is complete). No
   recursion, so nesting depth is unbounded; linear time. Where a value is expected and the nest is shallow, the
   C scanner tries to take the whole value at once (most of a large document never reaches Python).
3. **Recovery as if repaired.** On an error the parser records the issue and its edits, then moves to the state it
   would be in had those edits been applied (a missing comma re-reads the token as the next member; a key missing
   its closing quote resumes at its colon). So applying every issue's edits at once gives the "fix all" result,
   and applying one issue's edits leaves the others where they were.
4. **Comments** are fine in JSONC and an error (deleted by the repair) in JSON, in every state.
5. **After the document**: extra closers are deleted, trailing prose of a chat reply is deleted, anything else has
   no safe repair. **At the end of the input** a truncated document gets its dangling member completed and every
   open container closed, each closer on its own line where its opener began one.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field

from .jsonc_lex import (
    _SQ_SCAN,
    _STR_SCAN,
    ARR_CLOSE,
    ARR_OPEN,
    BAD_CHAR,
    BAD_NUMBER,
    CLOSERS,
    COLON,
    COMMA,
    COMMENT,
    LITERAL,
    NUMBER,
    OBJ_CLOSE,
    OBJ_OPEN,
    OPEN_COMMENT,
    SQ_STRING,
    STRING,
    UNTERMINATED,
    VALUE_KINDS,
    WORD,
    Lexer,
    _first_bad,
    _is_good_escape,
    brackets,
    tokenize,
)

_PROSE_WORD = re.compile(r"[A-Za-z]{2,}")
_CLOSING_FENCE = re.compile(r"^[ \t]*(?:`{3,}|~{3,})[ \t]*$", re.M)


def _closer_outdented(text: str, span: tuple[int, int]) -> bool:
    """A multi-line ``{...}`` whose closing brace sits left of its opening line's indentation (the value took a
    parent's closer: its own "}" line is missing)."""
    a, b = span
    if text[a] != "{" or text.find("\n", a, b) < 0:
        return False
    ol = text.rfind("\n", 0, a) + 1
    cl = text.rfind("\n", 0, b - 1) + 1
    o_line, c_pre = text[ol:a], text[cl : b - 1]
    if c_pre.strip(" \t"):
        return False
    return len(c_pre) < len(o_line) - len(o_line.lstrip(" \t"))


def _prose_lead(text: str, end: int) -> int:
    """Where the JSON (or its fence) starts after leading lines of prose ("Here is the JSON:"); 0 when none."""
    pos, words = 0, False
    while pos < end:
        nl = text.find("\n", pos, end)
        line = text[pos : end if nl < 0 else nl].strip()
        if line.startswith(("{", "[", "```", "~~~")):
            return pos if words else 0
        m = _PROSE_COLON.match(text, pos, end if nl < 0 else nl)
        if m and (" " in m.group(1).strip() or m.group(1)[0].isupper()):
            # "Result: {...}" on one line: a label (capitalised, or words) then the JSON; a lone lower-case name
            # before a colon may be a member whose object lost its braces (name: {...}), so that stays
            return m.end()
        if line and not line[0].isalpha() and not _MD_PROSE.match(line):
            return 0
        words = words or bool(line)
        if nl < 0:
            return 0
        pos = nl + 1
    return 0


# characters a reader takes for white space that JSON does not (JSON has only space, tab, CR, LF)
_ZERO_WIDTH = frozenset("\u200b\u2060")
_ODD_SPACE = (
    frozenset(
        "\u000b\u000c\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
        "\u2028\u2029\u202f\u205f\u3000"
    )
    | _ZERO_WIDTH
)
# a prose line in Markdown dress: a heading, emphasis or a quote ("### Output", "**JSON:**", "> Note")
_MD_PROSE = re.compile(r"(?:#{1,6}[ \t]+|[*_]{1,3}|>[ \t]*)[A-Za-z]")
# a JavaScript regular expression literal ending a value: /body/flags, then , } ] or the line's end
_REGEX_LITERAL = re.compile(
    r"/(?![/*])(?:[^/\\\n\[]|\\.|\[(?:[^\]\\\n]|\\.)*\])+/[dgimsuvy]*(?=[ \t]*(?:[,}\]]|\r?\n|$))"
)
# an XML-style tag opening the document, the JSON right after it (on its line or the next)
_TAG_OPEN = re.compile(r"[ \t\r\n]*<([A-Za-z][\w.-]*)[ \t]*>[ \t]*\r?\n?[ \t\r\n]*(?=[{\[])")
_PROSE_COLON = re.compile(r"[ \t]*([A-Za-z][^:{}\[\]\"'\n]*):[ \t]*(?=[{\[])")
_KEY_NO_CLOSE = re.compile(r'"[A-Za-z_$@][^"\\\n:]*:(?=[ \t]*["\[{\w-])')
_COLON_NEXT = re.compile(r"[ \t]*:")
_NEXT_KEY_LINE = re.compile(r'[ \t]*\r?\n\s*"(?:[^"\\\n]|\\.)*"[ \t]*:')
_HAS_ALNUM = re.compile(r"[^\W_]|[$_]")

# Punctuation that is part of a bare word it touches (a path, a regular expression, an address): the word runs on
_JOINS = frozenset("/@#%&?!~^|*<>=")
# JSONP: ``name(`` (a dotted JavaScript name) before an object or array, ``)`` (and ``;``) ending the document
_JSONP_OPEN = re.compile(r"\s*([A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*)[ \t]*\([ \t\n\r]*(?=[{\[])")
_JSONP_CLOSE = re.compile(r"[ \t\n\r]*\)[ \t]*;?[ \t]*(\n?)[ \t\n\r]*\Z")
# JSON as the value of JavaScript: an assignment or export (const config = {...};, module.exports = [...]), maybe in a
# script tag
_ASSIGN_OPEN = re.compile(
    r"[ \t\r\n]*(?P<w>(?P<tag><script\b[^>\n]*>[ \t\r\n]*)?"
    r"(?:export[ \t]+default|module\.exports[ \t]*=|(?:(?:const|let|var)[ \t]+)?[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*"
    r"[ \t]*=)[ \t]*\r?\n?[ \t]*)(?=[{\[])"
)
_ASSIGN_CLOSE = re.compile(r"[ \t\n\r]*?;?[ \t]*(\n?)[ \t\n\r]*\Z")
_SCRIPT_CLOSE = re.compile(r"[ \t\n\r]*;?[ \t\n\r]*</script>[ \t]*(\n?)[ \t\n\r]*\Z")
_FENCE_LINE = re.compile(r"[ \t]*(`{3,}|~{3,})[^\n]*(?:\n|$)")


@dataclass(slots=True)
class JsonIssue:
    start: int
    end: int
    code: str
    message: str
    edits: list[tuple[int, int, str]] = field(default_factory=list)  # empty: no deterministic repair
    container: int = -1  # offset of the innermost enclosing '{' / '[' (-1: top level), for span fallbacks


@dataclass(slots=True)
class ParseResult:
    issues: list[JsonIssue]
    tokens: list[tuple[str, int, int]]  # tokens the Python loop saw (values parsed in C are not listed)
    start: int = 0
    end: int = 0
    marks: list[int] = field(default_factory=list)  # token-boundary offsets seen (for cheap re-synchronisation)


def _fix_body(body: str, single: bool = False) -> str:
    """Repair a string body in place: only bad escapes (``\\'`` read as the apostrophe it escapes), raw control
    characters (and, from single quotes, bare double quotes) change, so the value the user meant is kept."""

    literal = not single and _literal_backslashes(body)

    def sub(m: re.Match[str]) -> str:
        t = m.group()
        if _is_good_escape(t):
            return "\\" + t if literal and t[1] in "bfnrt/" else t
        if t == '"':
            return '\\"'
        if single and len(t) == 4 and t.startswith("\\x"):
            return "\\u00" + t[2:]  # '\x41' is "A" in JavaScript and Python
        if t.startswith("\\"):
            return "'" if t == "\\'" else "\\" + t  # \' escapes an apostrophe (JavaScript, Python)
        return json.dumps(t)[1:-1]

    return (_SQ_SCAN if single else _STR_SCAN).sub(sub, body)


# a bad escape that reads as a path separator or a regex class (C:\Users, \.\pipe, \d+): \' is JavaScript's apostrophe
_PATH_ESCAPE = re.compile(r"\\[A-Za-z0-9.@_$*%~-]")
_JSON_ESCAPE = re.compile(r'\\(?:\\|"|u[0-9a-fA-F]{4})')


def _literal_backslashes(body: str) -> bool:
    """Whether the writer of a string body did not escape its backslashes at all: it has a bad escape that reads as
    a path separator or a regex class (``C:\\modules\\tinymce``: ``\\m``), and no escape that shows JSON's rules were
    known (``\\\\``, ``\\"``, ``\\u00e9``). Then its ``\\t`` / ``\\n`` are path separators too (``\\tinymce``), not a tab
    or a line break: only escaping the bad ones would put a tab into the path."""
    if _JSON_ESCAPE.search(body):
        return False
    return any(not _is_good_escape(m.group()) for m in _PATH_ESCAPE.finditer(body))


_ESCAPED_QUOTE = re.compile(r'(?<!\\)(?:\\\\)*\\"')
_QUOTE_THEN_SEPARATOR = re.compile(r'(?<!\\)(?:\\\\)*\\"(?=[ \t]*[,}\]])')


def _lone_escaped_quote_at_end(raw: str) -> bool:
    """A string body that ends in ``\\"`` with no other escaped quote before it: no quote was being quoted, so the
    backslash is the text's last character (``"dist\\",``: a folder) and the quote closed the string."""
    m = _ESCAPED_QUOTE.search(raw)
    return m is not None and m.end() == len(raw)


def _path_end(text: str, s: int, e: int) -> int | None:
    """Where a string token ``text[s:e]`` that ran past its end really ends: a body of unescaped backslashes (a
    Windows path, :func:`_literal_backslashes`) whose last backslash escaped the closing quote, a separator after it
    (``"lib\\x.js\\","bin":``), and the token's own end not a value's end. None otherwise."""
    m = _QUOTE_THEN_SEPARATOR.search(text, s + 1, e - 1)
    if (
        m is None
        or _ESCAPED_QUOTE.search(text, s + 1, m.start())
        or not _literal_backslashes(text[s + 1 : m.end() - 2])
    ):
        return None
    after = text[e : e + 64].lstrip(" \t\r\n")
    if not after or after[0] in ",:}]":
        return None
    return m.end()


_CUT_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*(\\(?:u[0-9a-fA-F]{0,3}|x[0-9a-fA-F]?)?)$")
_CUT_SURROGATE = re.compile(r"(?<!\\)(?:\\\\)*(\\u[dD][89abAB][0-9a-fA-F]{2})$")


def cut_escape(body: str) -> str:
    """The body of a string the document's end cut, without an escape the cut left unfinished (``\\``, ``\\u00``,
    ``\\x4``, or a surrogate pair's first half)."""
    for rx in (_CUT_ESCAPE, _CUT_SURROGATE):
        m = rx.search(body)
        if m and m.group(1):
            body = body[: m.start(1)]
    return body


def cut_code_point(body: str) -> bool:
    """Whether the document's end cut a ``\\u`` / ``\\x`` escape (or a surrogate pair) short: the character it
    spelled is unknown, and repair suites disagree on keeping its letters or dropping it, so no fix is offered. A
    lone trailing backslash spells nothing yet: :func:`cut_escape` drops it."""
    return cut_escape(body) != body and not body.endswith("\\") or _CUT_SURROGATE.search(body) is not None


def _quote(raw: str) -> str:
    """A JSON string literal whose value is ``raw`` exactly (what an unquoted atom meant)."""
    return json.dumps(raw, ensure_ascii=False)


def _normalize_number(t: str) -> str | None:
    """A valid JSON spelling of a number-like atom, or None."""
    sign = "-" if t.startswith("-") else ""
    body = t.lstrip("+-")
    if len(t) - len(body) > 1:
        return None
    if re.fullmatch(r"0[xX][0-9a-fA-F]+", body):
        return sign + str(int(body, 16))
    m = re.fullmatch(r"([0-9]*)(?:\.([0-9]*))?(?:[eE]([-+]?[0-9]+))?", body)
    if not m or not (m.group(1) or m.group(2)):
        return None
    ip = m.group(1).lstrip("0") or "0"
    out = sign + ip
    if m.group(2):
        out += "." + m.group(2)
    elif "." in body:
        out += ".0"
    if m.group(3):
        out += "e" + m.group(3)
    return out


# a number cut before its exponent's digits, or a lone sign / hex prefix (``1e``, ``-2.5E+``, ``-``, ``0x``)
_CUT_NUMBER = re.compile(r"[-+]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)[eE][-+]?|0[xX])?|[-+]")
_WORD_FIX = {"true": "true", "false": "false", "none": "null", "null": "null", "nan": "null", "undefined": "null"}


def literal_with_slip(word: str) -> str | None:
    """The literal ``word`` is with one character typed into it or one letter lost (``xtrue``, ``nulll``, ``fals``):
    quoting it would turn a boolean or null into a string the user never meant; None for any other word."""
    for lit in ("true", "false", "null"):
        if len(word) == len(lit) + 1 and any(word[:i] + word[i + 1 :] == lit for i in range(len(word))):
            return lit
        if len(word) == len(lit) - 1 and any(lit[:i] + lit[i + 1 :] == word for i in range(len(lit))):
            return lit
    return None


def _line_start(text: str, pos: int) -> int:
    return text.rfind("\n", 0, pos) + 1


def _line_end(text: str, pos: int) -> int:
    e = text.find("\n", pos)
    return len(text) if e < 0 else e


def _delete_whole_line_if_alone(text: str, s: int, e: int, lo: int, hi: int) -> tuple[int, int]:
    """Widen a deletion to its whole line when nothing else is on that line (keeps the file tidy)."""
    ls = max(_line_start(text, s), lo)
    le = min(_line_end(text, e), hi)
    if text[ls:s].strip() == "" and text[e:le].strip() == "":
        return ls, le + 1 if le < hi else le
    return s, e


@functools.lru_cache(maxsize=8)
def _brackets_after(text: str, pos: int, end: int) -> tuple[str, ...]:
    """:func:`.jsonc_lex.brackets`, kept: the stray-closer and wrong-kind checks read the same rest of the document."""
    return tuple(brackets(text, pos, end))


def _bracket_faults(text: str, pos: int, end: int, openers: list[str]) -> int:
    """Closers that do not match plus containers left open, reading ``text[pos:end]`` with ``openers`` open."""
    st = list(openers)
    bad = 0
    for kind in _brackets_after(text, pos, end):
        if kind in (OBJ_OPEN, ARR_OPEN):
            st.append(kind)
        elif kind in (OBJ_CLOSE, ARR_CLOSE):
            if st and CLOSERS[st[-1]] == kind:
                st.pop()
            else:
                bad += 1
                depth = next((i for i in range(len(st) - 1, -1, -1) if CLOSERS[st[i]] == kind), -1)
                if depth >= 0:
                    del st[depth:]
    return bad + len(st)


def _stray_closer(text: str, after: int, end: int, stack: list[tuple[str, int]]) -> bool:
    """A closer that matches the innermost container is a slip of the keyboard when, without it, the rest of the
    document balances, and with it (closing the containers it names) the rest does not."""
    openers = [o for o, _ in stack]
    if _bracket_faults(text, after, end, openers):
        return False
    closer = text[after - 1]
    depth = next((i for i in range(len(openers) - 1, -1, -1) if CLOSERS[openers[i]] == closer), -1)
    read_as_closer = openers[:depth] if depth >= 0 else openers[:-1]
    return _bracket_faults(text, after, end, read_as_closer) > 0


def _wrong_kind(text: str, after: int, end: int, stack: list[tuple[str, int]]) -> bool:
    """A closer of the other kind (``]`` for ``{``) that closes the innermost container all the same: read so, the
    rest of the document balances; read as closing the outer container it names (``{`` left open), it does not."""
    openers = [o for o, _ in stack]
    closer = text[after - 1]
    depth = next((i for i in range(len(openers) - 1, -1, -1) if CLOSERS[openers[i]] == closer), -1)
    if depth < 0 or _bracket_faults(text, after, end, openers[:-1]):
        return False
    return _bracket_faults(text, after, end, openers[:depth]) > 0


Token = tuple[str, int, int]
Edit = tuple[int, int, str]


@functools.lru_cache(maxsize=8)
def parse(text: str, jsonc: bool, start: int = 0, end: int | None = None) -> ParseResult:
    """Parse ``text[start:end]`` tolerantly; return every issue (with repairs) and the tokens.

    Results are cached (the diagnostics, the repairer and the validator look at the same versions); treat them
    as read-only."""
    return _Parser(text, jsonc, start, len(text) if end is None else end).run()


class _Parser:
    """One tolerant pass over ``text[start:end]`` (see the module docstring); :meth:`run` once per instance."""

    __slots__ = (
        "text",
        "jsonc",
        "start",
        "end",
        "whole_doc",
        "issues",
        "tokens",
        "it",
        "pending",
        "stack",
        "state",
        "last_comma",
        "opened",
        "prev_end",
        "comma_prev",
        "val",
    )

    def __init__(self, text: str, jsonc: bool, start: int, end: int) -> None:
        self.text, self.jsonc, self.start, self.end = text, jsonc, start, end
        self.whole_doc = start == 0
        self.issues: list[JsonIssue] = []
        self.tokens: list[Token] = []  # tokens the Python loop saw (values parsed in C are not listed)
        self.pending: list[Token] = []  # tokens to read again (pushed back by a recovery), last first
        self.stack: list[tuple[str, int]] = []  # open containers: (opener, offset)
        self.state = "value"  # "value", "key", "colon", "after" (a value inside a container) or "done"
        self.last_comma = -1  # offset of the comma that moved us into "value"/"key" (-1: none)
        self.opened = False  # the current container was just opened (an immediate closer is fine)
        self.prev_end = start  # end of the last significant token (where insertions go)
        self.comma_prev = start  # end of the value before the last comma
        self.val: tuple[int, bool, int] = (start, False, start)  # last value: (start, after a comma, comma_prev)
        self.it: Lexer

    # -- driver ----------------------------------------------------------------------------------------------

    def run(self) -> ParseResult:
        if not self.jsonc and self.whole_doc and self.text.startswith("\ufeff", self.start):
            s = self.start
            self._add(s, s + 1, "json.bom", "byte order mark before the JSON text (JSON forbids it)", [(s, s + 1, "")])
        self._strip_prose_lead()
        self._strip_code_fence()
        self._strip_jsonp()
        self._strip_assignment()
        self._strip_tags()
        start = self.start
        self.prev_end = self.comma_prev = start
        self.val = (start, False, start)
        self.it = Lexer(self.text, start, self.end)
        while (tok := self._next_token()) is not None:
            kind = tok[0]
            if kind == BAD_CHAR and self.text[tok[1]] in _ODD_SPACE:
                # a no-break / em / ideographic space or a vertical tab (pasted from a web page or a word
                # processor): white space to a reader, an error to a JSON parser; read as a space
                ch = self.text[tok[1]]
                fix = "" if ch in _ZERO_WIDTH else " "
                self._add(tok[1], tok[2], "json.odd-space", f"{ch!r} is not JSON white space", [(tok[1], tok[2], fix)])
            elif kind == COMMENT or kind == OPEN_COMMENT:
                self.tokens.append(tok)
                self._comment(tok)
            elif self.state == "done":
                self._after_document(tok)
                break
            else:
                self.tokens.append(tok)
                if kind == WORD and not _HAS_ALNUM.search(self.text, tok[1], tok[2]):
                    # a stray "." / "\\" / "=" between tokens (a slip of the keyboard): no value, delete it
                    s, e = tok[1], tok[2]
                    if self.state == "value" and self._cut_at_end(s, e):
                        msg = f"the document ends inside {self.text[s:e]!r} (truncated?): which value it was is unknown"
                        self._add(s, e, "json.cut-token", msg, [])
                    else:
                        self._add(s, e, "json.unexpected-character", f"unexpected {self.text[s:e]!r}", [(s, e, "")])
                elif kind == OBJ_CLOSE or kind == ARR_CLOSE:
                    self._closer(tok)
                else:
                    self._STATES[self.state](self, tok)
        self._close_truncated()
        return ParseResult(self.issues, self.tokens, self.start, self.end, self.it.marks)

    def _next_token(self) -> Token | None:
        if self.pending:
            return self.pending.pop()
        if self.state == "value" and not self._value_not_typed():
            self._whole_value()
        return next(self.it, None)

    def _add(self, s: int, e: int, code: str, message: str, edits: list[Edit]) -> None:
        """Record an issue inside the innermost open container."""
        self.issues.append(JsonIssue(s, e, code, message, edits, self.stack[-1][1] if self.stack else -1))

    def _value_read(self, end: int) -> None:
        """A complete value ends at ``end``: a comma or closer comes next (or the document is done)."""
        self.prev_end = end
        self.last_comma = -1
        self.opened = False
        self.state = "after" if self.stack else "done"

    def _expect_member(self) -> None:
        """After a comma: a property name in an object, an element in an array."""
        self.state = "key" if self.stack[-1][0] == OBJ_OPEN else "value"

    # -- wrappers around the document ------------------------------------------------------------------------

    def _strip_prose_lead(self) -> None:
        """A chat reply: prose lines before the JSON (or its fence) are deleted, like the fence lines."""
        cut = _prose_lead(self.text, self.end) if self.whole_doc else 0
        if cut:
            self.issues.append(
                JsonIssue(0, cut - 1, "json.prose", "text before the JSON (a chat reply)", [(0, cut, "")])
            )
            self.start = cut

    def _strip_code_fence(self) -> None:
        """A JSON document wrapped in a Markdown code fence (what chat models paste): report and strip the fence
        lines (and prose after the closing fence)."""
        if not self.whole_doc:
            return
        text, start, end = self.text, self.start, self.end
        lead = len(text) - len(text[start:end].lstrip(" \t\n\r\ufeff"))
        fm = _FENCE_LINE.match(text, lead, end)
        if not (fm and text.startswith(("```", "~~~"), lead)):
            return
        close_s = close_e = -1
        tail = text[:end].rstrip()
        ls = _line_start(text, len(tail))
        cm = _CLOSING_FENCE.search(text, fm.end(), end)
        if ls > fm.end() - 1 and re.fullmatch(r"[ \t]*(`{3,}|~{3,})[ \t]*", text[ls : len(tail)]):
            close_s, close_e = ls, end
        elif cm and re.search(r"[A-Za-z]", text[cm.end() : end]):  # prose after the fence: deleted with it
            close_s, close_e = cm.start(), end
        edits = [(fm.start(), fm.end(), "")]
        if close_s >= 0:
            edits.append((close_s, close_e, ""))
        self.issues.append(
            JsonIssue(
                fm.start(),
                fm.end() - (1 if text[fm.end() - 1 : fm.end()] == "\n" else 0),
                "json.code-fence",
                "JSON is wrapped in a Markdown code fence",
                edits,
            )
        )
        self.start = fm.end()
        self.end = close_s if close_s >= 0 else end

    def _strip_jsonp(self) -> None:
        """JSONP (``callback({...});``): a JSON object or array passed to a function call, as a script endpoint
        serves it. The call around it is deleted (its name and parentheses are no value; the argument is the
        document); the argument must open with ``{`` or ``[`` and the call end the document."""
        if not self.whole_doc:
            return
        text, end = self.text, self.end
        m = _JSONP_OPEN.match(text, self.start, end)
        if m is None:
            return
        tail = _JSONP_CLOSE.search(text, m.end(), end)
        if tail is None:
            return
        self.issues.append(
            JsonIssue(
                m.start(1),
                m.end(),
                "json.jsonp",
                f"JSON is wrapped in a JSONP call {m.group(1)}(...)",
                [(m.start(1), m.end(), ""), (tail.start(), tail.end() - len(tail.group(1)), "")],
            )
        )
        self.start, self.end = m.end(), tail.start()

    def _strip_assignment(self) -> None:
        """JSON pasted from JavaScript: ``const config = {...};``, ``export default {...}``, ``module.exports =``,
        ``window.__STATE__ = {...};`` in a ``<script>`` tag. The code around the value is deleted (its words are no
        values); the value must open with ``{`` or ``[`` and the code end the document."""
        if not self.whole_doc:
            return
        text, end = self.text, self.end
        m = _ASSIGN_OPEN.match(text, self.start, end)
        if m is None:
            return
        tail = (_SCRIPT_CLOSE if m.group("tag") else _ASSIGN_CLOSE).search(text, m.end(), end)
        if tail is None or not text[m.end() : tail.start()].strip():
            return
        edits = [(m.start("w"), m.end(), "")]
        if tail.end() - len(tail.group(1)) > tail.start():
            edits.append((tail.start(), tail.end() - len(tail.group(1)), ""))
        what = text[m.start("w") : m.end()].strip()
        self.issues.append(
            JsonIssue(m.start("w"), m.end(), "json.js-wrapper", f"JSON is wrapped in JavaScript ({what} ...)", edits)
        )
        self.start, self.end = m.end(), tail.start()

    def _strip_tags(self) -> None:
        """A chat model's XML-style wrapper (``<json>{...}</json>``, ``<output>`` ... ``</output>``): the opening tag
        before the document and its closing tag ending it are deleted, the lines they stood on kept."""
        if not self.whole_doc:
            return
        text, end = self.text, self.end
        m = _TAG_OPEN.match(text, self.start, end)
        if m is None:
            return
        tail = re.compile(rf"[ \t]*</{re.escape(m.group(1))}[ \t]*>[ \t\r\n]*\Z").search(text, m.end(), end)
        if tail is None or not text[m.end() : tail.start()].strip():
            return
        keep = "\n" if "\n" in text[tail.start() : end] and text[tail.start() - 1] != "\n" else ""
        self.issues.append(
            JsonIssue(
                m.start(1) - 1,
                m.end(),
                "json.wrapper",
                f"JSON is wrapped in <{m.group(1)}> tags",
                [(m.start(1) - 1, m.end(), ""), (tail.start(), end, keep)],
            )
        )
        self.start, self.end = m.end(), tail.start()

    # -- before a token: what needs no token-by-token reading ------------------------------------------------

    def _value_not_typed(self) -> bool:
        """``"name":<line end> "next": ...``: a value not typed yet, the next line is the next property."""
        stack, prev_end = self.stack, self.prev_end
        if not (
            stack
            and stack[-1][0] == OBJ_OPEN
            and not self.opened
            and self.last_comma < 0
            and _NEXT_KEY_LINE.match(self.text, prev_end, self.end)
        ):
            return False
        self._add(
            prev_end - 1,
            prev_end,
            "json.missing-value",
            "missing value (the next line is the next property)",
            [(prev_end, prev_end, " null,")],
        )
        self.state = "key"
        return True

    def _whole_value(self) -> None:
        """Let the C scanner take a whole valid value. Deep inside a nest every C attempt re-scans the whole nest,
        so below depth 64 the parser goes token by token."""
        if len(self.stack) >= 64:
            return
        span = self.it.try_value()
        if span is None:
            return
        if self.stack and _closer_outdented(self.text, span):
            self.it.pos = span[0]  # its closer is indented as a parent's: read it token by token
            return
        self.val = (span[0], self.last_comma >= 0, self.comma_prev)
        self._value_read(span[1])

    # -- comments and what follows the document --------------------------------------------------------------

    def _comment(self, tok: Token) -> None:
        """Fine in JSONC (unless never closed), an error deleted by the repair in JSON."""
        kind, s, e = tok
        if kind == OPEN_COMMENT and self.jsonc:
            self._add(s, e, "json.unterminated-comment", "block comment is never closed", [(e, e, " */")])
        elif self.text[s] == "#" and self.jsonc:
            # a Python / shell comment (an LLM's or a YAML habit): JSONC spells it //
            self._add(s, e, "json.comment", "'#' comments are not JSONC (use //)", [(s, s + 1, "//")])
        elif not self.jsonc:
            ds, de = _delete_whole_line_if_alone(self.text, s, e, self.start, self.end)
            self._add(s, e, "json.comment", "comments are not allowed in JSON (use JSONC)", [(ds, de, "")])

    def _after_document(self, tok: Token) -> None:
        """Content after the top-level value: extra closers are deleted, trailing prose of a chat reply is deleted;
        anything else has no safe repair. Reads the rest of the input."""
        text, end = self.text, self.end
        rest = [tok, *reversed(self.pending), *self.it]
        self.pending.clear()
        self.tokens.extend(rest)
        sig = []
        for t in rest:
            if t[0] in (COMMENT, OPEN_COMMENT):
                self._comment(t)
            else:
                sig.append(t)
        if not sig:
            return
        s, e = sig[0][1], sig[-1][2]
        if all(t[0] in (OBJ_CLOSE, ARR_CLOSE) for t in sig):
            self._add(
                s,
                e,
                "json.extra-closer",
                "unmatched closing bracket after the document",
                [(a, b, "") for _, a, b in sig],
            )
        elif (
            self.whole_doc
            and text[s].isalpha()
            and text[s - 1].isspace()
            and len(_PROSE_WORD.findall(text, s, end)) >= 2
        ):
            # prose after the JSON (a chat reply): delete it, keep one line break
            prev_end = self.prev_end
            keep = "\n" if "\n" in text[prev_end:end] else ""
            self._add(s, e, "json.prose", "text after the JSON (a chat reply)", [(prev_end, end, keep)])
        else:
            self._add(s, e, "json.extra-data", "unexpected content after the end of the document", [])

    # -- states ----------------------------------------------------------------------------------------------

    def _after(self, tok: Token) -> None:
        """After a value inside a container: a comma should follow (closers are handled by :meth:`_closer`)."""
        kind, s, e = tok
        text, stack = self.text, self.stack
        if kind == COMMA:
            self.last_comma = s
            self.comma_prev = self.prev_end
            self._expect_member()
            self.opened = False
            self.prev_end = e
        elif kind == WORD and s == self.prev_end and text[s - 1] == '"':
            # "module"x: letters typed onto a string's closing quote are no next member (a missing comma would make
            # them a key with an invented null); no repair keeps them, so none is offered.
            self._add(s, e, "json.unexpected-token", f"unexpected {text[s:e]!r} after a string", [])
        elif kind in VALUE_KINDS or kind in (OBJ_OPEN, ARR_OPEN):
            what = "property" if stack[-1][0] == OBJ_OPEN else "element"
            at = self.prev_end
            self._add(s, e, "json.missing-comma", "missing comma before this " + what, [(at, at, ",")])
            self._expect_member()
            self.opened = False
            self.last_comma = -1
            self._reread(tok)
        elif kind == BAD_CHAR:
            self._add(s, e, "json.unexpected-character", f"unexpected character {text[s]!r}", [(s, e, "")])
        elif (
            len(stack) >= 2
            and stack[-1][0] == ARR_OPEN
            and stack[-2][0] == OBJ_OPEN
            and self.val[1]
            and text[self.val[0]] == '"'
        ):
            # ["a", "b",  "key": ...  - the array was never closed and this string is the next property.
            opener = stack.pop()
            at = self.val[2]
            msg = "'[' is never closed (the string before ':' is the next property)"
            self._add(opener[1], opener[1] + 1, "json.unclosed", msg, [(at, at, "]")])
            self.state = "value"
            self.last_comma = -1
            self.opened = False
            self.prev_end = e
        else:  # a colon after a value
            self._add(s, e, "json.unexpected-token", f"unexpected {text[s:e]!r} after a value", [])

    def _closer(self, tok: Token) -> None:
        """A '}' or ']' in any state: complete what it cuts short, then close its container."""
        _, s, e = tok
        text, stack, ch = self.text, self.stack, self.text[s]
        if not stack:
            self._add(s, e, "json.extra-closer", f"unmatched {ch!r}", [(s, e, "")])
            return
        if ch != CLOSERS[stack[-1][0]] and _stray_closer(text, e, self.end, stack):
            # "flags": []]  /  }"next" inside an array: read as a closer it would close the wrong container and
            # leave an unmatched closer further on (members would move to another object); deleted, the rest of
            # the document balances.
            self._add(s, e, "json.extra-closer", f"stray {ch!r}", [(s, e, "")])
            return
        self._member_cut_short(s, e)
        want = CLOSERS[stack[-1][0]]
        if ch == want:
            stack.pop()
        elif _wrong_kind(text, e, self.end, stack):
            # {"a": 1]  then more members: the closer of the other kind typed for this container's own
            self._add(s, e, "json.mismatched-bracket", f"expected {want!r} but found {ch!r}", [(s, e, want)])
            stack.pop()
        else:
            depth = next((i for i in range(len(stack) - 1, -1, -1) if CLOSERS[stack[i][0]] == ch), -1)
            if depth >= 0:
                missing = "".join(CLOSERS[o] for o, _ in reversed(stack[depth + 1 :]))
                inner = stack[-1]
                msg = f"{inner[0]!r} is never closed (expected {missing!r} before {ch!r})"
                self._add(inner[1], inner[1] + 1, "json.unclosed", msg, [(self.prev_end, self.prev_end, missing)])
                del stack[depth:]
            else:
                self._add(s, e, "json.mismatched-bracket", f"expected {want!r} but found {ch!r}", [(s, e, want)])
                stack.pop()
        self._value_read(e)

    def _member_cut_short(self, s: int, e: int) -> None:
        """The closer at ``s`` ends the container: a dangling name gets a value, a trailing comma goes (JSON)."""
        state, at = self.state, self.prev_end
        if state == "colon":
            self._add(s, e, "json.missing-colon", "property name without a colon and value", [(at, at, ": null")])
        elif state == "value" and not self.opened and self.last_comma < 0:
            fill = "null" if self.text[s - 1 : s].isspace() else " null"
            self._add(s, e, "json.missing-value", "missing value before this bracket", [(s, s, fill)])
        elif state in ("value", "key") and self.last_comma >= 0 and not self.jsonc:
            c = self.last_comma
            self._add(c, c + 1, "json.trailing-comma", "trailing comma (not allowed in JSON)", [(c, c + 1, "")])

    def _colon(self, tok: Token) -> None:
        """After a property name: a ':' should follow."""
        kind, s, e = tok
        at = self.prev_end
        if kind == COLON:
            self._start_value(e)
        elif kind == BAD_CHAR and self.text[s] == "=":
            self._add(s, e, "json.missing-colon", "use ':' between a property name and its value", [(s, e, ":")])
            self._start_value(e)
        elif kind == COMMA:
            self._add(s, e, "json.missing-colon", "property name without a colon and value", [(at, at, ": null")])
            self.state = "key"
            self.last_comma = s
            self.prev_end = e
        else:
            self._add(s, e, "json.missing-colon", "missing ':' after the property name", [(at, at, ":")])
            self.state = "value"
            self.last_comma = -1
            self.opened = False
            self._reread(tok)

    def _start_value(self, colon_end: int) -> None:
        self.state = "value"
        self.last_comma = -1
        self.opened = False
        self.prev_end = colon_end

    def _key(self, tok: Token) -> None:
        """Where a property name belongs (after '{' or a comma in an object)."""
        kind, s, e = tok
        text = self.text
        if kind == STRING:
            self._object_left_open_by_indent(s)
        km = _KEY_NO_CLOSE.match(text, s, e) if kind in (STRING, UNTERMINATED) and not self.pending else None
        if km and kind == UNTERMINATED and not text[e : self.end].strip():
            km = None  # the document's end cuts the key ("release:min" of "release:minor"): no key and value in it
        if km and (kind == UNTERMINATED or not _COLON_NEXT.match(text, e, self.end)):
            # "type: "git",  - the key's closing quote is missing: close it before its colon, read on from there
            colon = km.end() - 1
            msg = "property name without its closing quote"
            self._add(s, colon, "json.unterminated-string", msg, [(colon, colon, '"')])
            self._resume_at_colon(colon)
        elif kind == WORD and text.startswith('":', e) and not self.pending:
            # name": 1  - the key's opening quote is missing
            self._add(s, e + 1, "json.unquoted-key", "property name without its opening quote", [(s, s, '"')])
            self._resume_at_colon(e + 1)
        elif kind == UNTERMINATED and _NEXT_KEY_LINE.match(text, e, self.end):
            # "na<line end> "next": ...  - a property name being typed above the next property
            msg = "property name being typed (no closing quote, colon or value)"
            self._add(s, e, "json.unterminated-string", msg, [(e, e, '": null,')])
            self.prev_end = e
        elif kind in VALUE_KINDS:
            self.prev_end = self._scalar(tok, key=True)
            self.state = "colon"
        elif kind == COMMA:
            self._add(s, e, "json.extra-comma", "extra comma", [(s, e, "")])
        elif kind == BAD_CHAR:
            self._add(s, e, "json.unexpected-character", f"unexpected character {text[s]!r}", [(s, e, "")])
        elif kind == COLON:
            self._add(s, e, "json.missing-key", "missing property name before ':'", [])
            self.state = "value"
            self.prev_end = e
            self.opened = False
            self.last_comma = -1
        elif kind == OBJ_OPEN and self.last_comma >= 0 and len(self.stack) >= 2 and self.stack[-2][0] == ARR_OPEN:
            self._object_left_open_in_list(tok)
        else:
            # '{' or '[' where a property name belongs: no safe repair; parse it as a value to stay in sync.
            self._add(s, e, "json.missing-key", "expected a property name", [])
            self.state = "value"
            self._value(tok)

    def _resume_at_colon(self, colon: int) -> None:
        self.it.pos = colon
        self.prev_end = colon
        self.state = "colon"

    def _object_left_open_by_indent(self, s: int) -> None:
        """A key (at ``s``, after a comma) indented like its object's own line inside another object: the object
        was never closed (its "}" line went); close it after the value before the comma."""
        stack, text = self.stack, self.text
        if not (self.last_comma >= 0 and len(stack) >= 2 and stack[-1][0] == OBJ_OPEN and stack[-2][0] == OBJ_OPEN):
            return
        ls0 = text.rfind("\n", 0, s) + 1
        ol = text.rfind("\n", 0, stack[-1][1]) + 1
        o_ind = len(text[ol : stack[-1][1]]) - len(text[ol : stack[-1][1]].lstrip(" \t"))
        if ls0 > stack[-1][1] and not text[ls0:s].strip(" \t") and s - ls0 <= o_ind:
            opener = stack.pop()
            at = self.comma_prev
            msg = "'{' is never closed (the next line is indented as its parent's property)"
            self._add(opener[1], opener[1] + 1, "json.unclosed", msg, [(at, at, "\n" + text[ol : ol + o_ind] + "}")])

    def _object_left_open_in_list(self, tok: Token) -> None:
        """``[{...}, {...  , {``: an object in a list was never closed: close it before the comma, then read this
        '{' again as the list's next element."""
        text = self.text
        opener = self.stack.pop()
        ls0 = text.rfind("\n", 0, opener[1]) + 1
        ind = text[ls0 : opener[1]]
        ind = ind[: len(ind) - len(ind.lstrip(" \t"))]
        multi = "\n" in text[opener[1] : tok[1]]
        at = self.comma_prev
        msg = "'{' is never closed (the next element of the list begins)"
        self._add(opener[1], opener[1] + 1, "json.unclosed", msg, [(at, at, ("\n" + ind if multi else "") + "}")])
        self.state = "value"
        self.opened = False
        self.last_comma = tok[1]
        self._reread(tok)

    def _value(self, tok: Token) -> None:
        """Where a value belongs (top level, after ':', in an array)."""
        kind, s, e = tok
        stack = self.stack
        if kind in (OBJ_OPEN, ARR_OPEN):
            stack.append((kind, s))
            self.state = "key" if kind == OBJ_OPEN else "value"
            self.opened = True
            self.last_comma = -1
            self.prev_end = e
        elif kind in VALUE_KINDS:
            self.val = (s, self.last_comma >= 0, self.comma_prev)
            self._value_read(self._scalar(tok, key=False))
        elif kind == COMMA:
            if not stack:
                self._add(s, e, "json.unexpected-token", "unexpected ','", [(s, e, "")])
            elif self.opened or self.last_comma >= 0:
                self._add(s, e, "json.extra-comma", "extra comma", [(s, e, "")])
            else:  # right after a colon
                self._add(s, e, "json.missing-value", "missing value", [(self.prev_end, self.prev_end, " null")])
                self._expect_member()
                self.last_comma = s
                self.prev_end = e
        elif kind == BAD_CHAR and self.text[s] == "/" and (rx := _REGEX_LITERAL.match(self.text, s, self.end)):
            # a JavaScript regular expression as the value (/[a-z]+/i): its brackets are no structure; one string
            self.val = (s, self.last_comma >= 0, self.comma_prev)
            self._value_read(self._regex_literal(s, rx.end()))
        elif kind == BAD_CHAR and self.text[s] in _JOINS and self.text[e : e + 1].isalnum():
            # a bare value that starts with punctuation (/standalone-styles.css/, @scope/pkg): one word to the
            # next delimiter, quoted whole
            self.val = (s, self.last_comma >= 0, self.comma_prev)
            self._value_read(self._bare_word(tok, key=False))
        elif kind == BAD_CHAR:
            self._add(s, e, "json.unexpected-character", f"unexpected character {self.text[s]!r}", [(s, e, "")])
        else:
            self._add(s, e, "json.unexpected-token", f"unexpected {self.text[s:e]!r}", [(s, e, "")])

    _STATES = {"after": _after, "colon": _colon, "key": _key, "value": _value}

    def _reread(self, tok: Token) -> None:
        """Read ``tok`` again in the state a recovery moved to."""
        self.pending.append(tok)
        self.tokens.pop()

    # -- scalars: one value or property name -----------------------------------------------------------------

    def _scalar(self, tok: Token, key: bool) -> int:
        """Check one scalar value or property name, record its issue and repair; return its (repaired) end."""
        kind = tok[0]
        if kind == STRING:
            return self._string(tok)
        if kind == SQ_STRING:
            return self._single_quoted(tok, key)
        if kind == UNTERMINATED:
            return self._unterminated(tok, key)
        if kind == LITERAL or kind == NUMBER:
            if key:
                s, e = tok[1], tok[2]
                msg = "property names must be double-quoted strings"
                self._add(s, e, "json.unquoted-key", msg, [(s, e, _quote(self.text[s:e]))])
            return tok[2]
        return self._bare_word(tok, key)

    def _string(self, tok: Token) -> int:
        """A terminated double-quoted string: bad escapes and raw control characters are escaped in place."""
        _, s, e = tok
        text = self.text
        bad = _first_bad(text, s + 1, e - 1)
        if bad and not self.pending and self.it.pos == e:
            close = _path_end(text, s, e)
            if close is not None:
                # "lib\x.js\","bin": a path's last backslash escaped the closing quote: the string ends there
                self._add(
                    s,
                    close,
                    "json.bad-escape",
                    "a path's backslashes are not escaped (the last one escapes the closing quote)",
                    [(s, close, '"' + _fix_body(text[s + 1 : close - 1]) + '"')],
                )
                self.tokens[-1] = (STRING, s, close)
                self.it.pos = close
                return close
        if bad:
            escape = text[bad.start()] == "\\"
            self._add(
                s,
                e,
                "json.bad-escape" if escape else "json.control-character",
                "invalid escape sequence in string" if escape else "control character in string (escape it)",
                [(s, e, '"' + _fix_body(text[s + 1 : e - 1]) + '"')],
            )
        return e

    def _single_quoted(self, tok: Token, key: bool) -> int:
        _, s, e = tok
        text = self.text
        what = "property name" if key else "string"
        closed = e - s >= 2 and text[e - 1] == "'"
        body = text[s + 1 : e - 1] if closed else text[s + 1 : e]
        if not closed and not text[e : self.end].strip():
            if cut_code_point(body):
                self._add(s, e, "json.cut-token", "the document ends inside an escape sequence (truncated?)", [])
                return e
            body = cut_escape(body)  # cut by the document's end
        fix = [(s, e, '"' + _fix_body(body, single=True) + '"')]
        if not closed:
            self._add(s, e, "json.unterminated-string", f"unterminated {what}", fix)
        else:
            self._add(s, e, "json.single-quotes", f"{what} uses single quotes (JSON needs double quotes)", fix)
        return e

    def _unterminated(self, tok: Token, key: bool) -> int:
        """A double-quoted string without its closing quote: close it where the user meant, and read the text
        after that point again as structure."""
        _, s, e = tok
        text, end = self.text, self.end
        content = text[s + 1 : e]
        colon = content.find(":") if key else -1
        if colon >= 0 and not text[e:end].strip():
            colon = -1  # a key the document's end cuts ("release:min" of "release:minor"): not a key and a value
        if colon >= 0:  # {"a: 1} - the key ran into its value
            close = s + 1 + len(content[:colon].rstrip())
        elif e >= end or not text[e:end].strip():
            # truncated document: close the string where the text stops, less an escape the cut left unfinished
            close = len(text[s:e].rstrip()) + s
            if cut_code_point(text[s + 1 : close]):
                self._add(s, e, "json.cut-token", "the document ends inside an escape sequence (truncated?)", [])
                return e
            raw = cut_escape(text[s + 1 : close])
            what = "property name" if key else "string"
            self._add(
                s, e, "json.unterminated-string", f"unterminated {what}", [(s, close, '"' + _fix_body(raw) + '"')]
            )
            if close < e:
                self.tokens[-1] = (STRING, s, close)
            return close
        else:
            close = s + 1 + len(content.rstrip(" \t,}]\r"))
        raw = text[s + 1 : close]
        if _lone_escaped_quote_at_end(raw):
            raw = raw[:-1]  # "dist\", : a trailing backslash (a Windows folder), not an escaped quote
        elif raw.endswith("\\") and not raw.endswith("\\\\"):
            raw = raw[:-1]
            close -= 1
        what = "property name" if key else "string"
        self._add(s, e, "json.unterminated-string", f"unterminated {what}", [(s, close, '"' + _fix_body(raw) + '"')])
        if close < e:
            self.tokens.pop()
            self.tokens.append((STRING, s, close))
            self.pending.extend(reversed(list(tokenize(text, close, e))))
        return close

    def _bare_word(self, tok: Token, key: bool) -> int:
        """An unquoted atom: a misspelt literal or number is respelt; otherwise the run of atoms on its line
        ("John Smith") becomes one quoted string."""
        kind, s, e = tok
        text = self.text
        low = text[s:e].lower()
        if not key and (low in _WORD_FIX or low.lstrip("+-") == "infinity"):
            literal = _WORD_FIX.get(low, "null")
            self._add(
                s, e, "json.invalid-literal", f"{text[s:e]!r} is not a JSON value (use {literal})", [(s, e, literal)]
            )
            return e
        if not key and self._cut_at_end(s, e):
            msg = f"the document ends inside {text[s:e]!r} (truncated?): which value it was is unknown"
            self._add(s, e, "json.cut-token", msg, [])
            return e
        slip = None if key else literal_with_slip(text[s:e])
        if slip is not None:
            msg = f"{text[s:e]!r} is not a JSON value (a letter typed into {slip}?)"
            self._add(s, e, "json.invalid-literal", msg, [(s, e, slip)])
            return e
        if kind == BAD_NUMBER and not key:
            norm = _normalize_number(text[s:e])
            if norm is not None:
                self._add(s, e, "json.invalid-number", f"{text[s:e]!r} is not a valid JSON number", [(s, e, norm)])
                return e
        word_end = e
        nxt = self._next_raw()
        while nxt is not None and (
            (nxt[0] in (WORD, BAD_NUMBER, NUMBER, LITERAL) and "\n" not in text[word_end : nxt[1]])
            or (nxt[0] == BAD_CHAR and nxt[1] == word_end and text[word_end] in _JOINS)
        ):
            self.tokens.append(nxt)
            word_end = nxt[2]
            nxt = self._next_raw()
        if nxt is not None:
            self.pending.append(nxt)
        if not key and not self.stack and not text[word_end : self.end].strip():
            # the whole document is unquoted text: no JSON value is there to repair, and quoting prose invents one
            self._add(s, word_end, "json.not-json", "the document is unquoted text, not a JSON value", [])
            return word_end
        fix = [(s, word_end, _quote(text[s:word_end]))]
        if text[s - 1 : s] == '"' or text[word_end : word_end + 1] == '"':
            # a word glued to a quote (a",b" or "k"e"y"): the quote is misplaced, so where each string starts
            # and ends is a guess; quoting the word would keep that guess (["a",",b"])
            fix = []
        elif nxt is not None and nxt[0] in (COMMENT, OPEN_COMMENT) and nxt[1] == word_end:
            # a "comment" glued to the word (lib/*.js, a glob that lost its string's opening quote): the word runs
            # on into it, so where it ends is a guess too
            fix = []
        if key:
            self._add(s, word_end, "json.unquoted-key", "property names must be double-quoted strings", fix)
        else:
            msg = f"{text[s:word_end]!r} is not a JSON value (missing quotes?)"
            self._add(s, word_end, "json.unquoted-string", msg, fix)
        return word_end

    def _regex_literal(self, s: int, end: int) -> int:
        """The tokens of ``text[s:end]`` (a regular expression literal) read as one value: quoted whole."""
        nxt = self._next_raw()
        while nxt is not None and nxt[1] < end:
            self.tokens.append(nxt)
            nxt = self._next_raw()
        if nxt is not None:
            self.pending.append(nxt)
        raw = self.text[s:end]
        msg = f"{raw!r} is not a JSON value (a regular expression: quote it)"
        self._add(s, end, "json.unquoted-string", msg, [(s, end, _quote(raw))])
        return end

    def _cut_at_end(self, s: int, e: int) -> bool:
        """``text[s:e]`` is the last thing in the document and only the start of a value: a literal's first letters
        (``T``, ``fal``, ``nu``) or a number cut in its exponent or sign (``1e``, ``1.5E+``, ``-``). Completing it
        (true? "T"?) or dropping it would both be a guess about what the cut text said."""
        if self.text[e : self.end].strip():
            return False
        word = self.text[s:e]
        low = word.lower()
        if any(lit.startswith(low) and lit != low for lit in ("true", "false", "null", "none")):
            return True
        return _CUT_NUMBER.fullmatch(word) is not None

    def _next_raw(self) -> Token | None:
        """The next token, with no C-scanner shortcut."""
        return self.pending.pop() if self.pending else next(self.it, None)

    # -- end of input ----------------------------------------------------------------------------------------

    def _close_truncated(self) -> None:
        """A truncated document gets its dangling member completed and its containers closed."""
        if not self.stack:
            return
        edits: list[Edit] = []
        at = self.prev_end
        if self.state == "colon":
            edits.append((at, at, ": null"))
        elif self.state == "value" and not self.opened and self.last_comma < 0:
            edits.append((at, at, " null"))
        elif self.state in ("value", "key") and self.last_comma >= 0 and not self.jsonc:
            edits.append((self.last_comma, self.last_comma + 1, ""))
            at = self.last_comma
        edits.append((at, at, self._closers_text(at)))
        opener, pos = self.stack[-1]
        more = f" (and {len(self.stack) - 1} more)" if len(self.stack) > 1 else ""
        self._add(pos, pos + 1, "json.unclosed", f"{opener!r} is never closed{more}", edits)

    def _closers_text(self, at: int) -> str:
        """Closers for every open container, each on its own line when its opener began a line."""
        text = self.text
        last_nl = text.rfind("\n", 0, at)
        nl = "\r\n" if last_nl > 0 and text[last_nl - 1] == "\r" else "\n"  # keep the document's line breaks
        out = []
        ls = -1
        prev = 0
        for opener, pos in self.stack:  # ascending offsets: find each line start by scanning only the gap
            if pos <= last_nl:  # the container spans lines: its closer goes on a line of its own
                brk = text.rfind("\n", prev, pos)
                ls = brk + 1 if brk >= 0 else (ls if ls >= 0 else 0)
                line = text[ls:pos]
                out.append(nl + line[: len(line) - len(line.lstrip(" \t"))] + CLOSERS[opener])
            else:
                out.append(CLOSERS[opener])
            prev = pos
        return "".join(reversed(out))
