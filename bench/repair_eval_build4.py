"""Build the fourth frozen JSON repair set (issue 47): ``fixtures/repair_eval4/cases.jsonl.gz`` and its ``MANIFEST.md``.

Built, and its first score recorded, before any rule was tuned against it; read by
``python bench/repair_independent.py --cases fixtures/repair_eval4/cases.jsonl.gz``. Same case format and scoring as
sets 1 and 3 (see ``bench/repair_eval_build.py``).

It targets the six families that set 1's held-out split still misses, each made the way a person or a chat model
makes it, in REAL JSON files (package.json, tsconfig / jsconfig, .eslintrc.json, composer.json / bower.json, a JSON
schema, editor settings, data files) of npm packages that sets 1-3 do not use, pinned below, license read from each
package.json (MIT / BSD / ISC / Apache only). Each file is damaged in its own pretty-printed form or minified:

* ``inner-quote``: a string value that quotes a word without escaping it (``"say "hi" to"``, a quote at the
  string's start or end);
* ``wrapper``: the JSON inside JavaScript or a label (``const config = {...};``, ``export default``,
  ``module.exports =``, ``var data =``, ``window.X = ...`` in a script tag, ``JSON.parse('...')``, the ``)]}'``
  XSSI prefix, a ``json`` label line, a trailing ``;``);
* ``missing-quote``: one quote missing at a key's or a value's start or end;
* ``brackets``: a closing bracket missing, doubled, or of the wrong kind (``]`` for ``}``);
* ``escape``: a Windows path with single backslashes, ``\\'`` for an apostrophe, a lone ``\\`` at a string's end;
* ``doubled-quote``: a quote typed twice (``""key"``, ``"key"":``, ``""value"``, ``"value""``).

Expectation: the original document (with the quoted word, path or apostrophe as the writer meant it). "No fix" is
accepted as well (``expect.nofix``) where the damage is genuinely ambiguous: a closing bracket missing inside a
minified document (where the members after it belong is a guess), a missing quote next to text that holds a
``,`` ``:`` or bracket (where the string ends is a guess), a path whose backslashes partly form valid escapes
(``\\n``, ``\\t``: the input may mean them), a lone backslash at a string's end (it may be a stray key).

Split: a third of the packages are held out by a hash of the package name. Seeded, at most two cases per family and
package.

Usage: ``python bench/repair_eval_build4.py`` (downloads the pinned packages into ``.cache/repair_sources4`` once).
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import tarfile
from pathlib import Path
from typing import Any

from repair_sets import npm_tgz, strict_loads, write_cases

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "fixtures" / "repair_eval4"
CACHE = ROOT / ".cache" / "repair_sources4"
SEED = 4747474
OK_LICENSES = ("MIT", "BSD", "ISC", "Apache")
PER_FAMILY = 2  # cases per family and package

# package@version -> the JSON files taken from it (package/ prefix left off)
NPM = {
    "ajv-draft-04@1.0.0": ["package.json", "dist/refs/json-schema-draft-04.json"],
    "autoprefixer@10.4.20": ["package.json"],
    "binary-extensions@2.3.0": ["package.json", "binary-extensions.json"],
    "builtin-modules@3.3.0": ["package.json", "builtin-modules.json"],
    "cli-boxes@3.0.0": ["package.json", "boxes.json"],
    "concurrently@9.1.0": ["package.json"],
    "eslint-config-standard@17.1.0": ["package.json", ".eslintrc.json"],
    "fastify@5.1.0": ["package.json", ".vscode/settings.json", "types/tsconfig.eslint.json"],
    "html-tags@3.3.1": ["package.json", "html-tags.json"],
    "i18n-iso-countries@7.13.0": ["package.json", "langs/en.json"],
    "koa@2.15.3": ["package.json"],
    "lint-staged@15.2.10": ["package.json"],
    "nodemon@3.1.7": ["package.json", "jsconfig.json"],
    "postcss@8.4.49": ["package.json"],
    "statuses@2.0.1": ["package.json", "codes.json"],
    "timezones.json@1.7.1": ["package.json", "timezones.json"],
    "tinymce@6.8.5": ["package.json", "composer.json", "bower.json"],
    "@tsconfig/node22@22.0.2": ["package.json", "tsconfig.json"],
    "@vue/tsconfig@0.7.0": ["package.json", "tsconfig.json", "tsconfig.dom.json"],
}
FAMILIES = ["inner-quote", "wrapper", "missing-quote", "brackets", "escape", "doubled-quote"]
TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]:,]|[^\s{}\[\]:,"]+|\s+')
VALID_ESCAPE = re.compile(r'\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})')


def fetch() -> list[tuple[str, str, str, str]]:
    """(package spec, license, file path, text) of every pinned file."""
    out = []
    for spec, paths in NPM.items():
        with tarfile.open(npm_tgz(spec, CACHE)) as tar:
            texts = {p: tar.extractfile(f"package/{p}").read().decode("utf-8") for p in paths}  # type: ignore[union-attr]
        lic = str(json.loads(texts["package.json"]).get("license", "?"))
        if not lic.startswith(OK_LICENSES):
            print(f"skip {spec}: license {lic}")
            continue
        for p, t in texts.items():
            t = t.lstrip("\ufeff").rstrip() + "\n"
            if not _parses(t):
                print(f"skip {spec} {p}: not strict JSON (comments)")
                continue
            out.append((spec, lic, p, t))
    return out


def split_of(key: str) -> str:
    return "holdout" if int(hashlib.sha1(key.encode()).hexdigest(), 16) % 3 == 0 else "tune"


def _parses(text: str) -> bool:
    try:
        strict_loads(text)
    except (ValueError, RecursionError):
        return False
    return True


def tokens(text: str) -> list[tuple[int, int, str, bool]]:
    """(start, end, token, is a key) of every non-space token of strict JSON ``text``."""
    toks = [(m.start(), m.end(), m.group(0)) for m in TOKEN.finditer(text) if not m.group(0).isspace()]
    out = []
    for i, (a, b, t) in enumerate(toks):
        key = t.startswith('"') and i + 1 < len(toks) and toks[i + 1][2] == ":"
        out.append((a, b, t, key))
    return out


def minified(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _value_of(text: str, a: int, b: int, new_content: str) -> Any:
    """The parsed value of ``text`` with the string token text[a:b] replaced by one holding ``new_content``."""
    return strict_loads(text[:a] + json.dumps(new_content, ensure_ascii=False) + text[b:])


# --- the six families --------------------------------------------------------------------------------------------


def inner_quote(text: str, rng: random.Random) -> tuple[str, Any, bool] | None:
    """A string value quoting one of its words with bare ``"``: in the middle, at the start or at the end."""
    cands = []
    for a, b, t, key in tokens(text):
        if key or not t.startswith('"') or "\\" in t:
            continue
        words = list(re.finditer(r"[A-Za-z][A-Za-z0-9'-]*[A-Za-z0-9]", t[1:-1]))
        if len(t[1:-1].split()) >= 2 and words:
            cands.append((a, b, t, words))
    if not cands:
        return None
    a, b, t, words = rng.choice(cands)
    where = rng.choice(["middle", "start", "end"])
    w = words[0] if where == "start" else words[-1] if where == "end" else rng.choice(words)
    body = t[1:-1]
    new = body[: w.start()] + '"' + w.group(0) + '"' + body[w.end() :]
    return text[:a] + '"' + new + '"' + text[b:], _value_of(text, a, b, new), False


WRAPPERS = [
    ("const", lambda j, _p: f"const config = {j};\n"),
    ("export-default", lambda j, _p: f"export default {j}\n"),
    ("module-exports", lambda j, _p: f"module.exports = {j};\n"),
    ("var", lambda j, _p: f"var data = {j};\n"),
    ("xssi", lambda j, _p: f")]}}'\n{j}"),
    ("script-tag", lambda j, _p: f"<script>\n  window.__INITIAL_STATE__ = {j};\n</script>\n"),
    ("json-label", lambda j, _p: f"json\n{j}"),
    ("trailing-semicolon", lambda j, _p: f"{j.rstrip()};\n"),
]


def wrapper(text: str, rng: random.Random) -> tuple[str, Any, bool] | None:
    value = strict_loads(text)
    kinds = [*WRAPPERS]
    mini = minified(value)
    if "'" not in mini and "\\" not in mini:
        kinds.append(("json-parse", None))  # type: ignore[arg-type]
    name, fn = rng.choice(kinds)
    body = text.rstrip() if rng.random() < 0.6 else mini
    if fn is None:
        return f"const config = JSON.parse('{mini}');\n", value, False
    return fn(body, name), value, False


def missing_quote(text: str, rng: random.Random) -> tuple[str, Any, bool] | None:
    """One quote of a key or of a string value deleted, at its start or its end."""
    cands = [(a, b, t, key) for a, b, t, key in tokens(text) if t.startswith('"') and len(t) > 2]
    if not cands:
        return None
    a, b, t, key = rng.choice(cands)
    if rng.random() < 0.5:
        out = text[:a] + text[a + 1 :]
    else:
        out = text[: b - 1] + text[b:]
    # where the string ends is a guess when its text holds a separator or a bracket
    ambiguous = bool(re.search(r"[,:\[\]{}]", t[1:-1]))
    return out, strict_loads(text), ambiguous


def brackets(text: str, rng: random.Random) -> tuple[str, Any, bool] | None:
    toks = [(a, t) for a, _b, t, _k in tokens(text) if t in "]}"]
    if not toks:
        return None
    i = rng.randrange(len(toks))
    a, t = toks[i]
    last = i == len(toks) - 1
    kind = rng.choice(["missing", "extra", "wrong"])
    mini = "\n" not in text.strip()
    if kind == "missing":
        out = text[:a] + text[a + 1 :]
        # inside a minified document the members after the cut could belong to either level
        return out, strict_loads(text), mini and not last
    if kind == "extra":
        return text[:a] + t + text[a:], strict_loads(text), False
    return text[:a] + ("}" if t == "]" else "]") + text[a + 1 :], strict_loads(text), False


def escape(text: str, rng: random.Random) -> tuple[str, Any, bool] | None:
    """A Windows path with single backslashes, ``\\'`` for an apostrophe, or a lone backslash at a string's end."""
    toks = [(a, b, t) for a, b, t, key in tokens(text) if not key and t.startswith('"') and "\\" not in t]
    paths = [x for x in toks if re.fullmatch(r'"\.{0,2}/?[\w.@*-]+(/[\w.@*-]+)+/?"', x[2])]
    prose = [x for x in toks if len(x[2][1:-1].split()) >= 2 and re.search(r"[A-Za-z]{3}", x[2])]
    kinds = []
    if paths:
        kinds += ["path", "trailing"]
    if prose:
        kinds.append("apostrophe")
    if not kinds:
        return None
    kind = rng.choice(kinds)
    if kind == "apostrophe":
        a, b, t = rng.choice(prose)
        body = t[1:-1]
        if "'" in body:
            new, raw = body, body.replace("'", "\\'")
        else:
            words = list(re.finditer(r"[A-Za-z][A-Za-z0-9-]*[A-Za-z0-9]", body))
            w = rng.choice(words)
            new = body[: w.start()] + "'" + w.group(0) + "'" + body[w.end() :]
            raw = body[: w.start()] + "\\'" + w.group(0) + "\\'" + body[w.end() :]
        return text[:a] + '"' + raw + '"' + text[b:], _value_of(text, a, b, new), False
    a, b, t = rng.choice(paths)
    body = t[1:-1]
    if kind == "trailing":
        new = body.rstrip("/").replace("/", "\\") + "\\"
        return text[:a] + '"' + new + '"' + text[b:], _value_of(text, a, b, new), True
    new = body.replace("/", "\\")
    if rng.random() < 0.4 and not new.startswith("."):
        new = "C:\\" + new
    raw = '"' + new + '"'
    out = text[:a] + raw + text[b:]
    # a path whose backslashes partly make valid escapes (\n, \t, \b ...) may mean them: no fix is right too
    return out, _value_of(text, a, b, new), bool(VALID_ESCAPE.search(raw))


def doubled_quote(text: str, rng: random.Random) -> tuple[str, Any, bool] | None:
    cands = [(a, b, t, key) for a, b, t, key in tokens(text) if t.startswith('"') and len(t) > 2]
    if not cands:
        return None
    a, b, t, key = rng.choice(cands)
    if rng.random() < 0.5:
        out = text[:a] + '"' + text[a:]
    else:
        out = text[:b] + '"' + text[b:]
    return out, strict_loads(text), False


MAKERS = {
    "inner-quote": inner_quote,
    "wrapper": wrapper,
    "missing-quote": missing_quote,
    "brackets": brackets,
    "escape": escape,
    "doubled-quote": doubled_quote,
}


def cases(rng: random.Random) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    files = fetch()
    by_pkg: dict[str, list[tuple[str, str, str]]] = {}
    for spec, lic, path, text in files:
        by_pkg.setdefault(spec, []).append((lic, path, text))
    seen: set[str] = set()
    for spec, docs in by_pkg.items():
        for fam in FAMILIES:
            made = 0
            for n in range(12):  # tries
                if made >= PER_FAMILY:
                    break
                lic, path, text = rng.choice(docs)
                form = "pretty" if rng.random() < 0.6 else "minified"
                base = text if form == "pretty" else minified(strict_loads(text)) + "\n"
                got = MAKERS[fam](base, rng)
                if got is None:
                    continue
                broken, want, nofix = got
                if broken in seen or _parses(broken):
                    continue
                seen.add(broken)
                expect: dict[str, Any] = {"values": [want]}
                if nofix:
                    expect["nofix"] = True
                made += 1
                out.append(
                    {
                        "id": f"{spec}:{path}#{fam}#{n}",
                        "source": f"{spec} ({lic}) {path}",
                        "category": form,
                        "family": fam,
                        "language": "json",
                        "split": split_of(spec),
                        "text": broken,
                        "expect": expect,
                    }
                )
    return out


def main() -> None:
    CACHE.mkdir(parents=True, exist_ok=True)
    rng = random.Random(SEED)
    got = cases(rng)
    write_cases(OUT, got)
    write_manifest(got)
    print(f"{len(got)} cases -> {OUT}")


def write_manifest(got: list[dict[str, Any]]) -> None:
    fams: dict[tuple[str, str], list[int]] = {}
    srcs: dict[tuple[str, str], list[int]] = {}
    for c in got:
        for table, key in ((fams, (c["family"], c["split"])), (srcs, (c["source"], c["split"]))):
            row = table.setdefault(key, [0, 0])
            row[0] += 1
            row[1] += bool(c["expect"].get("nofix"))
    doc = (__doc__ or "").split("\n\nUsage:")[0]
    lines = [
        "# Fourth independent JSON repair set (frozen 2026-12-06)",
        "",
        f"Built by `python bench/repair_eval_build4.py` (seed {SEED}); read by",
        "`python bench/repair_independent.py --cases fixtures/repair_eval4/cases.jsonl.gz`. Frozen, and its first",
        "score recorded (bench/RESULTS.md), before any rule was tuned against it.",
        "",
        f"{len(got)} cases, all JSON; holdout {sum(c['split'] == 'holdout' for c in got)} (a third of the packages by "
        f'a hash of the package name); {sum(bool(c["expect"].get("nofix")) for c in got)} accept "no fix" beside '
        "the expected value. Category: `pretty` (the file as shipped) or `minified`.",
        "",
        "## How it is made (the builder's docstring)",
        "",
        doc,
        "",
        "| family | split | cases | of them accept no fix |",
        "|---|---|---|---|",
    ]
    lines += [f"| {f} | {sp} | {n} | {k} |" for (f, sp), (n, k) in sorted(fams.items())]
    lines += ["", "| source (license) file | split | cases | of them accept no fix |", "|---|---|---|---|"]
    lines += [f"| {s} | {sp} | {n} | {k} |" for (s, sp), (n, k) in sorted(srcs.items())]
    (OUT / "MANIFEST.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
