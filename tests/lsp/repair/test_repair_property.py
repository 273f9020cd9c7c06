"""Property tests: random valid JSON, broken at a random place, then repaired.

Whatever rules_fix returns is valid and keeps everything outside its edits; for the common, recoverable
breakages (a dropped or extra comma, a cut-off end, a dropped closer) it must also give back the very value the
document had before it was broken.
"""

from __future__ import annotations

import json
import os
from collections import Counter

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from dgemma_lsp.lsp.diagnostics import find_issues
from dgemma_lsp.lsp.repair import jsonc as J
from dgemma_lsp.lsp.repair import revalidate, rules_fix, validate_fix

keys = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=8)
scalars = st.none() | st.booleans() | st.integers(-(10**12), 10**12) | st.text(max_size=12)
scalars |= st.floats(allow_nan=False, allow_infinity=False, width=32)
documents = st.recursive(
    scalars,
    lambda kids: st.lists(kids, max_size=5) | st.dictionaries(keys, kids, max_size=5),
    max_leaves=25,
)
containers = st.lists(documents, min_size=1, max_size=5) | st.dictionaries(keys, documents, min_size=1, max_size=5)

# DGEMMA_FUZZ_EXAMPLES raises the example count for a longer local fuzzing run.
PROPS = settings(
    max_examples=int(os.environ.get("DGEMMA_FUZZ_EXAMPLES", "80")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def _dump(value: object, indent: int | None) -> str:
    return json.dumps(value, indent=indent, ensure_ascii=False)


def _structural(text: str, kinds: str) -> list[tuple[str, int, int]]:
    return [t for t in J.tokenize(text) if t[0] in kinds]


def _check_fix_is_sound(broken: str, lang: str = "json") -> str | None:
    fix = rules_fix(broken, lang, None)
    if fix is None:
        return None
    out = fix.apply(broken)
    assert find_issues(out, lang) == []
    if lang == "json":
        json.loads(out)
    assert revalidate(broken, fix, lang) is None
    # nothing outside the reported span changed
    s, e = fix.span
    tail = len(broken) - e
    assert out[:s] == broken[:s] and out[len(out) - tail :] == broken[e:]
    return out


@PROPS
@given(containers, st.sampled_from([None, 2]), st.data())
def test_dropped_comma_is_restored(value: object, indent: int | None, data: st.DataObject) -> None:
    text = _dump(value, indent)
    commas = _structural(text, ",")
    assume(commas)
    _, a, b = data.draw(st.sampled_from(commas))
    broken = text[:a] + text[b:]
    out = _check_fix_is_sound(broken)
    assert out is not None
    assert json.loads(out) == value


@PROPS
@given(containers, st.sampled_from([None, 2]), st.data())
def test_trailing_comma_is_removed(value: object, indent: int | None, data: st.DataObject) -> None:
    text = _dump(value, indent)
    closers = [t for t in _structural(text, "]}") if text[: t[1]].rstrip()[-1] not in "[{"]
    assume(closers)
    _, a, _b = data.draw(st.sampled_from(closers))
    p = len(text[:a].rstrip())
    broken = text[:p] + "," + text[p:]
    out = _check_fix_is_sound(broken)
    assert out is not None
    assert json.loads(out) == value
    # in JSONC the same text is fine as it is
    assert find_issues(broken, "jsonc") == []


@PROPS
@given(containers, st.sampled_from([None, 2]), st.data())
def test_cut_off_closers_are_restored(value: object, indent: int | None, data: st.DataObject) -> None:
    text = _dump(value, indent)
    # cut the trailing run of closers (and the whitespace between them)
    end = len(text)
    while end and text[end - 1] in "]} \n":
        end -= 1
    cut = data.draw(st.integers(end, len(text) - 1))
    broken = text[:cut]
    out = _check_fix_is_sound(broken)
    if out is None:
        # a one-line document that still ends with a closer: the lost closer may as well have stood before one of
        # the commas near the end ({"k": {"a": 1, "b": 2} -> {"k": {"a": 1}, "b": 2}); no indentation says which
        assert indent is None and broken.rstrip()[-1:] in ("}", "]")
        assert any(_parses(broken[:p] + ch + broken[p:]) for p, c in enumerate(broken) if c == "," for ch in "}]")
        return
    assert json.loads(out) == value


def _parses(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


@PROPS
@given(containers, st.sampled_from([None, 2]), st.data())
def test_any_single_character_damage_never_yields_an_invalid_fix(
    value: object, indent: int | None, data: st.DataObject
) -> None:
    text = _dump(value, indent)
    pos = data.draw(st.integers(0, len(text) - 1))
    how = data.draw(st.sampled_from(["delete", "insert", "replace"]))
    ch = data.draw(st.sampled_from(list("{}[],:\"'/ x1\\")))
    if how == "delete":
        broken = text[:pos] + text[pos + 1 :]
    elif how == "insert":
        broken = text[:pos] + ch + text[pos:]
    else:
        broken = text[:pos] + ch + text[pos + 1 :]
    for lang in ("json", "jsonc"):
        _check_fix_is_sound(broken, lang)  # None or valid + local; never an invalid edit


@PROPS
@given(containers, st.data())
def test_jsonc_comments_survive(value: object, data: st.DataObject) -> None:
    text = _dump(value, 2)
    lines = text.split("\n")
    assume(len(lines) > 2)
    # sprinkle comments at line ends, then drop one comma
    commented = "\n".join(f"{ln} // c{i}" if i % 2 else ln for i, ln in enumerate(lines))
    commas = _structural(commented, ",")
    assume(commas)
    _, a, b = data.draw(st.sampled_from(commas))
    broken = commented[:a] + commented[b:]
    out = _check_fix_is_sound(broken, "jsonc")
    assert out is not None
    before = [commented[a:b] for k, a, b in J.tokenize(commented) if k == J.COMMENT]
    after = [out[a:b] for k, a, b in J.tokenize(out) if k == J.COMMENT]
    assert before == after
    assert json.loads(J._blank_jsonc(out)) == value


_MD_PIECES = [
    "| a | b |\n|---|---|\n| 1 | 2 |\n",
    "| a | b | c |\n|---|---|\n| 1 |\n",
    "| x | y |\n| 1 | 2 |\n| 3 |\n",
    "```py\ncode\n```\n",
    '```json\n{"a": [1, 2]}\n```\n',
    "> quote\n",
    "- item\n  ```\n  x\n",
    "# Heading\n",
    "\n",
    "text with a | pipe\n",
]


@PROPS
@given(st.lists(st.sampled_from(_MD_PIECES), min_size=1, max_size=8), st.data())
def test_markdown_fix_all_is_valid_and_keeps_every_letter(pieces: list[str], data: st.DataObject) -> None:
    doc = "".join(pieces)
    if data.draw(st.booleans()) and len(doc) > 1:
        pos = data.draw(st.integers(0, len(doc) - 1))
        doc = doc[:pos] + data.draw(st.sampled_from(["|", "\n", "`", ",", ""])) + doc[pos + 1 :]
    fix = rules_fix(doc, "markdown", None)
    if fix is None:
        return
    out = fix.apply(doc)
    assert find_issues(out, "markdown") == []
    assert revalidate(doc, fix, "markdown") is None
    # every letter and digit is still there (stray punctuation inside a broken JSON fence may be deleted)
    assert not Counter(c for c in doc if c.isalnum()) - Counter(c for c in out if c.isalnum())


_NOISE = st.text(st.sampled_from(list("{}[]:,\"'/*\\ \n\r\tabc01-.e|`~>#$\x00é")), max_size=60)


@PROPS
@given(_NOISE, st.sampled_from(["json", "jsonc", "markdown"]))
def test_random_noise_never_crashes_and_never_yields_an_invalid_fix(text: str, lang: str) -> None:
    issues = find_issues(text, lang)
    for issue in [None, *issues[:3]]:
        fix = rules_fix(text, lang, issue)
        if fix is None:
            continue
        out = fix.apply(text)
        assert revalidate(text, fix, lang) is None
        assert validate_fix(text, out, lang, fix.span) is None  # also what a client checking one span sees
        if issue is None:
            assert find_issues(out, lang) == []


def _one_keystroke(text: str, at: int, ch: str, delete: bool, jsonc: bool) -> tuple[str, str, int] | None:
    """``text`` with one character deleted or ``ch`` typed (position ``at`` wrapped), its blanking and where the
    C parser stops on it; None when the damage still parses."""
    i = at % (len(text) + 1)
    text = text[:i] + text[i + 1 :] if delete and i < len(text) else text[:i] + ch + text[i:]
    blank = J._blank_jsonc(text) if jsonc else text
    try:
        json.loads(blank)
    except ValueError as exc:
        return text, blank, exc.pos
    return None


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(containers, st.integers(0, 10**6), st.sampled_from('",:{}[]\\ a'), st.booleans(), st.booleans())
def test_keystroke_bracket_balance_precheck_rejects_no_parsing_candidate(doc, at, ch, delete, jsonc) -> None:
    """The keystroke search skips the whole-document parse of a bracket edit that leaves the brackets unbalanced
    outside strings; it finds the very candidates it finds without that shortcut."""
    from dgemma_lsp.lsp.repair import keystroke as K

    case = _one_keystroke(json.dumps(doc, indent=2, ensure_ascii=False), at, ch, delete, jsonc)
    if case is None:
        return
    text, blank, err = case
    K.shape_of.cache_clear()
    shape = K.shape_of(blank)
    with_check = K._candidates(text, blank, err, shape, jsonc)
    saved = dict(K._NET)
    K._NET.clear()
    try:
        without = K._candidates(text, blank, err, shape, jsonc)
    finally:
        K._NET.update(saved)
    assert [c[0] for c in with_check] == [c[0] for c in without]


def _keystroke_both_ways(text: str, jsonc: bool = False) -> tuple[str | None, str | None]:
    """keystroke_fix as it runs (candidates parsed in the damaged member alone where it can) and with every
    candidate parsed as a whole document and its shape rebuilt (the search without its shortcuts)."""
    from dgemma_lsp.lsp.repair import keystroke as K

    K.shape_of.cache_clear()
    fast = K.keystroke_fix(text, jsonc)
    region, net, joins, lines_fast = K._Region.of, dict(K._NET), K._joins, K._lines_fast
    K._Region.of = classmethod(lambda cls, *a: None)  # type: ignore[method-assign,assignment]
    K._NET.clear()
    K._joins = lambda *a: True  # type: ignore[assignment]
    K._lines_fast = lambda *a: None  # type: ignore[assignment]
    try:
        K.shape_of.cache_clear()
        slow = K.keystroke_fix(text, jsonc)
    finally:
        K._Region.of = region  # type: ignore[method-assign]
        K._NET.update(net)
        K._joins, K._lines_fast = joins, lines_fast
    return fast, slow


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(containers, st.integers(0, 10**6), st.sampled_from('",:{}[]\\ a'), st.booleans())
def test_keystroke_search_by_member_finds_what_whole_parses_find(doc, at, ch, delete) -> None:
    text = json.dumps({"a": {"b": doc, "c": [doc]}, "d": doc}, indent=2, ensure_ascii=False)
    i = at % (len(text) + 1)
    text = text[:i] + text[i + 1 :] if delete and i < len(text) else text[:i] + ch + text[i:]
    fast, slow = _keystroke_both_ways(text)
    assert fast == slow


def test_keystroke_search_by_member_with_a_duplicate_key_every_edit() -> None:
    """A later member of the same key hides the damaged one: every one-character edit, both ways the same."""
    base = '{\n  "a": {\n    "x": [\n      1,\n      "s"\n    ]\n  },\n  "b": 2,\n  "a": {\n    "x": 3\n  }\n}\n'
    for src in (base, base.replace('  "a": {\n    "x": 3\n  }', '  "a": {\n    "y": 3\n  }')):
        for i in range(len(src) + 1):
            for ch in '",:{}[]\\':
                assert len(set(_keystroke_both_ways(src[:i] + ch + src[i:]))) == 1
            if i < len(src):
                assert len(set(_keystroke_both_ways(src[:i] + src[i + 1 :]))) == 1


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(containers, st.integers(0, 10**6), st.sampled_from('",:{}[]\\ a\r\t\n'), st.booleans(), st.booleans())
def test_keystroke_line_pair_check_rejects_no_parsing_candidate(doc, at, ch, delete, pretty) -> None:
    """The keystroke search skips the parse of an edit whose line meets its neighbours with a token pair JSON never
    has (and reads the lines' shape by whole-text scans); it finds the very candidates it finds without that."""
    from dgemma_lsp.lsp.repair import keystroke as K

    text = json.dumps(doc, indent=2 if pretty else None, ensure_ascii=False)
    i = at % (len(text) + 1)
    text = text[:i] + text[i + 1 :] if delete and i < len(text) else text[:i] + ch + text[i:]
    try:
        json.loads(text)
        return
    except ValueError as exc:
        err = exc.pos
    shape = K._Shape(text)
    fast = K._lines_fast(text)
    if fast is not None:
        assert fast == K._lines_slow(K._STRINGS.sub('""', text).split("\n"))
    with_check = K._candidates(text, text, err, shape, False)
    joins = K._joins
    K._joins = lambda *a: True  # type: ignore[assignment]
    try:
        without = K._candidates(text, text, err, shape, False)
    finally:
        K._joins = joins
    assert [c[0] for c in with_check] == [c[0] for c in without]


_COMMENTS = ["", " // note", ' // "quoted", and a comma,', "\n// a comment line ]", " // http://x/y", ""]
_PIECES = ['"', '"a"', ",", ", ", "]", "}", "[", "{", "//", "// c\n", "/", "\n", "\n  ", " ", "\r", "\\", "a", ":", "1"]


def _jsonc_of(doc: object, picks: list[int], crlf: bool) -> str:
    """``doc`` pretty-printed with comments after some lines, comment lines and trailing commas (picks: per line)."""
    lines = json.dumps(doc, indent=2, ensure_ascii=False).split("\n")
    out = []
    for k, line in enumerate(lines):
        p = picks[k % len(picks)] if picks else 0
        nxt = lines[k + 1].lstrip()[:1] if k + 1 < len(lines) else ""
        if p == 5 and nxt in ("]", "}") and line.rstrip()[-1:] not in ("[", "{", ","):
            line += ","  # a trailing comma (JSONC allows it)
        out.append(line + _COMMENTS[p % len(_COMMENTS)])
    return ("\r\n" if crlf else "\n").join(out)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.sampled_from(_PIECES), max_size=40) | containers.map(lambda d: json.dumps(d, indent=2)),
    st.integers(0, 10**6),
    st.sampled_from('",:{}[]\\x'),
    st.booleans(),
)
def test_jsonc_reblank_is_the_whole_blanking(src, at, ch, delete) -> None:
    """The keystroke search blanks a JSONC candidate again only on the lines the edit can change
    (``jsonc.reblank``): the result is the whole document blanked again, byte for byte."""
    text = "".join(src) if isinstance(src, list) else src
    a = at % (len(text) + 1)
    b, ch = (a + 1, "") if delete and a < len(text) and text[a] != "\n" else (a, ch)
    assert J.reblank(text, J._blank_jsonc(text), a, b, ch) == J._blank_jsonc(text[:a] + ch + text[b:])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    containers,
    st.lists(st.integers(0, 5), min_size=1, max_size=12),
    st.booleans(),
    st.integers(0, 10**6),
    st.sampled_from('",:{}[]\\ a/'),
    st.booleans(),
)
def test_keystroke_jsonc_search_by_lines_finds_what_whole_blanking_finds(doc, picks, crlf, at, ch, delete) -> None:
    """JSONC candidates blanked line by line (``jsonc.reblank``) are the candidates blanked as whole documents, and
    the search answers the same."""
    from dgemma_lsp.lsp.repair import keystroke as K

    case = _one_keystroke(_jsonc_of(doc, picks, crlf), at, ch, delete, True)
    if case is None:
        return
    text, blank, err = case
    K.shape_of.cache_clear()
    shape = K.shape_of(blank)
    fast = K._candidates(text, blank, err, shape, True)
    fast_fix = K.keystroke_fix(text, True)
    reblank = K.reblank
    K.reblank = lambda t, bl, a, b, c: J._blank_jsonc(t[:a] + c + t[b:])  # type: ignore[assignment]
    try:
        K.shape_of.cache_clear()
        slow = K._candidates(text, blank, err, shape, True)
        slow_fix = K.keystroke_fix(text, True)
    finally:
        K.reblank = reblank  # type: ignore[assignment]
    assert [(c[0], c[1]) for c in fast] == [(c[0], c[1]) for c in slow]
    assert fast_fix == slow_fix


_DAMAGE = st.sampled_from(list('",:{}[]\\ a0.-eE\n\r\t\x00é\u00a0'))


def _damaged(doc: object, pretty: bool, edits: list[tuple[int, str, bool]]) -> str:
    text = json.dumps(doc, indent=2 if pretty else None, ensure_ascii=False)
    for at, ch, delete in edits:
        i = at % (len(text) + 1)
        text = text[:i] + text[i + 1 :] if delete and i < len(text) else text[:i] + ch + text[i:]
    return text


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    containers | _NOISE,
    st.booleans(),
    st.lists(st.tuples(st.integers(0, 10**6), _DAMAGE, st.booleans()), min_size=1, max_size=2),
)
def test_keystroke_prefix_check_rejects_no_parsing_edit(doc, pretty, damage) -> None:
    """The keystroke search parses a candidate from the last checkpoint before its edit (the parser's state there
    written as a short text) rather than from the document's start: it never rejects a candidate that parses.
    Every one-character edit of a damaged document (or of random noise) is tried."""
    from dgemma_lsp.lsp.repair import keystroke as K

    text = doc if isinstance(doc, str) else _damaged(doc, pretty, damage)
    try:
        json.loads(text)
        return
    except ValueError as exc:
        err = exc.pos
    except RecursionError:
        return
    prefix = K._Prefix(text, err)
    for a in range(len(text) + 1):
        for b, ch in [(a, c) for c in '",:{}[]\\'] + ([(a + 1, "")] if a < len(text) else []):
            cand = text[:a] + ch + text[b:]
            if prefix.fails(text, a, b, ch):
                try:
                    json.loads(cand)
                except (ValueError, RecursionError):
                    continue
                raise AssertionError(f"{cand!r} parses, but the check refused it")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), containers | _NOISE, st.sampled_from('",:{}[]\\ a'), st.booleans())
def test_keystroke_line_reach_bounds_every_pretty_line_one_edit_makes(data, doc, ch, delete) -> None:
    """A long line is edited only up to :func:`keystroke._line_reach`: no edit after it gives a line that reads as
    a pretty-printed line (``_LINE``)."""
    from dgemma_lsp.lsp.repair import keystroke as K

    lines = doc.split("\n") if isinstance(doc, str) else json.dumps(doc, indent=2, ensure_ascii=False).split("\n")
    line = data.draw(st.sampled_from(lines))
    reach = K._line_reach(line)
    for i in range(len(line) + 1):
        j, c = (i + 1, "") if delete and i < len(line) else (i, ch)
        if K._LINE.fullmatch(line[:i] + c + line[j:]):
            assert i <= reach


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    containers,
    st.booleans(),
    st.lists(st.tuples(st.integers(0, 10**6), _DAMAGE, st.booleans()), min_size=1, max_size=2),
    st.sampled_from([None, 0]),
)
def test_keystroke_search_with_its_prefix_checks_finds_what_whole_parses_find(doc, pretty, damage, small) -> None:
    """The search's candidates and answer are the same with the prefix checks (short parses from a checkpoint,
    long lines walked only to their reach) and with every candidate parsed whole and every line walked to its end;
    ``small`` 0: every document searched as a long one (only edits that leave a pretty-printed line)."""
    from dgemma_lsp.lsp.repair import keystroke as K

    text = _damaged(doc, pretty, damage)
    try:
        json.loads(text)
        return
    except ValueError as exc:
        err = exc.pos
    except RecursionError:
        return
    fails, reach, limit = K._Prefix.fails, K._line_reach, K.SMALL
    K.SMALL = limit if small is None else small

    def search() -> tuple[list, str | None]:
        K.shape_of.cache_clear()
        return K._candidates(text, text, err, K.shape_of(text), False), K.keystroke_fix(text, False)

    try:
        fast, fast_fix = search()
        K._Prefix.fails = lambda *a: False  # type: ignore[method-assign]
        K._line_reach = len  # type: ignore[assignment]
        slow, slow_fix = search()
    finally:
        K._Prefix.fails, K._line_reach, K.SMALL = fails, reach, limit  # type: ignore[method-assign]
    assert [c[0] for c in fast] == [c[0] for c in slow]
    assert fast_fix == slow_fix
