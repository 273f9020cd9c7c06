"""Markdown repair on the breakage families of issue 47 that set 5 (``fixtures/repair_eval5``) holds, checked as a
user sees it: the fixed document, byte for byte, or no fix where where the damage went is a guess."""

from __future__ import annotations

import pytest

from dgemma_lsp.lsp.diagnostics import find_issues
from dgemma_lsp.lsp.repair import checked_output, rules_fix


def fixed(text: str) -> str | None:
    """What ``dgemma-lsp fix --language markdown --repair rules --output fixed`` prints (None: no validated fix)."""
    fix = rules_fix(text, "markdown", None)
    if fix is None:
        return None
    out, why = checked_output(text, fix, "markdown", whole=True)
    assert why is None, why
    return out


REPAIRED = [
    (
        "a deleted closer: the fence closes where its code ends, before the prose after a blank line",
        "# Use\n\n```js\nrun()\nstop()\n\nThen read the log file.\n\n## API\n",
        "# Use\n\n```js\nrun()\nstop()\n```\n\nThen read the log file.\n\n## API\n",
    ),
    (
        "a deleted closer: the fence swallows the next fence's opener",
        "Install:\n\n```js\nimport a from 'a'\n\nOr with the CLI:\n\n```sh\nnpx a\n```\n\nDone.\n",
        "Install:\n\n```js\nimport a from 'a'\n```\n\nOr with the CLI:\n\n```sh\nnpx a\n```\n\nDone.\n",
    ),
    (
        "a closer written with the other character",
        "```ts\ntype A = 1\n~~~\n\n### Info\n\n```ts\ntype B = 2\n```\n",
        "```ts\ntype A = 1\n```\n\n### Info\n\n```ts\ntype B = 2\n```\n",
    ),
    (
        "an opener written with the other character",
        "Run:\n\n~~~bash\nmake\n```\n\nThe end of the story.\n",
        "Run:\n\n~~~bash\nmake\n~~~\n\nThe end of the story.\n",
    ),
    (
        "an opener that lost a backtick (``js)",
        "Usage:\n\n``js\nconst a = 1\n```\n\nMore words here.\n\n```sh\nnpm i\n```\n",
        "Usage:\n\n```js\nconst a = 1\n```\n\nMore words here.\n\n```sh\nnpm i\n```\n",
    ),
    (
        "a bare opener that lost a backtick, the next fence bare too",
        "Using NPM:\n``\n$ npm install pino\n```\n\nUsing YARN:\n```\n$ yarn add pino\n```\n",
        "Using NPM:\n```\n$ npm install pino\n```\n\nUsing YARN:\n```\n$ yarn add pino\n```\n",
    ),
    (
        "a Markdown example written with the run of the fence it holds",
        "###### In\n\n```markdown\n```javascript\nmercury()\n```\n```\n\n###### Out\n",
        "###### In\n\n````markdown\n```javascript\nmercury()\n```\n````\n\n###### Out\n",
    ),
    (
        "a Markdown example whose inner fence is bare",
        "###### In\n\n```markdown\n```\nmercury()\n```\n```\n\n###### Out\n",
        "###### In\n\n````markdown\n```\nmercury()\n```\n````\n\n###### Out\n",
    ),
    (
        "a Markdown example whose opener alone lost its fourth backtick",
        "###### In\n\n```markdown\n```js\nx()\n```\n````\n\n###### Out\n",
        "###### In\n\n````markdown\n```js\nx()\n```\n````\n\n###### Out\n",
    ),
    (
        "a pipe deleted between two cells (their spaces run together)",
        "| Alpha | Bravo   |\n| ----- | ------- |\n| one     Charlie |\n| two   | Delta   |\n",
        "| Alpha | Bravo   |\n| ----- | ------- |\n| one    | Charlie |\n| two   | Delta   |\n",
    ),
    (
        "a pipe deleted from a separator of one-dash cells",
        "| Preset | Options |\n| -  - |\n| a | b |\n",
        "| Preset | Options |\n| - | - |\n| a | b |\n",
    ),
    (
        "a second table glued under the first (the blank line lost)",
        "a|b\n-|-\n1|2\nc|d\n-|-\n3|4\n",
        "a|b\n-|-\n1|2\n\nc|d\n-|-\n3|4\n",
    ),
    (
        "a header that lost its leading | and reads as indented code",
        "Levels:\n\n    |   |\n|:--|--:|\n| a | b |\n",
        "Levels:\n\n|    |   |\n|:--|--:|\n| a | b |\n",
    ),
    (
        "a nested ordered list numbered out of sequence",
        "- Files, in order:\n  1. `a.json`\n  3. `b.json`\n  3. `c.yaml`\n  4. `d.yml`\n",
        "- Files, in order:\n  1. `a.json`\n  2. `b.json`\n  3. `c.yaml`\n  4. `d.yml`\n",
    ),
    (
        "a closer of the other character, the fences after it left open at the end",
        "```\nvenus()\n~~~\n\nMercury.\n\n```\nearth()\n```\n",
        "```\nvenus()\n```\n\nMercury.\n\n```\nearth()\n```\n",
    ),
    (
        "a cut opener, the fences after it left open at the end",
        "``\nvenus()\n```\n\nMercury.\n\n```\nearth()\n```\n",
        "```\nvenus()\n```\n\nMercury.\n\n```\nearth()\n```\n",
    ),
    (
        "a two-item ordered list numbered 1, 3",
        "Steps:\n\n1. Install it.\n3. Run it.\n",
        "Steps:\n\n1. Install it.\n2. Run it.\n",
    ),
]


@pytest.mark.parametrize(("name", "broken", "want"), REPAIRED, ids=[n for n, _, _ in REPAIRED])
def test_the_fix_restores_the_document(name: str, broken: str, want: str) -> None:
    assert find_issues(broken, "markdown"), name
    assert fixed(broken) == want, name


NO_FIX = [
    ("a deleted closer before a sentence in a text fence", "```text\nout put\n\nThe result is shown above.\n"),
    ("a deleted closer in a shell fence before a '#' line", "```sh\nmake\n\n# Build the docs\n\nmake docs\n"),
    ("a deleted closer in a session's output", "```console\n$ run\n\nParse one or more files and print them\n"),
    ("an empty fence left at the end", "Some text.\n\n```\n"),
    ("two pipes deleted from one row", "| a | b | c |\n| - | - | - |\n| x  y  z |\n"),
]


@pytest.mark.parametrize(("name", "text"), NO_FIX, ids=[n for n, _ in NO_FIX])
def test_no_fix_where_the_damage_is_a_guess(name: str, text: str) -> None:
    assert fixed(text) is None, name


@pytest.mark.parametrize(
    "text",
    [
        "````markdown\n```js\nx()\n```\n````\n",  # a nested example, written right
        "| Header |\n| ------ |\n| Cell   |\nThis text is part of the table\n",  # markdownlint MD055 shows this
        "```md\n# Title\n\n- item\n```\n",
        "Text\n\n```\ncode\n```\n\n```\n```\n",  # an empty fence, closed
    ],
)
def test_intact_documents_have_no_problem(text: str) -> None:
    assert [i.code for i in find_issues(text, "markdown") if i.code.startswith("md.")] == []


def test_an_unclosed_fence_of_code_still_closes_at_the_end() -> None:
    assert (
        fixed("# T\n\n```python\ndef f():\n    return 1\n\n\n") == "# T\n\n```python\ndef f():\n    return 1\n```\n\n\n"
    )
