"""The validation gate: what it accepts, and the plausible-looking fixes it must refuse."""

from __future__ import annotations

import json_repair
import pytest

from dgemma_lsp.lsp.repair import Edit, apply_edits, minimal_edits, validate_edits, validate_fix
from dgemma_lsp.lsp.repair.model import rewrite_check


def _whole(text: str) -> tuple[int, int]:
    return (0, len(text))


def test_accepts_a_minimal_valid_fix() -> None:
    broken = '{"a": 1, "b": 2,}'
    assert validate_fix(broken, '{"a": 1, "b": 2}', "json", (15, 16)) is None


def test_refuses_json_repair_dropping_the_dollar_of_id() -> None:
    broken = '{$id: "urn:x", "n": 1}'
    repaired = json_repair.repair_json(broken)
    assert '"$id"' not in repaired  # the library's known trap
    why = validate_fix(broken, repaired, "json", _whole(broken))
    assert why is not None and "$id" in why


def test_refuses_a_fix_that_drops_the_backslashes_of_a_windows_path() -> None:
    broken = '{"p": "C:\\Users\\me", "n": 1,}'
    lossy = '{"p": "C:Users\\\\me", "n": 1}'
    why = validate_fix(broken, lossy, "json", _whole(broken))
    assert why is not None and "Users" in why
    good = '{"p": "C:\\\\Users\\\\me", "n": 1}'
    assert validate_fix(broken, good, "json", _whole(broken)) is None


def test_refuses_a_fix_that_strips_jsonc_comments() -> None:
    broken = '{\n  // why 14\n  "size": 14\n  "tab": 2\n}'
    stripped = json_repair.repair_json(broken)
    assert "//" not in stripped
    assert validate_fix(broken, stripped, "jsonc", _whole(broken)) is not None
    assert validate_fix(broken, '{\n  // why 14\n  "size": 14,\n  "tab": 2\n}', "jsonc", _whole(broken)) is None


def test_refuses_changes_outside_the_span() -> None:
    broken = '{"a": 1 "b": 2, "c": 3}'
    fixed = '{"a": 1, "b": 2, "c": 4}'
    assert "outside" in validate_fix(broken, fixed, "json", (7, 8))


def test_refuses_an_insert_that_swallows_text_after_the_span() -> None:
    # text after the span is byte-identical, but an opened string changes what it means
    broken = '{"a": 1 "b": "x"}'
    sneaky = '{"a": "1 "b": "x"}'
    assert validate_fix(broken, sneaky, "json", (6, 7)) is not None
    comment = '{"a": 1, /* "b": "x"} */ }'
    assert validate_fix('{"a": 1, "b": "x"} }', comment, "jsonc", (8, 9)) is not None


def test_refuses_a_fix_that_leaves_the_document_broken() -> None:
    broken = '{"a": [1, 2'
    assert "problem" in validate_fix(broken, '{"a": [1, 2]', "json", _whole(broken))


def test_a_local_fix_may_leave_other_problems_alone() -> None:
    broken = '{"a": 1,, "b": 2 "c": 3}'
    one = '{"a": 1, "b": 2 "c": 3}'  # the double comma fixed, the missing comma still there
    assert validate_fix(broken, one, "json", (8, 9)) is None
    assert validate_fix(broken, one, "json", (0, len(broken))) is not None  # but not as a whole-document fix


def test_refuses_a_value_change_inside_the_span() -> None:
    broken = '{"a": 1 "b": 2}'
    assert "value" in validate_fix(broken, '{"a": 1, "b": 3}', "json", (0, len(broken)))


def test_refuses_a_fix_that_adds_text_to_a_string() -> None:
    # The small model's missing-comma fix on held-out data (v6): valid JSON, the comma added, and a string
    # grown from "mode index_count" to "mode index_countcount" -- it still contains the old value, so only a check
    # for invented characters catches it.
    broken = '{\n  "a": {\n    "b": 1\n  }\n  "id": "mode index_count"\n}'
    grown = '{\n  "a": {\n    "b": 1\n  },\n  "id": "mode index_countcount"\n}'
    why = validate_fix(broken, grown, "json", _whole(broken))
    assert why is not None and "adds text" in why
    right = '{\n  "a": {\n    "b": 1\n  },\n  "id": "mode index_count"\n}'
    assert validate_fix(broken, right, "json", _whole(broken)) is None
    # nor spaces at the ends of a string: the small model's missing-quote fix that opened the string too early
    broken = '{\n  "count": {\n    url": null,\n    "b": 1\n  }\n}'
    spaced = '{\n  "count": {\n " url": null,\n    "b": 1\n  }\n}'
    why = validate_fix(broken, spaced, "json", _whole(broken))
    assert why is not None and "spaces" in why
    assert validate_fix(broken, broken.replace(' url"', ' "url"'), "json", _whole(broken)) is None
    assert validate_fix('{"a": "x ', '{"a": "x "}', "json", (0, 9)) is None  # a truncated string keeps its space
    # merging an unquoted value into one string adds nothing and stays accepted
    assert validate_fix('{"name": John Smith}', '{"name": "John Smith"}', "json", (9, 19)) is None
    assert validate_fix("{'caf\\u00e9': 1}", '{"café": 1}', "json", (0, 16)) is None


def test_markdown_table_fix_must_keep_cells_and_one_width() -> None:
    broken = "| a | b |\n|---|---|\n| 1 |\n"
    assert validate_fix(broken, "| a | b |\n|---|---|\n| 1 |  |\n", "markdown", _whole(broken)) is None
    assert validate_fix(broken, "| a | b |\n|---|---|\n| x |  |\n", "markdown", _whole(broken)) is not None
    assert validate_fix(broken, "| a | b |\n|---|---|\n| 1 |\n| 2 |\n", "markdown", _whole(broken)) is not None


def test_markdown_fence_fix_must_close_the_fence() -> None:
    broken = "```py\nx = 1\n"
    assert validate_fix(broken, broken + "```\n", "markdown", _whole(broken)) is None
    assert validate_fix(broken, broken + "``\n", "markdown", _whole(broken)) is not None


def test_validate_edits_checks_far_apart_edits_separately() -> None:
    head = '{"a": 1,}'
    body = ",\n".join(f'"k{i}": {i}' for i in range(200))
    text = "[" + head + ",\n{" + body + "}, [1 2]]"
    edits = [(8, 9, ""), (len(text) - 4, len(text) - 4, ",")]
    fixed, why = validate_edits(text, edits, "json", [(8, 9), (len(text) - 4, len(text) - 2)])
    assert why is None and fixed.endswith("[1, 2]]")
    _, why = validate_edits(text, edits, "json", [(8, 9)])
    assert why is not None  # an edit outside the spans


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("", "x"),
        ("abc", ""),
        ('{"a": 1,}', '{"a": 1}'),
        ("line1\nline2\nline3\n", "line1\nLINE2\nline3\nline4\n"),
        ("x" * 30000 + "a" + "y" * 30000, "x" * 30000 + "b" + "y" * 30000),
    ],
)
def test_minimal_edits_round_trip_and_stay_small(a: str, b: str) -> None:
    edits = minimal_edits(a, b)
    assert apply_edits(a, edits) == b
    assert sum(e.end - e.start for e in edits) <= max(len(a), 1)
    if len(a) > 1000:
        assert edits == [Edit(30000, 30001, "b")]


def test_rewrite_check_confines_edits_and_refuses_broken_structure() -> None:
    text = '{"name": "x", "tags": ["a", "b"]}'
    start, end = text.index('["a"'), text.index("]") + 1
    edits, why = rewrite_check(text, start, end, '["a", "b", "c"]', "json")
    assert why is None and all(start <= e.start <= e.end <= end for e in edits)
    assert apply_edits(text, edits) == '{"name": "x", "tags": ["a", "b", "c"]}'
    _, why = rewrite_check(text, start, end, '["a", "b"', "json")
    assert why is not None
    edits, why = rewrite_check("print(1)\n", 6, 7, "2", "python")  # unknown structure: edits only
    assert why is None and edits == [Edit(6, 7, "2")]


def test_undo_layout_changes_keeps_the_fix_and_the_original_indentation() -> None:
    from dgemma_lsp.lsp.repair.edits import undo_layout_changes

    # a model's fix that also re-indented lines (seen from the small model on held-out breakage)
    broken = '{\n  "a": 1,\n  "b": [\n    2\n  ],\n}'
    model = '{\n "a": 1,\n  "b": [\n    2\n ]\n}'
    assert undo_layout_changes(broken, model) == '{\n  "a": 1,\n  "b": [\n    2\n  ]\n}'
    # joined or split lines are layout too; edits that mix whitespace with other text stay whole
    assert undo_layout_changes("[1,\n 2 3]", "[1, 2, 3]") == "[1,\n 2, 3]"
    assert undo_layout_changes('{"a": 1 "b": 2}', '{"a": 1,\n"b": 2}') == '{"a": 1,\n"b": 2}'
    assert undo_layout_changes("same", "same") == "same"


def test_a_comment_that_only_a_broken_string_opened_is_read_line_by_line_but_a_real_one_is_not() -> None:
    from dgemma_lsp.lsp.repair.validate import _blocks_only_opened_in

    broken = '{\n  "src/"**/*.md": [\n    "fix"\n  ],\n  "lib/**/*.js": 1\n}\n'
    fixed = broken.replace('"src/"**', '"src/**', 1)
    line = (2, broken.index("\n", 2))
    seg = [(line[0], line[1], line[0], line[1] - 1)]
    assert _blocks_only_opened_in(broken, fixed, seg, 0, len(broken), 0, len(fixed))
    assert validate_fix(broken, fixed, "json", line) is None
    # a comment the fixed text still has, or one that starts on a line the fix does not touch, is no misreading
    real = '{\n  "a": "x"y",\n  /* keep\n  this */ "b": 1\n}\n'
    cut = real.replace('"x"y"', '"xy"', 1)
    line = (2, real.index("\n", 2))
    seg = [(line[0], line[1], line[0], line[1] - 1)]
    assert not _blocks_only_opened_in(real, cut, seg, 0, len(real), 0, len(cut))
    swallowed = '{\n  "a": "x",\n  "b": "/* c */ 1"\n}\n'
    other = '{\n  "a": "x" y,\n  "b": /* c */ 1\n}\n'
    line = (2, other.index("\n", 2))
    assert not _blocks_only_opened_in(
        other, swallowed, [(line[0], line[1], line[0], line[1] - 1)], 0, len(other), 0, len(swallowed)
    )


def test_a_letter_between_a_key_and_its_colon_is_no_value_but_a_word_or_a_letter_after_a_value_is() -> None:
    broken = '{\n  "repository"x: {\n    "type": "git"\n  }\n}\n'
    assert validate_fix(broken, broken.replace('"x:', '":', 1), "json", (2, 19)) is None
    after_value = '{\n  "type": "module"x,\n  "n": 1\n}\n'
    why = validate_fix(after_value, after_value.replace('"x,', '",', 1), "json", (2, 22))
    assert why is not None and "'x'" in why


def test_char_diff_matches_difflib() -> None:
    """The fast longest-match search gives difflib's own matching blocks (edits, and so fixes, unchanged)."""
    import difflib
    import json
    import random

    from dgemma_lsp.lsp.repair.edits import _StrMatcher

    rng = random.Random(7)
    for _ in range(600):
        alpha = rng.choice(["ab", ' \n{}":,ab', "abcdefghij"])
        a = "".join(rng.choice(alpha) for _ in range(rng.randint(0, 300)))
        b = list(a)
        for _ in range(rng.randint(0, 30)):
            p = rng.randint(0, len(b))
            if b and p < len(b) and rng.random() < 0.5:
                del b[p]
            else:
                b.insert(p, rng.choice(alpha))
        bs = "".join(b) if rng.random() < 0.7 else "".join(rng.choice(alpha) for _ in range(rng.randint(0, 300)))
        want = difflib.SequenceMatcher(None, a, bs, autojunk=False).get_opcodes()
        assert _StrMatcher(None, a, bs, autojunk=False).get_opcodes() == want
    doc = '{\n  "name": "x",\n  "files": [\n    "a.js",\n    "b.js"\n  ]\n}\n'
    wrapped = "module.exports = " + doc.replace("\n  ", "\n    ") + ";"
    want = difflib.SequenceMatcher(None, wrapped, doc, autojunk=False).get_opcodes()
    assert _StrMatcher(None, wrapped, doc, autojunk=False).get_opcodes() == want
    # a document written again with other separators and indentation (json-repair's output for a span): long and
    # short matches, pieces repeated all over
    for _ in range(60):
        value = {
            f"k{i}": rng.choice([1, "iso 3166", ["a", "b", {"c": None}], "x" * rng.randint(0, 40)]) for i in range(40)
        }
        minified = json.dumps(value, separators=(",", ":"))
        for other in (json.dumps(value), json.dumps(value, indent=rng.choice([2, 4]))):
            want = difflib.SequenceMatcher(None, minified, other, autojunk=False).get_opcodes()
            assert _StrMatcher(None, minified, other, autojunk=False).get_opcodes() == want
