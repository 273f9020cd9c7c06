"""Structure repair on the breakage families of issue 47, checked as a user would: the fixed document means what
the broken one said (no invented value, no cut string, the nesting the indentation shows), or no fix at all; and
each fix touches nothing outside its own lines.
"""

from __future__ import annotations

import json

import pytest

from dgemma_lsp.lsp.diagnostics import find_issues
from dgemma_lsp.lsp.repair import checked_output, rules_fix
from dgemma_lsp.lsp.repair.keystroke import keystroke_fix


def fixed_text(text: str, lang: str) -> str | None:
    """What ``dgemma-lsp fix --repair rules --output fixed`` prints (None: exit 4, no validated fix)."""
    fix = rules_fix(text, lang, None)
    if fix is None:
        return None
    out, why = checked_output(text, fix, lang, whole=True)
    assert why is None, why
    return out


# -- a wrong fix is worse than no fix ----------------------------------------------------------------------------

NO_FIX = [
    ("a value not typed yet", '{"a":}'),
    ("a value missing between members", '{"a":,"b":2}'),
    ("truncated after a key", '{"foo"'),
    ("truncated after a colon", '{"a": 1, "b":'),
    ("a key never given its value", '{"a",'),
    ("a value not typed yet, next line the next key", '{\n  "a":\n  "b": 1\n}\n'),
    ("a number with digit separators", '{"a": 1_000}'),
    ("a word written onto a key's closing quote", '{\n  "repository"xy: {\n    "type": "git"\n  },\n  "n": 1\n}\n'),
    ("a quote typed inside a string of compact text", '{"key": "v"alue", "k": 1}'),
    ("a call of something that is not a JSON value", "f(1)"),
]


@pytest.mark.parametrize(("name", "text"), NO_FIX, ids=[n for n, _ in NO_FIX])
def test_no_fix_rather_than_an_invented_meaning(name: str, text: str) -> None:
    assert find_issues(text, "json"), name
    out = fixed_text(text, "json")
    assert out is None, f"{name}: offered {out!r}"


MEANT = [
    # one line, no indentation to say where the list began: no guess (never an object of numbers turned keys)
    ("a list missing its opening bracket", '{"a": 1, 2, 3]}', None),
    (
        "a URL value missing its opening quote",
        '{\n  "homepage": https://vuejs.org/",\n  "n": 1\n}\n',
        {"homepage": "https://vuejs.org/", "n": 1},
    ),
    (
        "a path value missing its opening quote",
        '{\n  "module": nodenext",\n  "target": "es2022"\n}\n',
        {"module": "nodenext", "target": "es2022"},
    ),
    (
        "a key missing its opening quote",
        '{\n  "a": 1,\n  application/clr": {\n    "source": "iana"\n  }\n}\n',
        {"a": 1, "application/clr": {"source": "iana"}},
    ),
    # a pretty-printed file is written with its quotes escaped: a bare one inside a string is a keystroke, undone
    ("a typed stray quote", '{\n  "a": [\n    "c"dmid",\n    "x"\n  ]\n}\n', {"a": ["cdmid", "x"]}),
    (
        "a quote typed into a key",
        '{\n  "o": {\n    "noUncheckedInde"xedAccess": true,\n    "b": 1\n  }\n}\n',
        {"o": {"noUncheckedIndexedAccess": True, "b": 1}},
    ),
    (
        "a quote typed before a space in a value",
        '{\n  "scripts": {\n    "cov": "nyc --reporter=text npm" test",\n    "t": "x"\n  }\n}\n',
        {"scripts": {"cov": "nyc --reporter=text npm test", "t": "x"}},
    ),
    (
        # the quote ends the string early and the rest of the glob reads as a /* comment to the next */
        "a quote typed into a glob key",
        '{\n  "lint": {\n    "src/"**/*.md": [\n      "fix"\n    ],\n    "lib/**/*.js": [\n      "x"\n    ]\n  }\n}\n',
        {"lint": {"src/**/*.md": ["fix"], "lib/**/*.js": ["x"]}},
    ),
    (
        "a letter typed between a key and its colon",
        '{\n  "repository"x: {\n    "type": "git"\n  },\n  "n": 1\n}\n',
        {"repository": {"type": "git"}, "n": 1},
    ),
    ("a regular expression as a bare value", "{regex: /standalone-styles.css/}", {"regex": "/standalone-styles.css/"}),
    ("a path and an address as bare values", "{p: src/app, q: a@b.c}", {"p": "src/app", "q": "a@b.c"}),
    ("a JSONP response", 'callback_123({"a": [1, 2]});\n', {"a": [1, 2]}),
    ("a JSONP call with a dotted name", "window.cb([\n  1\n])", [1]),
]


@pytest.mark.parametrize(("name", "text", "value"), MEANT, ids=[m[0] for m in MEANT])
def test_the_fix_means_what_the_user_wrote(name: str, text: str, value: object) -> None:
    out = fixed_text(text, "json")
    if value is None:  # ambiguous: no guess
        assert out is None, f"{name}: offered {out!r}"
        return
    assert out is not None, f"{name}: no fix"
    assert json.loads(out) == value


# -- candidates, not one guess: the indentation says where a block ended -------------------------------------------


def long_file(n: int = 300) -> tuple[str, dict]:
    value = {f"type/{i}": {"source": "iana", "extensions": [f"e{i}", f"f{i}"]} for i in range(n)}
    return json.dumps(value, indent=2) + "\n", value


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ('"type/150": {', '"type/150": '),  # the opener of an object deleted
        ('"extensions": [\n      "e77"', '"extensions": \n      "e77"'),  # the opener of a list deleted
        ('"f200"\n    ]\n  },', '"f200"\n    ]\n  ,'),  # a closer deleted, its comma kept
        ('"source": "iana",\n    "extensions": [\n      "e9"', '"source": "iana"\n    "extensions": [\n      "e9"'),
        ('"e120",', '"e120"'),  # a comma deleted
        ('"type/42": {', '"type/42" {'),  # a colon deleted
        ('"f5"\n    ]\n  },\n  "type/6"', '"f5"\n    ]\n  }]\n  "type/6"'),  # "," overtyped with "]"
    ],
)
def test_long_editor_file_one_keystroke_is_undone_where_the_indentation_says(old: str, new: str) -> None:
    text, value = long_file()
    assert old in text
    broken = text.replace(old, new, 1)
    with pytest.raises(ValueError):
        json.loads(broken)
    out = fixed_text(broken, "json")
    assert out is not None
    assert json.loads(out) == value


def test_a_comma_goes_right_after_the_value_it_follows() -> None:
    assert keystroke_fix('{"a": 1 "b": 2}', False) == '{"a": 1, "b": 2}'


def test_equally_plausible_repairs_that_mean_different_things_give_no_answer() -> None:
    # "typescript" could become ["typescript"] or lose the stray ]: nothing in the text says which.
    assert keystroke_fix('{\n    "name": "typescript"],\n    "version": "7"\n}\n', False) is None


def test_jsonc_keystroke_keeps_comments() -> None:
    text = '{\n  // compiler\n  "compilerOptions": {\n    "strict" true, // on\n  }\n}\n'
    out = fixed_text(text, "jsonc")
    assert out is not None and "// compiler" in out and "// on" in out
    assert '"strict": true' in out


@pytest.mark.parametrize(
    "text",
    [
        '{\n  // a comment\n  "$schema": https://www.schemastore.org/tsconfig",\n  "_version": "2.0.0"\n}\n',
        '{\n  "a": {\n    "b": true\n  },\n  "$schema": https://x.org/a", // keep\n  "_version": "2.0.0"\n}\n',
    ],
)
def test_jsonc_a_url_missing_its_opening_quote_is_not_cut_at_its_slashes(text: str) -> None:
    # the "//" of https:// reads as a comment start until the quote is back
    out = fixed_text(text, "jsonc")
    assert out is not None and out == text.replace(": https:", ': "https:', 1)


# -- Markdown: fences ----------------------------------------------------------------------------------------------


def md_fix(text: str) -> str | None:
    return fixed_text(text, "markdown")


def blocks(text: str) -> list[tuple[str, str]]:
    from markdown_it import MarkdownIt

    return [
        (t.type, t.content)
        for t in MarkdownIt("commonmark").enable("table").parse(text)
        if t.type in ("fence", "inline")
    ]


def test_a_closer_that_lost_a_backtick_is_the_one_repaired() -> None:
    good = "# Use\n\n```js\nrun()\n```\n\nThen:\n\n```bash\nnpm test\n```\n\nDone.\n"
    broken = good.replace("run()\n```\n", "run()\n``\n", 1)
    assert blocks(broken) != blocks(good)
    assert [i.code for i in find_issues(broken, "markdown")] == ["md.fence-closer"]
    assert md_fix(broken) == good


def test_a_fence_opened_longer_than_it_closes_is_closed_where_its_code_ends() -> None:
    good = "Intro\n\n```text\nsome code\n```\n\nProse after.\n\n- a list\n"
    broken = good.replace("```text", "````text", 1)
    out = md_fix(broken)
    assert out is not None and blocks(out) == blocks(good)
    assert out.startswith("Intro\n\n````text\nsome code\n````\n")  # the closer matches the opener


def test_nested_fences_stay_and_the_outer_closer_is_repaired() -> None:
    good = "````markdown\nExample:\n\n```js\nx()\n```\n````\n\nAfter.\n"
    assert find_issues(good, "markdown") == []
    broken = good.replace("```\n````\n", "```\n```\n", 1)
    out = md_fix(broken)
    assert out is not None and blocks(out) == blocks(good)


def test_an_unclosed_fence_at_the_end_is_still_closed() -> None:
    out = md_fix("Run:\n\n```sh\nmake\n")
    assert out == "Run:\n\n```sh\nmake\n```\n"


# -- Markdown: lists -----------------------------------------------------------------------------------------------


def test_a_bullet_that_changed_marker_joins_its_list_again() -> None:
    out = md_fix("- one\n- two\n* three\n- four\n")
    assert out == "- one\n- two\n- three\n- four\n"


def test_a_nested_bullet_with_its_own_sub_list_changes_marker_back() -> None:
    text = "- top\n  - one\n  - two\n  * three\n    - deep\n  - four\n- next\n"
    assert md_fix(text) == text.replace("  * three", "  - three")


@pytest.mark.parametrize(
    "text",
    ["- a\n- b\n* c\n", "* a\n* b\n+ x\n+ y\n- c\n- d\n", "1) a\n2) b\n1. x\n2. y\n", "099. a\n100. b\n101. c\n"],
)
def test_lists_styled_on_purpose_are_left_alone(text: str) -> None:
    # mdformat's style tests: two lists on purpose, numbers that start late
    assert find_issues(text, "markdown") == []


def test_an_ordered_list_out_of_sequence_is_renumbered_in_place() -> None:
    text = "Steps:\n\n1. a\n2. b\n4. c\n4. d\n"
    codes = [i.code for i in find_issues(text, "markdown")]
    assert codes == ["md.list-number"]  # only the 4 that should read 3
    assert md_fix(text) == "Steps:\n\n1. a\n2. b\n3. c\n4. d\n"
    assert find_issues("1. a\n1. b\n1. c\n", "markdown") == []  # all ones: a style, not a slip


def test_a_nested_item_one_space_short_goes_back_into_its_list() -> None:
    text = "- parent\n  - one\n  - two\n - three\n- next\n"
    assert md_fix(text) == "- parent\n  - one\n  - two\n  - three\n- next\n"


# -- Markdown: tables ----------------------------------------------------------------------------------------------


def test_a_row_without_the_leading_pipe_gets_it_back() -> None:
    text = "| a | b |\n| - | - |\n| 1 | 2 |\n 3 | 4 |\n"
    assert md_fix(text) == "| a | b |\n| - | - |\n| 1 | 2 |\n| 3 | 4 |\n"


def test_a_damaged_separator_row_is_rebuilt_with_its_alignment() -> None:
    text = "| a | b |\n| :-- --: |\n| 1 | 2 |\n"
    assert md_fix(text) == "| a | b |\n| :-- | --: |\n| 1 | 2 |\n"


@pytest.mark.parametrize(
    "text",
    [
        # GFM renders the sentence as one more row of the table: a blank line would move it out (another meaning)
        "| a | b |\n| - | - |\n| 1 | 2 |\nThis sentence follows the table.\n",
        # two rows in two styles: the author's choice (markdownlint MD055), not one slipped keystroke
        "| a | b |\n| - | -\n  1 | 2 |\n",
        # a row wider than the header: which | was typed by mistake is unknown, and a new column changes the table
        "| a | b |\n| - | - |\n| 1 | 2 | 3 |\n",
    ],
)
def test_a_table_that_renders_is_not_restyled_into_another_meaning(text: str) -> None:
    assert md_fix(text) in (None, text)


def test_a_slipped_pipe_is_restored_beside_a_row_wider_than_the_header() -> None:
    text = "| a | b |\n| - | - |\n| 1 | 2 |\n 3 |\n| 4 | 5 | 6 |\n"
    assert md_fix(text) == "| a | b |\n| - | - |\n| 1 | 2 |\n| 3 |  |\n| 4 | 5 | 6 |\n"


# -- minimal: no fix changes bytes outside its span ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "lang"),
    [
        ("- one\n- two\n* three\n- four\n", "markdown"),
        ("# T\n\n```js\nrun()\n``\n\n```bash\nx\n```\n", "markdown"),
        ("| a | b |\n| - | - |\n 1 | 2 |\n| 3 | 4 |\n", "markdown"),
        ('{\n  "a": 1\n  "b": 2\n}\n', "json"),
    ],
)
def test_each_fix_stays_inside_its_span(text: str, lang: str) -> None:
    for issue in find_issues(text, lang):
        fix = rules_fix(text, lang, issue)
        assert fix is not None
        lo, hi = fix.span
        out = fix.apply(text)
        tail = len(text) - hi
        assert out[:lo] == text[:lo] and out[len(out) - tail :] == text[hi:]


# -- quoted words inside a value -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('{"key": "Lorem "ipsum" s,"}', {"key": 'Lorem "ipsum" s,'}),
        ('{ "content": "[LINK]("https://google.com")" }', {"content": '[LINK]("https://google.com")'}),
        ('["lorem "ipsum" sic"]', ['lorem "ipsum" sic']),
        ('{"key": "v"alue", "k": 1}', None),  # one stray quote: typed by mistake or meant, the user decides
        # a comma before a quoted word is prose, not a key boundary read into the string
        (
            '{"comment": "lorem, "ipsum" sic "tamet". To improve"}',
            {"comment": 'lorem, "ipsum" sic "tamet". To improve'},
        ),
    ],
)
def test_quoted_words_are_escaped_and_a_lone_quote_is_left_to_the_user(text: str, value: object) -> None:
    out = fixed_text(text, "json")
    if value is None:
        assert out is None, out
    else:
        assert out is not None and json.loads(out) == value


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('"hello\nworld"', "hello\nworld"),  # Enter typed inside a string: the break is the string's
        ('"hello" + " world"', "hello world"),  # code pasted as JSON: the literals joined as JavaScript reads them
        ("{\n  \"greeting\": 'hello' +\n  'world'\n}", {"greeting": "helloworld"}),
    ],
)
def test_string_slips_are_repaired_as_the_code_reads(text: str, value: object) -> None:
    out = fixed_text(text, "json")
    assert out is not None and json.loads(out) == value


@pytest.mark.parametrize(
    "text", ["{\n  \"greeting\": 'hello' +\n '\\world'\n}", "{\n  \"greeting\": 'hello' +\n 'world:\t'\n}"]
)
def test_joined_literals_with_a_bad_escape_or_a_raw_tab_do_not_crash_the_repair(text: str) -> None:
    out = fixed_text(text, "json")  # the literals cannot be read as JavaScript would: whatever is offered is valid
    assert out is None or json.loads(out)


def test_a_line_break_that_ends_a_string_missing_its_quote_is_not_read_as_inside_it() -> None:
    out = fixed_text('[\n"abc,\n"def"\n]', "json")
    assert out is not None and json.loads(out) == ["abc", "def"]


# -- wrong-but-valid: no fix where the fix would change a value ---------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        '[a",b"]',  # quoting by the misplaced quote's reading gives ["a", ",b"]
        '{"k"e"y": "value"}',  # a key with quotes inside is not a key, a value and another key
    ],
)
def test_a_word_glued_to_a_misplaced_quote_gets_no_fix(text: str) -> None:
    assert fixed_text(text, "json") is None


def test_an_escaped_apostrophe_never_becomes_a_new_double_quote() -> None:
    out = fixed_text('{"key": "valu\\\'e"}', "json")  # JavaScript's \' : an apostrophe, not \" + '
    assert out is None or json.loads(out) == {"key": "valu'e"}


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('{"strict": xtrue, "a": nulll}', {"strict": True, "a": None}),  # a letter typed into a literal
        ('{"a": [fals, tru]}', {"a": [False, True]}),  # a letter lost from one
    ],
)
def test_a_literal_with_one_letter_slipped_stays_a_literal_not_a_string(text: str, value: object) -> None:
    out = fixed_text(text, "json")
    assert out is not None and json.loads(out) == value


def test_a_closer_typed_on_a_line_of_its_own_is_deleted_not_made_a_new_block_end() -> None:
    # an editor file: the "}" at column 0 would close compilerOptions early and pull its members up a level
    text = (
        '{\n  "$schema": "x",\n  "compilerOptions": {\n    "lib": ["es2023"],\n    "target": "es2022",\n}\n'
        '    "strict": true,\n    "skipLibCheck": true\n  }\n}\n'
    )
    out = fixed_text(text, "jsonc")
    assert out is not None
    assert json.loads(out) == {
        "$schema": "x",
        "compilerOptions": {"lib": ["es2023"], "target": "es2022", "strict": True, "skipLibCheck": True},
    }


def test_a_fence_opener_one_backtick_too_long_is_closed_by_its_own_closer_not_an_inner_fence() -> None:
    text = "Intro\n\n`````md\nA\n```\nx = 1\n```\nB\n````\n\nAfter\n"
    out = md_fix(text)
    assert out is not None and blocks(out) == blocks("Intro\n\n````md\nA\n```\nx = 1\n```\nB\n````\n\nAfter\n")
    assert "x = 1\n```\nB" in out  # the inner fence lines keep their text


def test_a_closer_that_lost_a_backtick_is_repaired_when_the_fences_after_it_are_left_open() -> None:
    text = "Intro\n```\ncode\n``\n\n```\nmore code\n```\nEnd\n"
    assert md_fix(text) == "Intro\n```\ncode\n```\n\n```\nmore code\n```\nEnd\n"


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('{"key\nafter": "foo"}', {"key\nafter": "foo"}),  # a line break typed inside a key
        ('{"k": "line one\nline two", "b": 1}', {"k": "line one\nline two", "b": 1}),
    ],
)
def test_a_line_break_typed_inside_a_string_is_escaped_and_kept(text: str, value: object) -> None:
    out = fixed_text(text, "json")
    assert out is not None and json.loads(out) == value


# -- issue 47, set 3 (fixtures/repair_eval3, tune split): the document's end cuts a token --------------------------

CUT_TOKEN = [
    ("a literal's first letter", "[T"),
    ("a literal's first letters", "[Fal"),
    ("null cut, upper case", '{"a": [NU'),
    ("a number cut in its exponent", "[1, 2e"),
    ("a number cut after the exponent's sign", "[1e-"),
    ("a number cut after an exponent sign, upper case", '{"x": [1.5E+'),
    ("a lone minus", "[1, -"),
    ("a hex prefix", '{"a": 0x'),
    ("a literal one letter short, at the end", '{"a": 1, "b": tru'),
]


@pytest.mark.parametrize(("name", "text"), CUT_TOKEN, ids=[n for n, _ in CUT_TOKEN])
def test_a_token_cut_by_the_documents_end_is_not_completed_nor_quoted(name: str, text: str) -> None:
    # "T" could have been true or "The..."; quoting it or dropping it both change what the document said
    assert find_issues(text, "json"), name
    assert fixed_text(text, "json") is None, name


@pytest.mark.parametrize("text", ["tr", "just prose", "str"])
def test_a_document_that_is_only_unquoted_text_gets_no_fix(text: str) -> None:
    assert find_issues(text, "json")
    assert fixed_text(text, "json") is None


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('{"a":2.', {"a": 2.0}),  # a dot is not a cut exponent: 2. reads as 2.0 (jsonrepair's suite)
        ('{"a": [1, 2', {"a": [1, 2]}),  # a whole number before the cut stays
        ("True", True),
    ],
)
def test_truncation_repairs_that_keep_a_whole_token_still_work(text: str, value: object) -> None:
    out = fixed_text(text, "json")
    assert out is not None and json.loads(out) == value


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('{"a": "x\\', {"a": "x"}),
        ('["a\\', ["a"]),
        ('{"a": "b\\\\', {"a": "b\\"}),  # an escaped backslash is whole: kept
    ],
)
def test_an_escape_cut_by_the_documents_end_is_dropped_with_the_string_closed(text: str, value: object) -> None:
    out = fixed_text(text, "json")
    assert out is not None and json.loads(out) == value


@pytest.mark.parametrize("text", ['{"a": "x\\u00', '{"a":"x\\u', '{"a": "x\\ud83d\\ude0', "{a: 'it\\'s \\x4"])
def test_a_code_point_escape_cut_by_the_documents_end_gets_no_fix(text: str) -> None:
    # which character \u00.. spelled is unknown; keeping "\\u00" as text or dropping it are both guesses (the
    # repair suites of partialjson and parse-broken-json disagree)
    assert find_issues(text, "json")
    assert fixed_text(text, "json") is None


def test_a_bad_escape_is_escaped_not_turned_into_an_escaped_quote() -> None:
    # "x\qy": the one-keystroke search once inserted a quote after the backslash ("x\"qy"), a " nobody typed
    out = fixed_text('{"a": "x\\qy"}', "json")
    assert out is not None and json.loads(out) == {"a": "x\\qy"}


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('{\n  "key": "value", # a comment\n  "number": 42  # another\n}\n', {"key": "value", "number": 42}),
        ('{\n  "a": 1, // C style\n  "b": 2  # Python style\n}\n', {"a": 1, "b": 2}),
        ("[1, # one\n 2]", [1, 2]),
        ('{"color": #fff}', {"color": "#fff"}),  # no space after the #: a value missing its quotes, as before
    ],
)
def test_a_python_style_comment_is_deleted_in_json(text: str, value: object) -> None:
    out = fixed_text(text, "json")
    assert out is not None and json.loads(out) == value


def test_a_python_style_comment_becomes_a_jsonc_comment() -> None:
    text = '{\n  # build options\n  "a": 1\n}\n'
    assert find_issues(text, "jsonc")
    assert fixed_text(text, "jsonc") == '{\n  // build options\n  "a": 1\n}\n'


def test_a_byte_order_mark_before_json_is_reported_and_deleted() -> None:
    # json.loads and JSON.parse refuse it (RFC 8259); JSONC (tsconfig) files keep theirs
    assert find_issues('\ufeff{"k": 1}', "json")
    assert fixed_text('\ufeff{"k": 1}', "json") == '{"k": 1}'
    assert fixed_text('\ufeff{"a": 1', "json") == '{"a": 1}'
    assert not find_issues('\ufeff{"k": 1}', "jsonc")


@pytest.mark.parametrize(
    ("text", "value"),
    [("{a: 'it\\'s \\x41'}", {"a": "it's A"}), ("{'k': '\\x41\\u0042'}", {"k": "AB"})],
)
def test_a_hex_escape_in_a_single_quoted_string_is_the_character_it_spells(text: str, value: object) -> None:
    out = fixed_text(text, "json")
    assert out is not None and json.loads(out) == value


def test_a_hex_escape_in_a_double_quoted_string_keeps_its_backslash() -> None:
    out = fixed_text('{"p": "C:\\x64"}', "json")  # a Windows path, most likely
    assert out is not None and json.loads(out) == {"p": "C:\\x64"}


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('Result: {"a": 1}', {"a": 1}),
        ("Here is the JSON: [1, 2]", [1, 2]),
        ('Sure!\nOutput: {"a": 1}', {"a": 1}),
    ],
)
def test_a_label_before_the_json_on_its_line_is_deleted(text: str, value: object) -> None:
    out = fixed_text(text, "json")
    assert out is not None and json.loads(out) == value


def test_a_lower_case_name_before_an_object_is_not_taken_for_a_label() -> None:
    # name: {...} may be a member whose braces were lost: deleting "name:" would drop a key
    assert fixed_text('name: {"a": 1}', "json") is None


def test_a_jsonc_keystroke_fix_that_leaves_a_comma_no_parser_accepts_is_refused() -> None:
    # "[\n  ,]\n]": inserting "[" parses once the comma is blanked as trailing, but "[[,]" has an extra comma
    text = "[\n  ,]\n]"
    out = fixed_text(text, "jsonc")
    assert out is None or not find_issues(out, "jsonc")


@pytest.mark.parametrize(
    ("text", "fixed"),
    [
        ('{"a":\u00a01}', '{"a": 1}'),  # a no-break space pasted from a web page
        ('{\n\u00a0 "a": 1\n}', '{\n  "a": 1\n}'),
        ('{\u000b"a"\u000c: 1\u00a0}', '{ "a" : 1 }'),  # JSON5's white space
        ('{"a":\u200b1}', '{"a":1}'),  # a zero-width space: deleted
    ],
)
def test_white_space_json_does_not_know_becomes_a_space(text: str, fixed: str) -> None:
    assert find_issues(text, "json")
    assert fixed_text(text, "json") == fixed


def test_a_no_break_space_inside_a_string_is_text_and_stays() -> None:
    assert not find_issues('{"a": "x\u00a0y"}', "json")


@pytest.mark.parametrize(
    "text",
    ['**JSON:**\n```json\n{"a": 1}\n```', '### Output\n```json\n{"a": 1}\n```', '> Note: the file\n{"a": 1}'],
)
def test_prose_in_markdown_dress_before_the_json_is_deleted(text: str) -> None:
    out = fixed_text(text, "json")
    assert out is not None and json.loads(out) == {"a": 1}


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('{"regex": /[a-z]+/}', {"regex": "/[a-z]+/"}),  # its brackets once became an array: ["a-z"]
        ('{"r": [/x/, /[0-9]{2}/i]}', {"r": ["/x/", "/[0-9]{2}/i"]}),
    ],
)
def test_a_regular_expression_value_is_quoted_whole(text: str, value: object) -> None:
    out = fixed_text(text, "json")
    assert out is not None and json.loads(out) == value


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('{\n"a": "multi\nline\nstring"\n}', {"a": "multi\nline\nstring"}),
        ('{"a": "one\ntwo", "b": "x\ny"}', {"a": "one\ntwo", "b": "x\ny"}),
    ],
)
def test_every_raw_line_break_of_a_multi_line_string_is_escaped(text: str, value: object) -> None:
    out = fixed_text(text, "json")
    assert out is not None and json.loads(out) == value


def test_a_quote_deleted_after_a_backslash_comes_back_when_it_pairs_with_another() -> None:
    # "echo \"Error: no test specified\" && exit 1" lost the quote of its first \": the escaped quotes pair again
    text = '{\n  "test": "echo \\Error: no test specified\\" && exit 1"\n}\n'
    out = fixed_text(text, "json")
    assert out is not None and json.loads(out) == {"test": 'echo "Error: no test specified" && exit 1'}


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('[\nx    "gemini",\n    "b"\n]\n', ["gemini", "b"]),
        ('{\n  "k": [\nq    "gemini",\n    "b"\n  ]\n}\n', {"k": ["gemini", "b"]}),
    ],
)
def test_a_letter_typed_before_a_lines_indentation_is_deleted_not_made_an_element(text: str, value: object) -> None:
    # quoting it and adding a comma gave ["x", "gemini", "b"]: an element nobody wrote
    out = fixed_text(text, "json")
    assert out is not None and json.loads(out) == value


@pytest.mark.parametrize(
    "text",
    [
        # a "[" typed before the value, or the "]" after it deleted: the same text, two meanings
        '{\n  "name": ["Dante Chun",\n  "version": "1.0.0"\n}\n',
        # a quote typed after a plain number: 12" may be 12 inches (the escaped quote), so the tie stays
        '{"size": "12"", "n": 1}',
    ],
)
def test_tied_one_keystroke_undos_that_disagree_give_no_fix(text: str) -> None:
    assert find_issues(text, "json")
    assert fixed_text(text, "json") is None


def test_a_stray_closer_tie_is_still_settled_by_deleting_the_closer() -> None:
    text = '{\n    "name": "typescript"],\n    "version": "7.0.2"\n}\n'
    out = fixed_text(text, "json")
    assert out is not None and json.loads(out) == {"name": "typescript", "version": "7.0.2"}


@pytest.mark.parametrize(
    "text",
    [
        '{\n  "homepage": "https:"//github.com/x/y",\n  "n": 1\n}\n',
        '{\n  "homepage": "https"://github.com/x/y",\n  "n": 1\n}\n',
    ],
)
def test_a_quote_typed_into_a_url_is_deleted_not_the_rest_taken_for_a_comment(text: str) -> None:
    out = fixed_text(text, "json")
    assert out is not None and json.loads(out) == {"homepage": "https://github.com/x/y", "n": 1}


@pytest.mark.parametrize(
    "text",
    [
        '[\n    "a",\n   x "chatgpt",\n    "b"\n]\n',
        '{\n  "keywords": [\n    "nlp"\n x ],\n  "b": 1\n}\n',
        '[\n    "a",\n    "repair",x\n    "b"\n]\n',
    ],
)
def test_a_letter_typed_first_on_a_line_is_deleted(text: str) -> None:
    out = fixed_text(text, "json")
    assert out is not None and "x" not in out


def test_a_character_typed_into_a_jsonc_comments_slashes_is_deleted() -> None:
    # "/,/ note" once became the member "note about": "b" (the comment's words made a key and a value)
    text = '{\n  "a": "1",\n  /,/ note about @types/glob\n  "b": 2\n}\n'
    assert fixed_text(text, "jsonc") == '{\n  "a": "1",\n  // note about @types/glob\n  "b": 2\n}\n'


def test_a_key_with_a_colon_that_the_documents_end_cuts_is_not_split_into_a_key_and_a_value() -> None:
    # "release:min" (of npm's "release:minor") once became "release": "min"
    text = '{\n  "scripts": {\n    "release:patch": "x",\n    "release:min'
    assert find_issues(text, "json")
    assert fixed_text(text, "json") is None
    assert json.loads(fixed_text('{"a: 1}', "json") or "") == {"a": 1}  # a key missing its quote, not cut: as before


@pytest.mark.parametrize(
    ("text", "fixed"),
    [
        ('<json>{"a": 1}</json>', '{"a": 1}'),
        ('<output>\n{"a": 1,}\n</output>\n', '{"a": 1}\n'),
    ],
)
def test_xml_style_tags_around_the_json_are_deleted(text: str, fixed: str) -> None:
    # a chat model's <json> / <output> wrapper: markup, no value
    assert fixed_text(text, "json") == fixed


def test_a_tag_inside_a_string_stays_text() -> None:
    assert not find_issues('{"a": "<b>"}', "json")


# -- the fourth set's families (real files of npm packages, damaged as people and chat models damage them) -------


@pytest.mark.parametrize(
    ("text", "value"),
    [
        # once a tie with the escaped reading ("verbose\"": a key ending in a quote): no fix
        ('{\n  "a": {\n    "verbose"": true,\n    "b": 1\n  }\n}\n', {"a": {"verbose": True, "b": 1}}),
        (
            '{"name":"x",""version":"1.0.0","url":"https://a.b/c"}',
            {"name": "x", "version": "1.0.0", "url": "https://a.b/c"},
        ),
        ('{"deps":{"a":"^4.3.7"","b":"^1.0.0"}}', {"deps": {"a": "^4.3.7", "b": "^1.0.0"}}),
        ('[\n\t"style"",\n\t"sub"\n]\n', ["style", "sub"]),
    ],
)
def test_a_quote_typed_twice_at_a_strings_start_or_end_is_deleted(text: str, value: object) -> None:
    # ""key" / "key"": / "value"": one string with no quote inside, then the same quote again; in compact text
    # too, where the shifted strings read a URL's // as a comment
    out = fixed_text(text, "json")
    assert out is not None and json.loads(out) == value


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('{"directory": "C:\\modules\\tinymce"}', {"directory": "C:\\modules\\tinymce"}),
        ('{"bin": ".\\dist\\bin\\cli.js"}', {"bin": ".\\dist\\bin\\cli.js"}),
        ('{"re": "^\\d+\\.\\d+$"}', {"re": "^\\d+\\.\\d+$"}),
    ],
)
def test_a_path_with_unescaped_backslashes_keeps_every_backslash(text: str, value: object) -> None:
    # only escaping the bad escapes (\m) put a tab into C:\modules\tinymce (its \t read as an escape)
    out = fixed_text(text, "json")
    assert out is not None and json.loads(out) == value


def test_a_string_that_knows_jsons_escapes_keeps_its_tab() -> None:
    # a \\ shows the writer escaped their backslashes: the \t is a tab, the bad \q alone is kept as text
    out = fixed_text('{"a": "x\\\\y\\tz\\q"}', "json")
    assert out is not None and json.loads(out) == {"a": "x\\y\tz\\q"}


def test_a_paths_last_backslash_before_the_closing_quote_is_the_paths() -> None:
    text = '{\n  "main": "lib\\autoprefixer.js\\",\n  "bin": "bin/x"\n}\n'
    out = fixed_text(text, "json")
    assert out is not None and json.loads(out) == {"main": "lib\\autoprefixer.js\\", "bin": "bin/x"}


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('{"description": "\\\'Full\\\' list of zones"}', {"description": "'Full' list of zones"}),
        (
            '{\n  "SJ": "Svalbard",\n  "CI": "C\u00f4te d\\\'Ivoire"\n}\n',
            {"SJ": "Svalbard", "CI": "C\u00f4te d'Ivoire"},
        ),
    ],
)
def test_an_escaped_apostrophe_in_a_double_quoted_string_is_the_apostrophe(text: str, value: object) -> None:
    # \' is an apostrophe in JavaScript and Python strings of either quote; the validator once read it as "\\'"
    out = fixed_text(text, "json")
    assert out is not None and json.loads(out) == value


@pytest.mark.parametrize(
    ("text", "value"),
    [
        (
            '[\n  {\n    "a": 1,\n    "u": [\n      "x"\n    ]\n  ],\n  {\n    "a": 2\n  }\n]\n',
            [{"a": 1, "u": ["x"]}, {"a": 2}],
        ),
        ('{"a":{"b":1],"c":2}', {"a": {"b": 1}, "c": 2}),
        ('{"a":[1,2},"c":2}', {"a": [1, 2], "c": 2}),
    ],
)
def test_a_closer_of_the_wrong_kind_is_replaced(text: str, value: object) -> None:
    # read as closing the outer container it names, it left "{" open: the fallback then wrapped the file in "[["
    out = fixed_text(text, "json")
    assert out is not None and json.loads(out) == value


@pytest.mark.parametrize(
    ("text", "fixed"),
    [
        ('const config = {\n  "a": 1\n};\n', '{\n  "a": 1\n}\n'),
        ('export default {"a": [1]}\n', '{"a": [1]}\n'),
        ("module.exports = [1, 2];", "[1, 2]"),
        ('var data = {"a": 1}', '{"a": 1}'),
        ('<script>\n  window.__INITIAL_STATE__ = {"a": 1};\n</script>\n', '{"a": 1}\n'),
    ],
)
def test_javascript_around_the_json_is_deleted(text: str, fixed: str) -> None:
    assert fixed_text(text, "json") == fixed


def test_an_assignment_whose_value_is_not_json_gets_no_wrapper_fix() -> None:
    assert fixed_text("const config = {a: b};\n", "json") != "{a: b}\n"


@pytest.mark.parametrize(
    ("text", "value"),
    [
        (
            '{"c": ["Doug", "Jonathan Ong (http://jongleberry."com")"], "r": 1}',
            {"c": ["Doug", 'Jonathan Ong (http://jongleberry."com")'], "r": 1},
        ),
        (
            '{\n  "keywords": [\n    "code",\n    ""code" standards",\n    "style"\n  ]\n}\n',
            {"keywords": ["code", '"code" standards', "style"]},
        ),
    ],
)
def test_quoted_words_in_an_array_element_after_a_comma_are_escaped(text: str, value: object) -> None:
    # an element's value starts after a comma too (it was looked for only after ":" and "[")
    out = fixed_text(text, "json")
    assert out is not None and json.loads(out) == value


def test_a_closer_missing_inside_a_compact_document_that_ends_with_a_closer_gets_no_fix() -> None:
    # {"engines":{"node":">=14","keywords":[...]}: the "}" after ">=14" or at the end; no indentation to tell, and
    # closing at the end moves every member after the cut into the inner object
    assert fixed_text('{"a":{"b":1,"c":2}', "json") is None
    assert fixed_text('{"e":{"node":">=14"},"d":{"x":"^4","y":"^1"}', "json") is None
    # one member inside, or the root left open: closing at the end is the only reading
    assert json.loads(fixed_text('{"a":{"b":1}', "json") or "") == {"a": {"b": 1}}
    assert json.loads(fixed_text('[{"a":1},{"b":2}', "json") or "") == [{"a": 1}, {"b": 2}]


@pytest.mark.parametrize(
    ("text", "fixed"),
    [
        # the opening quote lost after a comma: escaping or deleting the quote before the comma parses too, but
        # each would make a string holding a delimiter ("es2024,ESNext.Array")
        (
            '{"lib":["es2024",ESNext.Array","ESNext.Iterator"],"m":1}',
            '{"lib":["es2024","ESNext.Array","ESNext.Iterator"],"m":1}',
        ),
        # the closing quote lost before a comma
        (
            '{"roots":["./index.d.ts,"./node_modules/@types"],"c":true}',
            '{"roots":["./index.d.ts","./node_modules/@types"],"c":true}',
        ),
        (
            '{\n  "GM": ["Republic of The Gambia, "The Gambia", "Gambia"],\n  "GE": "Georgia"\n}\n',
            '{\n  "GM": ["Republic of The Gambia", "The Gambia", "Gambia"],\n  "GE": "Georgia"\n}\n',
        ),
    ],
)
def test_a_quote_lost_beside_a_comma_in_compact_text_is_put_back(text: str, fixed: str) -> None:
    assert fixed_text(text, "json") == fixed


@pytest.mark.parametrize(
    "text",
    [
        # the string's text holds a comma whichever reading is taken: where it ends is a guess
        '{"a":["x,y,"z"],"b":1}',
        # a stray quote inside a word of compact text (an inch mark or a slip: the user's call)
        '{"key": "v"alue", "k": 1}',
    ],
)
def test_a_quote_tie_that_no_plain_string_settles_gets_no_fix(text: str) -> None:
    assert fixed_text(text, "json") is None


@pytest.mark.parametrize(
    ("text", "value"),
    [
        # a compact array: the element ends before the next element's quote, not at a ',"key":'
        ('{"keywords":["html",""rich" editor","rte"],"n":1}', {"keywords": ["html", '"rich" editor', "rte"], "n": 1}),
        ('{"a": ["x", ""JSXElement" > *", "y"]}', {"a": ["x", '"JSXElement" > *', "y"]}),
        # a key quoting a word: it ends at its colon
        ('{"my "key"": 1}', {'my "key"': 1}),
    ],
)
def test_quoted_words_in_a_compact_element_or_a_key_are_escaped(text: str, value: object) -> None:
    out = fixed_text(text, "json")
    assert out is not None and json.loads(out) == value


def test_quotes_around_no_word_in_a_compact_array_are_a_missing_comma() -> None:
    # two strings with no comma between them: the quotes enclose a space, no quoted word
    assert fixed_text('["a" "b", "c"]', "json") == '["a", "b", "c"]'


def _long_compact(member: str) -> tuple[str, dict]:
    """A minified document past the keystroke search's whole-line limit, ``member`` in its middle."""
    names = {f"K{i:03}": f"Country number {i}" for i in range(300)}
    value = {"locale": "en", "countries": names}
    text = json.dumps(value, separators=(",", ":"))
    cut = text.index('"K150"')
    return text[:cut] + member + "," + text[cut:], value


@pytest.mark.parametrize(
    ("member", "key", "meant"),
    [
        ('"PM":Saint Pierre and Miquelon"', "PM", "Saint Pierre and Miquelon"),  # an opening quote lost
        ('"OM":""Oman"', "OM", "Oman"),  # a quote typed twice
    ],
)
def test_one_keystroke_in_a_long_minified_document_is_undone(member: str, key: str, meant: str) -> None:
    text, value = _long_compact(member)
    assert len(text) > 4000 and "\n" not in text
    out = fixed_text(text, "json")
    assert out is not None and json.loads(out)["countries"] == {**value["countries"], key: meant}


@pytest.mark.parametrize(
    "text",
    [
        # the second escape of a quoted word lost its backslash: a doubled quote or a lost escape, no telling
        '{"d":"Core schema \\"meta-schema"","e":1}',
        '{"d":["Pitcairn",""Pitcairn\\" Islands"],"e":1}',
    ],
)
def test_a_doubled_quote_beside_an_unpaired_escape_gets_no_fix(text: str) -> None:
    assert fixed_text(text, "json") is None


@pytest.mark.parametrize(
    ("text", "fixed"),
    [
        # last on the root opener's line
        ('{x\n  "name": "a",\n  "version": "1.0.0"\n}\n', '{\n  "name": "a",\n  "version": "1.0.0"\n}\n'),
        # a CRLF file: the letter typed between a line's comma and its "\r"
        ('[\r\n  "json",\rx\n  "llm"\r\n]\r\n', '[\r\n  "json",\r\n  "llm"\r\n]\r\n'),
    ],
)
def test_a_letter_typed_last_on_a_line_after_its_opener_or_comma_is_deleted(text: str, fixed: str) -> None:
    assert fixed_text(text, "json") == fixed


def test_a_bracket_typed_before_an_object_whose_first_line_is_a_comment_is_deleted() -> None:
    # the first line indented other than it nests comes after a comment line: the "[" line is the one to edit
    text = '{\n  "license": "MIT",\n  "dev":[ {\n    // note\n    "a": "^1.0.0",\n    "b": "^2.0.0"\n  }\n}\n'
    assert fixed_text(text, "jsonc") == text.replace('"dev":[ {', '"dev": {')


@pytest.mark.parametrize("slip", ['""url"', '"u"rl"'])
def test_a_quote_slip_on_a_jsonc_line_whose_url_reads_as_a_comment_is_undone(slip: str) -> None:
    # while the quotes are off, "https://..." reads as https: and a // comment: the edited line is blanked again
    text = '{\n  // note about bugs\n  "bugs": {\n    "url": "https://github.com/x/issues"\n  },\n  "b": 1\n}\n'
    assert fixed_text(text.replace('"url"', slip), "jsonc") == text


@pytest.mark.parametrize(
    ("text", "fixed"),
    [
        # deleting the other quote leaves " loose-json" (a space first), escaping it a quote in the value
        ('{\n  "name":" "loose-json",\n  "v": "1.1.2"\n}\n', '{\n  "name": "loose-json",\n  "v": "1.1.2"\n}\n'),
        ('{\n  "name": "json" ",\n  "v": "1.1.2"\n}\n', '{\n  "name": "json" ,\n  "v": "1.1.2"\n}\n'),
    ],
)
def test_a_quote_typed_beside_a_delimiter_is_deleted(text: str, fixed: str) -> None:
    assert fixed_text(text, "json") == fixed


def test_a_quote_typed_twice_before_a_comma_stays_the_doubling_rules() -> None:
    assert fixed_text('{"a": "12"", "b": 1}', "json") is None  # 12 inches, or a slip


def test_a_jsonc_glob_that_lost_its_opening_quote_gets_no_fix() -> None:
    # lib/*.js read as "lib" and a block comment: quoting "lib" and closing the comment would cut the string
    text = '{\n  "scripts": {\n    "lint": eslint bin lib/*.js",\n    "test": "mocha"\n  },\n  "x": 1\n}\n'
    assert fixed_text(text, "jsonc") is None


def test_a_quote_lost_late_in_a_one_line_document_of_3000_characters_is_put_back() -> None:
    # the keystroke search tries the line's edits from its start and stops after its parse budget, before the error
    names = {f"K{i:03}": f"Country number {i}" for i in range(110)}
    text = json.dumps({"locale": "en", "countries": names}, separators=(",", ":"))
    cut = text.index('"K100"')
    broken = text[:cut] + '"PM":Saint Pierre",' + text[cut:]
    out = fixed_text(broken, "json")
    assert out is not None and json.loads(out)["countries"] == {**names, "PM": "Saint Pierre"}
