"""The small model's training corpus: licence-checked, deduplicated, split by project, reproducible.

Sources (each document belongs to a *project*, the unit of licence, split and manifest):

* **site-packages**: every distribution the running interpreter can import (``importlib.metadata``), its ``.py``
  files as listed in its RECORD; a distribution is used only when its metadata states a permissive licence
  (:func:`license_verdict`);
* **python-stdlib**: the running interpreter's standard library (PSF-2.0);
* **the pack** (``.train_data/pack-v2.jsonl.gz``, built once on the dev machine by :func:`build_pack`): TypeScript,
  JavaScript, JSON and Markdown from the pinned npm packages of :data:`NPM_PACKAGES` (licence read from each
  tarball's own package.json) and Markdown from Debian documentation whose copyright file states a permissive
  licence for the package as a whole.

Rules, frozen (changing them changes what the model may have seen; bump :data:`CORPUS_VERSION`):

* **Reserved for an outside evaluation** (:data:`RESERVED`): never used, wherever they occur: a distribution or npm
  package of that name, a fork named like it (``httpx2``), a derivative whose dash-separated name contains it
  (``flask-cors``, ``types-requests``), and any file with a path component naming the import package
  (``pip/_vendor/requests/...``).
* **Split by project**: ``eval`` when ``int(sha1(name).hexdigest(), 16) % 20 == 0`` (name normalized by
  :func:`normalize`) or the project is in :data:`HELD_OUT` (the projects of the frozen completion set,
  ``bench/completion_cases.py``, held out even where they happen to be installed, vendored copies included);
  else ``train``. Same answer on every machine.
* **Licences accepted**: MIT, BSD (0/2/3-clause), Apache-2.0, ISC, PSF/Python, Unlicense, Zlib, CC0, HPND, MIT-0,
  BlueOak and public domain. Not: GPL/LGPL/AGPL, MPL/EPL/CDDL (weak copyleft), proprietary, unknown.
* **Files**: utf-8, <= 120 kB, not generated-looking (``sources._read``); exact duplicates (whitespace-normalized
  content hash) kept once across everything, eval projects first so that no eval text is also trained on.

API for the trainer::

    docs = load_docs("train", ".train_data/pack-v2.jsonl.gz")   # {"python": [Doc...], "typescript": [...], ...}
    docs = load_docs("train", pack, shard=(worker, n_workers))  # a data worker's disjoint 1/n share

``load_docs`` builds the Python index once per interpreter (cached under the temp folder; see
:func:`python_index`), so data workers pay only for reading their files. Manifest::

    python -m training.corpus pack --out .train_data/pack-v2.jsonl.gz        # dev machine, needs npm
    python -m training.corpus manifest --pack .train_data/pack-v2.jsonl.gz --out corpus_manifest.json
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import hashlib
import io
import json
import os
import re
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import time
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from email.message import Message
from pathlib import Path
from typing import Any

from .sources import MAX_FILE_BYTES, Doc, _looks_generated, _read

CORPUS_VERSION = 2
EVAL_BUCKETS = 20

# Reserved for an outside evaluation: never in the corpus, in any form (names as import packages / npm names).
RESERVED = frozenset({"click", "flask", "werkzeug", "itsdangerous", "requests", "httpx", "attrs", "attr", "ky", "got"})

# The projects of the frozen completion set (bench/completion_cases.py: test and dev), by normalized project name,
# with the import packages / top-level modules they install (matched as path components, vendored copies too).
HELD_OUT: dict[str, tuple[str, ...]] = {
    # Python, test
    "marshmallow": ("marshmallow",),
    "boltons": ("boltons",),
    "peewee": ("peewee", "playhouse"),
    "sqlparse": ("sqlparse",),
    "voluptuous": ("voluptuous",),
    "transitions": ("transitions",),
    "tinydb": ("tinydb",),
    "pypika": ("pypika",),
    "humanize": ("humanize",),
    "schedule": ("schedule",),
    "cerberus": ("cerberus",),
    # Python, dev
    "bottle": ("bottle",),
    "structlog": ("structlog",),
    "glom": ("glom",),
    # TypeScript, test
    "prosemirror-model": ("prosemirror-model",),
    "prosemirror-transform": ("prosemirror-transform",),
    "prosemirror-commands": ("prosemirror-commands",),
    "prosemirror-markdown": ("prosemirror-markdown",),
    "mobx": ("mobx",),
    "wonka": ("wonka",),
    "remix-run-router": ("@remix-run",),
    "hocuspocus-server": ("@hocuspocus",),
    # TypeScript, dev
    "prosemirror-state": ("prosemirror-state",),
    "prosemirror-view": ("prosemirror-view",),
    "tanstack-virtual-core": ("virtual-core",),
    "reselect": ("reselect",),
}

# The npm part of the pack: (name, version). Chosen for real TypeScript sources (src/*.ts shipped in the tarball) or
# hand-written JavaScript; all MIT / ISC / BSD / Apache-2.0 (checked again from each tarball's package.json).
NPM_PACKAGES: tuple[tuple[str, str], ...] = (
    # TypeScript sources
    ("effect", "4.1.5"),
    ("@effect/platform-node", "4.1.5"),
    ("@effect/vitest", "4.1.5"),
    ("zod", "4.6.7"),
    ("rxjs", "7.8.2"),
    ("@tiptap/core", "3.35.0"),
    ("@tiptap/extension-table", "3.35.0"),
    ("@tiptap/extension-link", "3.35.0"),
    ("@tiptap/extension-mention", "3.35.0"),
    ("@tiptap/suggestion", "3.35.0"),
    ("@tiptap/extension-collaboration", "3.35.0"),
    ("@reduxjs/toolkit", "2.16.0"),
    ("redux", "5.0.1"),
    ("redux-thunk", "3.1.0"),
    ("react-redux", "9.3.1"),
    ("immer", "11.2.14"),
    ("msw", "3.0.5"),
    ("@mswjs/interceptors", "0.45.12"),
    ("ajv", "8.20.0"),
    ("@tanstack/query-core", "5.108.4"),
    ("@tanstack/react-query", "5.108.4"),
    ("@tanstack/router-core", "1.171.39"),
    ("@tanstack/form-core", "1.33.5"),
    ("@tanstack/store", "0.11.3"),
    ("@tanstack/history", "1.162.5"),
    ("@trpc/server", "11.25.2"),
    ("@trpc/client", "11.25.2"),
    ("@trpc/react-query", "11.19.0"),
    ("cheerio", "1.2.0"),
    ("workbox-core", "7.4.1"),
    ("workbox-routing", "7.4.1"),
    ("workbox-strategies", "7.4.1"),
    ("workbox-precaching", "7.4.1"),
    ("workbox-expiration", "7.4.1"),
    ("workbox-window", "7.4.1"),
    ("workbox-background-sync", "7.4.1"),
    ("@preact/signals-core", "1.14.5"),
    ("ts-results-es", "7.1.0"),
    ("devalue", "6.0.3"),
    ("fastify", "5.12.8"),
    ("pino", "10.4.0"),
    # JavaScript (hand-written, or compiled but readable ESM)
    ("express", "5.3.0"),
    ("koa", "3.3.0"),
    ("commander", "15.1.0"),
    ("chalk", "6.0.1"),
    ("debug", "4.4.3"),
    ("semver", "7.8.6"),
    ("ws", "8.23.1"),
    ("axios", "1.21.1"),
    ("lodash", "4.18.1"),
    ("underscore", "1.13.8"),
    ("moment", "2.31.0"),
    ("luxon", "3.7.2"),
    ("postcss", "8.5.34"),
    ("webpack", "5.113.0"),
    ("mocha", "12.0.3"),
    ("sinon", "22.1.0"),
    ("ramda", "0.32.0"),
    ("eslint", "10.16.0"),
    ("svelte", "5.59.1"),
    ("@sveltejs/kit", "3.2.0"),
    ("unified", "11.0.5"),
    ("mdast-util-from-markdown", "2.1.0"),
    ("micromark", "4.0.3"),
    ("handlebars", "4.7.10"),
    ("ejs", "7.0.2"),
    ("undici", "8.14.0"),
    ("node-fetch", "3.3.2"),
    ("preact", "11.2.0"),
    ("nanostores", "1.5.5"),
    ("graphql", "17.1.0"),
    ("hono", "4.13.23"),
    ("date-fns", "4.4.0"),
    ("yjs", "13.6.33"),
    ("lib0", "0.2.120"),
    ("y-protocols", "1.0.7"),
    ("ol", "10.11.0"),
    ("leaflet", "1.9.4"),
    ("three", "0.187.0"),
    ("knex", "3.3.0"),
    ("sequelize", "6.37.8"),
    ("mongoose", "9.13.1"),
    ("jsonwebtoken", "9.0.3"),
    ("ioredis", "6.1.0"),
    ("typeorm", "1.1.3"),
    ("class-validator", "0.15.1"),
    ("lit-html", "3.3.3"),
    ("@lit/reactive-element", "2.1.2"),
    ("vscode-languageserver", "11.0.0"),
    ("vscode-languageserver-protocol", "3.18.5"),
    ("vscode-jsonrpc", "10.0.0"),
    ("graphql-ws", "6.4.2"),
    ("superjson", "2.2.7"),
    ("socket.io", "4.8.4"),
    ("matter-js", "0.20.0"),
    ("io-ts", "2.2.22"),
    ("fp-ts", "2.16.11"),
)

# Debian packages whose /usr/share/doc Markdown is taken (when their copyright file's "Files: *" licence is
# permissive, checked at build time).
DEBIAN_DOC_PACKAGES = ("nodejs", "python3-pip", "zstd", "systemd", "git", "openssl", "python3-yaml", "libxml2")

# A proposed task mixture for a trainer that has TypeScript (tasks.MIXTURE keeps the old one for train.py).
MIXTURE_V2 = {
    "infill-python": 0.45,
    "infill-typescript": 0.15,
    "infill-javascript": 0.10,
    "infill-markdown": 0.04,
    "infill-json": 0.04,
    "json-repair": 0.14,
    "md-table": 0.08,
}

_PERMISSIVE = [
    r"\bmit\b",
    r"\bexpat\b",
    r"\bbsd\b",
    r"\bapache\b",
    r"\bisc\b",
    r"\bpsf\b",
    r"python software foundation",
    r"\bpython-2\.0\b",
    r"\bunlicense\b",
    r"\bzlib\b",
    r"\bcc0\b",
    r"\bhpnd\b",
    r"historical permission notice",
    r"blueoak",
    r"public domain",
    r"\b0bsd\b",
    r"permission is hereby granted, free of charge",
    r"redistribution and use in source and binary forms",
]
_COPYLEFT = [
    r"\bgpl",
    r"\blgpl",
    r"\bagpl",
    r"general public license",
    r"\bmpl\b",
    r"mozilla public",
    r"\bepl\b",
    r"eclipse public",
    r"\bcddl\b",
    r"proprietary",
    r"commercial",
    r"\bsspl\b",
    r"\beupl\b",
    r"creative commons attribution-(noncommercial|sharealike)",
    r"nvidia software license",
]


def normalize(name: str) -> str:
    """A project's key: PEP 503 for Python names, ``@scope/name`` -> ``scope-name`` for npm names."""
    return re.sub(r"[-_.]+", "-", name.lstrip("@").replace("/", "-")).lower()


def split_of(project: str) -> str:
    """'eval' for held-out projects (:data:`HELD_OUT`, or 1 in 20 by hash of the name), else 'train'."""
    key = normalize(project)
    if key in HELD_OUT:
        return "eval"
    return "eval" if int(hashlib.sha1(key.encode("utf-8")).hexdigest(), 16) % EVAL_BUCKETS == 0 else "train"


_HELD_COMPONENTS = frozenset(c for comps in HELD_OUT.values() for c in comps)


def is_reserved(project: str, relpath: str = "") -> bool:
    """True for a reserved project (by name, a fork ``name2``, a ``name-…`` derivative) or a path naming one."""
    key = normalize(project)
    for tok in key.split("-"):
        if re.sub(r"\d+$", "", tok) in RESERVED:
            return True
    return any(_component(c) in RESERVED for c in relpath.split("/"))


def is_held_out_path(relpath: str) -> bool:
    """A path inside a held-out project's package (its own install or a vendored copy)."""
    return any(_component(c) in _HELD_COMPONENTS for c in relpath.split("/")[:-1]) or (
        _component(relpath.split("/")[0]) in _HELD_COMPONENTS
    )


def _component(part: str) -> str:
    return re.sub(r"\.(py|pyi|js|mjs|cjs|ts)$", "", part).lower()


def license_verdict(text: str | None) -> bool | None:
    """True when ``text`` (an SPDX expression, a licence name or a licence's text) names only permissive licences,
    False when it names a copyleft / proprietary one, None when it says nothing we recognise."""
    if not text or not text.strip():
        return None
    t = text.lower()
    if " or " in t and len(t) < 200:  # an SPDX / human choice: permissive when one option is
        opts = [license_verdict(o) for o in re.split(r"\bor\b", t.strip("() "))]
        if any(o is True for o in opts):
            return True
    if any(re.search(p, t) for p in _COPYLEFT):
        # "GNU ... Lesser" text etc.; but the MIT text says nothing of this, so any hit is a refusal
        return False
    if any(re.search(p, t) for p in _PERMISSIVE):
        return True
    return None


def dist_license(meta: Message, license_texts: Iterable[str] = ()) -> tuple[bool, str]:
    """(accepted, label) from a distribution's metadata: License-Expression, then the licence classifiers, then the
    License field, then its licence files' text. Any copyleft statement refuses; no statement refuses."""
    expr = meta.get("License-Expression")
    if expr:
        return bool(license_verdict(expr)), expr.strip()
    classifiers = [c for c in (meta.get_all("Classifier") or []) if c.startswith("License ::")]
    verdicts = [license_verdict(c.split("::")[-1]) for c in classifiers if "OSI Approved" != c.split("::")[-1].strip()]
    verdicts = [v for v in verdicts if v is not None]
    field = (meta.get("License") or "").strip()
    if verdicts:
        fv = license_verdict(field) if field else None
        ok = all(verdicts) and fv is not False
        return ok, classifiers[0].split("::")[-1].strip() if len(classifiers) == 1 else "; ".join(
            c.split("::")[-1].strip() for c in classifiers
        )
    if field and field.upper() != "UNKNOWN":
        v = license_verdict(field)
        if v is not None:
            return v, field.splitlines()[0][:60]
    for text in license_texts:
        v = license_verdict(text[:4000])
        if v is not None:
            return v, f"{_license_kind(text[:4000])} (licence file)"
    return False, "unknown"


def _license_kind(text: str) -> str:
    t = text.lower()
    for mark, kind in (
        ("permission is hereby granted", "MIT"),
        ("redistribution and use", "BSD"),
        ("apache license", "Apache-2.0"),
        ("permission to use, copy, modify", "ISC"),
        ("general public license", "GPL"),
    ):
        if mark in t:
            return kind
    return "other"


# --- Python: the running interpreter -----------------------------------------------------------------------------


@dataclass(slots=True)
class Project:
    name: str
    version: str
    license: str
    source: str  # site-packages / stdlib / npm / debian-doc
    accepted: bool
    split: str


def _stdlib_files() -> Iterator[tuple[str, str]]:
    """(relpath under the stdlib, absolute path) of the interpreter's own .py files."""
    root = os.path.realpath(sysconfig.get_paths()["stdlib"])
    for dp, dn, fn in os.walk(root):
        dn[:] = sorted(d for d in dn if d not in ("site-packages", "dist-packages", "__pycache__"))
        for f in sorted(fn):
            if f.endswith(".py"):
                full = os.path.join(dp, f)
                yield os.path.relpath(full, root), full


def python_projects(
    paths: list[str] | None = None, *, stdlib: bool = True
) -> Iterator[tuple[Project, list[tuple[str, str]]]]:
    """Every project of the running interpreter (or of the site folders ``paths``) with its (relpath, absolute path)
    .py files, unfiltered by licence: the caller reads ``Project.accepted``. Reserved projects are left out."""
    import importlib.metadata as md

    if stdlib:
        v = sys.version_info
        yield (
            Project(
                "python-stdlib", f"{v.major}.{v.minor}.{v.micro}", "PSF-2.0", "stdlib", True, split_of("python-stdlib")
            ),
            list(_stdlib_files()),
        )
    seen: set[str] = set()
    for dist in md.distributions(**({"path": paths} if paths is not None else {})):
        name = dist.metadata.get("Name") or ""
        key = normalize(name)
        if not key or key in seen:
            continue
        seen.add(key)  # the first on sys.path wins, as for imports
        if is_reserved(key):
            continue
        files = []
        lic_texts = []
        for f in dist.files or ():
            p = str(f)
            if p.startswith(".."):
                continue
            base = os.path.basename(p).upper()
            if base.startswith(("LICENSE", "LICENCE", "COPYING")) and ".dist-info" in p:
                with contextlib.suppress(OSError, UnicodeDecodeError):
                    lic_texts.append(Path(dist.locate_file(f)).read_text(encoding="utf-8")[:4000])
            if p.endswith(".py"):
                files.append((p, str(dist.locate_file(f))))
        if dist.files is None:
            files = _top_level_files(dist)
        ok, label = dist_license(dist.metadata, lic_texts)  # type: ignore[arg-type]
        yield Project(key, dist.version, label, "site-packages", ok, split_of(key)), files


def _top_level_files(dist: Any) -> list[tuple[str, str]]:
    """.py files of a distribution installed without a RECORD (an old egg-info, some system packages): its
    top_level.txt packages and modules beside its metadata."""
    out = []
    for name in (dist.read_text("top_level.txt") or "").split():
        root = Path(dist.locate_file(name))
        if root.is_dir():
            for dp, dn, fn in os.walk(root):
                dn[:] = sorted(d for d in dn if d != "__pycache__")
                for f in sorted(fn):
                    if f.endswith(".py"):
                        full = os.path.join(dp, f)
                        out.append((os.path.relpath(full, root.parent), full))
        elif root.with_suffix(".py").is_file():
            out.append((name + ".py", str(root.with_suffix(".py"))))
    return out


def content_key(text: str) -> str:
    """Hash of the text with whitespace runs collapsed: copies differing only in spacing / line ends are one."""
    return hashlib.sha1(re.sub(r"\s+", " ", text).strip().encode("utf-8")).hexdigest()


def _index_path() -> Path:
    import site

    # the interpreter and its site folders (their mtimes change when a package is installed or removed), not sys.path,
    # which differs between `python -m` and `python -c` runs of one interpreter
    sites = [(d, os.stat(d).st_mtime_ns) for d in site.getsitepackages() if os.path.isdir(d)]
    key = hashlib.sha1(f"{sys.prefix}|{sys.version}|{sites}|{CORPUS_VERSION}".encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"dgemma-corpus-index-{key}.json"


def build_python_index(paths: list[str] | None = None, *, stdlib: bool = True) -> dict[str, Any]:
    """Scan the interpreter (or the site folders ``paths``): projects (all, with licence verdicts) and the kept files
    after every rule."""
    projects = list(python_projects(paths, stdlib=stdlib))
    # eval projects first: a file shared by an eval and a train project stays with eval only
    projects.sort(key=lambda pf: (pf[0].split != "eval", pf[0].name))
    seen: set[str] = set()
    files: list[list[str]] = []
    meta: dict[str, dict[str, Any]] = {}
    for proj, paths in projects:
        kept = nbytes = 0
        if proj.accepted:
            for rel, full in sorted(paths):
                if is_reserved(proj.name, rel) or (split_of(proj.name) == "train" and is_held_out_path(rel)):
                    continue
                text = _read(full)
                if text is None:
                    continue
                h = content_key(text)
                if h in seen:
                    continue
                seen.add(h)
                files.append([proj.name, rel, full])
                kept += 1
                nbytes += len(text.encode("utf-8"))
        meta[proj.name] = {
            "name": proj.name,
            "version": proj.version,
            "license": proj.license,
            "accepted": proj.accepted,
            "source": proj.source,
            "split": proj.split,
            "files": kept,
            "bytes": nbytes,
            "languages": {"python": {"files": kept, "bytes": nbytes}} if kept else {},
        }
    return {"version": CORPUS_VERSION, "python": sys.version.split()[0], "projects": meta, "files": files}


def python_index(*, rebuild: bool = False) -> dict[str, Any]:
    """The interpreter's index, built once and cached in the temp folder (a lock keeps concurrent data workers from
    building it 14 times: the first builds, the others wait and read)."""
    path = _index_path()
    if not rebuild and path.exists():
        return json.loads(path.read_text())
    import fcntl

    with open(str(path) + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not rebuild and path.exists():
            return json.loads(path.read_text())
        index = build_python_index()
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(index))
        os.replace(tmp, path)
        return index


def load_docs(
    split: str,
    pack: str | None,
    *,
    python: bool = True,
    index: dict[str, Any] | None = None,
    shard: tuple[int, int] | None = None,
) -> dict[str, list[Doc]]:
    """Documents of ``split`` ("train" / "eval") by language id; relpaths start with the project's name.

    ``index``: a :func:`python_index` built by the caller (e.g. once in the parent of data workers); default: the
    cached one. ``pack``: the JS/TS/JSON/Markdown pack (None: no pack). ``shard=(i, n)``: only the documents whose
    path hashes to ``i`` of ``n`` (data worker ``i`` of ``n`` reads and holds 1/n of the corpus; the n shards are
    disjoint and cover it).
    """

    def mine(relpath: str) -> bool:
        return shard is None or zlib.crc32(relpath.encode("utf-8")) % shard[1] == shard[0]

    docs: dict[str, list[Doc]] = {}
    if python:
        index = index or python_index()
        for proj, rel, full in index["files"]:
            if split_of(proj) != split or not mine(f"{proj}/{rel}"):
                continue
            text = _read(full)
            if text is not None:
                docs.setdefault("python", []).append(Doc(f"{proj}/{rel}", "python", text))
    if pack:
        for rec in iter_pack(pack):
            if not mine(f"{rec['project']}/{rec['relpath']}"):
                continue
            if split_of(rec["project"]) == split and not is_reserved(rec["project"], rec["relpath"]):
                docs.setdefault(rec["language_id"], []).append(
                    Doc(f"{rec['project']}/{rec['relpath']}", rec["language_id"], rec["text"])
                )
    return docs


def iter_pack(pack: str | Path) -> Iterator[dict[str, Any]]:
    with gzip.open(pack, "rt", encoding="utf-8") as fh:
        for line in fh:
            yield json.loads(line)


# --- the pack: npm packages and Debian docs ----------------------------------------------------------------------

_TS = re.compile(r"\.(ts|tsx|mts|cts)$")
_DTS = re.compile(r"\.d\.(ts|mts|cts)$|\.d\.[^/]*\.ts$")
_JS = re.compile(r"\.(js|mjs|cjs)$")
# folders of duplicate / bundled builds (kept only when a package has nothing else)
_BUILD_DIRS = {"umd", "cjs", "commonjs", "esm5", "es5", "amd", "system", "bundles", "min", "browser", "iife"}
_BUNDLE_MARKS = (
    "__webpack_require__",
    "/******/",
    "(function (global, factory)",
    "(function(global,factory)",
    "!function(",
    "System.register(",
)
MAX_JSON_BYTES = 6000
MAX_JSON_PER_PACKAGE = 30


def language_of(relpath: str) -> str | None:
    """The pack's language id for a file in an npm tarball (None: not taken)."""
    name = relpath.rsplit("/", 1)[-1]
    if _DTS.search(name):
        return None
    if _TS.search(name):
        return "typescript"
    if _JS.search(name):
        return None if re.search(r"[.-]min\.|\.bundle\.|\.umd\.|\.production\.", name) else "javascript"
    if name.endswith(".md"):
        return "markdown"
    if name == "package.json" or (name.startswith("tsconfig") and name.endswith(".json")) or name.endswith(".json"):
        return "json"
    return None


def _read_text(data: bytes, lang: str) -> str | None:
    if len(data) > (MAX_JSON_BYTES if lang == "json" else MAX_FILE_BYTES):
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if lang == "json":
        try:
            json.loads(text)
        except ValueError:
            return None
        return text if len(text) >= 20 else None
    if "\x00" in text or len(text) < 80 or _looks_generated(text):
        return None
    if lang == "javascript" and any(m in text[:2000] for m in _BUNDLE_MARKS):
        return None
    return text


def npm_records(tgz: Path, name: str, version: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(project entry, pack records) for one npm tarball, every rule applied but cross-package dedup."""
    with tarfile.open(tgz) as tar:
        members = {m.name.split("/", 1)[1]: m for m in tar.getmembers() if m.isfile() and "/" in m.name}
        pkg = json.loads(tar.extractfile(members["package.json"]).read())  # type: ignore[union-attr]
        lic = pkg.get("license")
        lic = lic.get("type") if isinstance(lic, dict) else lic
        project = normalize(name)
        entry = {
            "name": project,
            "npm": name,
            "version": version,
            "license": lic or "unknown",
            "source": "npm",
            "accepted": bool(license_verdict(lic or "")),
            "split": split_of(project),
        }
        if not entry["accepted"]:
            return entry, []
        paths = sorted(p for p in members if "node_modules/" not in p)
        langs = {p: language_of(p) for p in paths}
        has_ts = any(lang == "typescript" for lang in langs.values())
        js = {p for p, lang in langs.items() if lang == "javascript"}
        unbuilt = {p for p in js if not (set(p.split("/")[:-1]) & _BUILD_DIRS)}
        records = []
        njson = 0
        for p in paths:
            lang = langs[p]
            if lang is None or is_reserved(project, p):
                continue
            if entry["split"] == "train" and is_held_out_path(p):
                continue  # a copy of a held-out project inside another package
            if lang == "javascript":
                if has_ts:  # the TypeScript is the source; its compiled JavaScript is not
                    continue
                if unbuilt and p not in unbuilt:
                    continue
                stem, ext = os.path.splitext(p)
                if ext in (".cjs", ".mjs") and stem + ".js" in js:
                    continue
            if lang == "json":
                if njson >= MAX_JSON_PER_PACKAGE and p != "package.json":
                    continue
            text = _read_text(tar.extractfile(members[p]).read(), lang)  # type: ignore[union-attr]
            if text is None:
                continue
            njson += lang == "json"
            records.append(
                {
                    "project": project,
                    "version": version,
                    "license": entry["license"],
                    "relpath": p,
                    "language_id": lang,
                    "text": text,
                }
            )
    return entry, records


def npm_fetch(packages: Iterable[tuple[str, str]], dest: Path, jobs: int = 6) -> dict[str, Path]:
    """``npm pack NAME@VERSION`` for each package into ``dest``; returns name -> tarball."""
    specs = [f"{n}@{v}" for n, v in packages]
    for i in range(0, len(specs), jobs):
        subprocess.run(
            ["npm", "pack", "--silent", *specs[i : i + jobs]], cwd=dest, check=True, stdout=subprocess.DEVNULL
        )
    out = {}
    for n, v in packages:
        out[n] = dest / f"{n.lstrip('@').replace('/', '-')}-{v}.tgz"
    return out


def _debian_license(pkg: str) -> str | None:
    """The licence of a Debian package's ``Files: *`` stanza (machine-readable copyright), else None."""
    path = Path("/usr/share/doc") / pkg / "copyright"
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    m = re.search(r"^Files:[ \t]*\*[ \t]*\n(?:[ \t].*\n|(?!License:)\S.*\n)*?License:[ \t]*([^\n]+)", text, re.M)
    if m:
        return m.group(1).strip()
    # not machine-readable: the licence text the file opens with (Node.js: the MIT text)
    head = text[:1500]
    if license_verdict(head):
        return "MIT" if "permission is hereby granted" in head.lower() else "permissive (copyright file)"
    return None


def debian_records() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    entries, records = [], []
    for pkg in DEBIAN_DOC_PACKAGES:
        lic = _debian_license(pkg)
        root = Path("/usr/share/doc") / pkg
        if lic is None or not root.is_dir():
            continue
        project = normalize(f"debian-{pkg}")
        entry = {
            "name": project,
            "version": "",
            "license": lic,
            "source": "debian-doc",
            "accepted": bool(license_verdict(lic)),
            "split": split_of(project),
        }
        entries.append(entry)
        if not entry["accepted"]:
            continue
        for f in sorted(root.rglob("*")):
            if not f.is_file() or not (f.name.endswith(".md") or f.name.endswith(".md.gz")):
                continue
            data = gzip.decompress(f.read_bytes()) if f.name.endswith(".gz") else f.read_bytes()
            text = _read_text(data, "markdown")
            if text is not None:
                records.append(
                    {
                        "project": project,
                        "version": "",
                        "license": lic,
                        "relpath": str(f.relative_to(root)).removesuffix(".gz"),
                        "language_id": "markdown",
                        "text": text,
                    }
                )
    return entries, records


def build_pack(
    out: str | Path,
    packages: tuple[tuple[str, str], ...] = NPM_PACKAGES,
    *,
    tarballs: str | None = None,
    debian: bool = True,
) -> dict[str, Any]:
    """Write the pack (gzip'd JSON lines, deduplicated) and return its project entries and counts."""
    packages = tuple((n, v) for n, v in packages if not is_reserved(normalize(n)))
    with tempfile.TemporaryDirectory() as tmp:
        dest = Path(tarballs or tmp)
        dest.mkdir(parents=True, exist_ok=True)
        have = {n: dest / f"{n.lstrip('@').replace('/', '-')}-{v}.tgz" for n, v in packages}
        missing = [(n, v) for n, v in packages if not have[n].exists()]
        if missing:
            npm_fetch(missing, dest)
        entries: list[dict[str, Any]] = []
        recs: list[dict[str, Any]] = []
        for n, v in packages:
            e, r = npm_records(have[n], n, v)
            entries.append(e)
            recs += r
    if debian:
        e2, r2 = debian_records()
        entries += e2
        recs += r2
    recs.sort(key=lambda r: (split_of(r["project"]) != "eval", r["project"], r["relpath"]))
    seen: set[str] = set()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    counts: dict[str, int] = {}
    # mtime 0 and a fixed file name in the gzip header: the same packages give the same bytes
    with open(out, "wb") as raw, gzip.GzipFile("pack.jsonl", "wb", 9, raw, mtime=0) as gz:
        fh = io.TextIOWrapper(gz, encoding="utf-8")
        for r in recs:
            h = content_key(r["text"])
            if h in seen:
                continue
            seen.add(h)
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
            counts[r["language_id"]] = counts.get(r["language_id"], 0) + 1
        fh.flush()
        fh.detach()
    return {"projects": entries, "counts": counts}


# --- manifest ------------------------------------------------------------------------------------------------------


def bytes_per_token(sample: list[str], tokenizer: str = "backend/models/small/tokenizer.json") -> float:
    """Measured bytes per token of the shipped small model's tokenizer on ``sample``."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(tokenizer)
    nb = sum(len(t.encode("utf-8")) for t in sample)
    nt = sum(len(e.ids) for e in tok.encode_batch(sample))
    return nb / max(nt, 1)


def manifest(pack: str | None, *, python: bool = True, sample_per_lang: int = 200) -> dict[str, Any]:
    """Per project: name, version, licence, source, files, bytes, split; totals per language and split with an
    estimated token count (bytes / the measured bytes per token of that language)."""
    projects: dict[str, dict[str, Any]] = {}
    samples: dict[str, list[str]] = {}
    if python:
        index = python_index()
        projects.update(index["projects"])
        for _, _, full in index["files"][:: max(1, len(index["files"]) // sample_per_lang)][:sample_per_lang]:
            if (t := _read(full)) is not None:
                samples.setdefault("python", []).append(t)
    if pack:
        for e in json.loads(_pack_projects_json(pack)):
            projects[e["name"]] = {**e, "files": 0, "bytes": 0, "languages": {}}
        for r in iter_pack(pack):
            p = projects[r["project"]]
            n = len(r["text"].encode("utf-8"))
            p["files"] += 1
            p["bytes"] += n
            lang = p["languages"].setdefault(r["language_id"], {"files": 0, "bytes": 0})
            lang["files"] += 1
            lang["bytes"] += n
            s = samples.setdefault(r["language_id"], [])
            if len(s) < sample_per_lang and zlib.crc32(r["relpath"].encode()) % 7 == 0:  # stable across runs
                s.append(r["text"])
    bpt = {lang: round(bytes_per_token(s), 3) for lang, s in samples.items() if s}
    totals: dict[str, dict[str, dict[str, int]]] = {}
    for p in projects.values():
        for lang, c in p.get("languages", {}).items():
            t = totals.setdefault(lang, {}).setdefault(p["split"], {"files": 0, "bytes": 0, "tokens": 0})
            t["files"] += c["files"]
            t["bytes"] += c["bytes"]
            t["tokens"] += int(c["bytes"] / bpt.get(lang, 3.0))
    return {
        "corpus_version": CORPUS_VERSION,
        "python": sys.version.split()[0] if python else None,
        "pack": os.path.basename(pack) if pack else None,
        "pack_sha256": hashlib.sha256(Path(pack).read_bytes()).hexdigest() if pack else None,
        "bytes_per_token": bpt,
        "totals": totals,
        "excluded": sorted(k for k, p in projects.items() if not p.get("accepted", True)),
        "projects": sorted(projects.values(), key=lambda p: p["name"]),
    }


def _pack_projects_json(pack: str) -> str:
    """The pack's project list (licences of every package, kept or refused) saved beside it by ``pack``."""
    side = Path(pack).with_name(Path(pack).name.replace(".jsonl.gz", ".projects.json"))
    if side.exists():
        return side.read_text()
    seen: dict[str, dict[str, Any]] = {}
    for r in iter_pack(pack):
        seen.setdefault(
            r["project"],
            {
                "name": r["project"],
                "version": r["version"],
                "license": r["license"],
                "source": "debian-doc" if r["project"].startswith("debian-") else "npm",
                "accepted": True,
                "split": split_of(r["project"]),
            },
        )
    return json.dumps(list(seen.values()))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pack", help="download the pinned npm packages and write the pack")
    p.add_argument("--out", default=".train_data/pack-v2.jsonl.gz")
    p.add_argument("--tarballs", help="keep the npm tarballs in this folder (reused when present)")
    m = sub.add_parser("manifest", help="write the corpus manifest")
    m.add_argument("--pack")
    m.add_argument("--out", required=True)
    m.add_argument("--no-python", action="store_true", help="the pack only")
    i = sub.add_parser("index", help="build (or rebuild) the cached Python index and print its size")
    i.add_argument("--rebuild", action="store_true")
    a = ap.parse_args(argv)
    t0 = time.time()
    if a.cmd == "pack":
        res = build_pack(a.out, tarballs=a.tarballs)
        side = Path(a.out).with_name(Path(a.out).name.replace(".jsonl.gz", ".projects.json"))
        side.write_text(json.dumps(res["projects"], indent=1))
        print(json.dumps(res["counts"]), f"{os.path.getsize(a.out) / 1e6:.1f} MB", f"{time.time() - t0:.0f}s")
    elif a.cmd == "manifest":
        out = manifest(a.pack, python=not a.no_python)
        Path(a.out).write_text(json.dumps(out, indent=1) + "\n")
        print(json.dumps(out["totals"]), f"{time.time() - t0:.0f}s")
    else:
        idx = python_index(rebuild=a.rebuild)
        print(len(idx["files"]), "files", len(idx["projects"]), "projects", f"{time.time() - t0:.0f}s")


if __name__ == "__main__":
    main()
