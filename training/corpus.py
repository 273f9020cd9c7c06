"""The small model's training corpus: licence-checked, deduplicated, split by project, reproducible.

Sources (each document belongs to a *project*, the unit of licence, split and manifest):

* **site-packages**: every distribution the running interpreter can import (``importlib.metadata``), its ``.py``
  files as listed in its RECORD; a distribution is used only when its metadata states a permissive licence
  (:func:`license_verdict`);
* **python-stdlib**: the running interpreter's standard library (PSF-2.0);
* **the pack** (``.train_data/pack-v2.jsonl.gz``, built once on the dev machine by :func:`build_pack`): TypeScript,
  JavaScript, JSON and Markdown from the pinned npm packages of :data:`NPM_PACKAGES` (licence read from each
  tarball's own package.json) and Markdown from Debian documentation whose copyright file states a permissive
  licence for the package as a whole;
* **the PyPI packs** (``.train_data/pack-pypi-1.jsonl.gz``, ``-2``, ..., at most 25 MB gzip each, by
  :func:`build_pypi_packs`): the Python files of the pinned sdists of :data:`PYPI_PACKAGES` (licence read from each
  sdist's own PKG-INFO, then its licence files), same record format; packages already in site-packages here or on the
  GPU image (``--skip-from`` its manifest) are skipped, as they are in the corpus already.

Rules, frozen (changing them changes what the model may have seen; bump :data:`CORPUS_VERSION`):

* **Reserved for an outside evaluation** (:data:`RESERVED`): never used, wherever they occur: a distribution or npm
  package of that name, a fork named like it (``httpx2``), a derivative whose dash-separated name contains it
  (``flask-cors``, ``types-requests``), and any file with a path component naming the import package
  (``pip/_vendor/requests/...``), in site-packages and in packs alike.
* **Split by project**: ``eval`` when ``int(sha1(name).hexdigest(), 16) % 20 == 0`` (name normalized by
  :func:`normalize`) or the project is in :data:`HELD_OUT` (the projects of the frozen completion set,
  ``bench/completion_cases.py``, held out even where they happen to be installed, vendored copies included);
  else ``train``. Same answer on every machine.
* **Licences accepted**: MIT, BSD (0/2/3-clause), Apache-2.0, ISC, PSF/Python, Unlicense, Zlib, CC0, HPND, MIT-0,
  BlueOak and public domain. Not: GPL/LGPL/AGPL, MPL/EPL/CDDL (weak copyleft), proprietary, unknown.
* **Files**: utf-8, <= 120 kB, not generated-looking (``sources._read``); exact duplicates (whitespace-normalized
  content hash) kept once across everything (the index and every pack, at load time too), eval first so that no
  eval text is also trained on.

API for the trainer::

    docs = load_docs("train", ".train_data/pack-v2.jsonl.gz")   # {"python": [Doc...], "typescript": [...], ...}
    docs = load_docs("train", pack, shard=(worker, n_workers))  # a data worker's disjoint 1/n share
    docs = load_docs("train", "a.jsonl.gz,b.jsonl.gz")            # several packs (or a list); a missing one raises

``load_docs`` builds the Python index once per interpreter (cached under the temp folder; see
:func:`python_index`), so data workers pay only for reading their files. Manifest::

    python -m training.corpus pack --out .train_data/pack-v2.jsonl.gz        # dev machine, needs npm
    python -m training.corpus pypi --out .train_data/pack-pypi.jsonl.gz --skip-from corpus-h100.json  # -1, -2, ...
    python -m training.corpus manifest --pack .train_data/pack-v2.jsonl.gz --pack ... --out corpus_manifest.json
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

# The PyPI packs: sdists of popular pure-Python packages, pinned. None is on the GPU image or in this machine's
# site-packages (those are in the corpus already), reserved, held out, or a fork / extension of a reserved project
# (quart, cattrs, asyncclick, niquests, respx ... are left off on purpose); the licence is checked again from each
# sdist's own PKG-INFO.
PYPI_PACKAGES: tuple[tuple[str, str], ...] = (
    ("aiosqlite", "0.22.1"),
    ("alabaster", "1.0.0"),
    ("alembic", "1.20.1"),
    ("altair", "6.3.0"),
    ("amqp", "5.4.2"),
    ("apispec", "6.10.1"),
    ("apscheduler", "3.11.3"),
    ("argcomplete", "3.7.2"),
    ("ariadne", "1.1.1"),
    ("arrow", "1.4.0"),
    ("asciimatics", "1.15.0"),
    ("asgiref", "3.13.0"),
    ("asn1crypto", "1.5.1"),
    ("astor", "0.8.1"),
    ("async-timeout", "5.0.1"),
    ("authlib", "1.9.10"),
    ("autopep8", "2.3.2"),
    ("avro", "1.12.2"),
    ("babel", "2.19.0"),
    ("backoff", "2.2.1"),
    ("bandit", "1.9.4"),
    ("beautifulsoup4", "4.15.0"),
    ("beniget", "0.5.0"),
    ("billiard", "4.3.2"),
    ("binaryornot", "0.6.0"),
    ("black", "26.10.1"),
    ("bleach", "6.4.0"),
    ("blessed", "1.53.0"),
    ("bokeh", "3.10.2"),
    ("bracex", "3.2.4"),
    ("cachetools", "8.0.2"),
    ("cbor2", "6.3.0"),
    ("celery", "5.7.0"),
    ("cfgv", "3.5.0"),
    ("chameleon", "4.6.0"),
    ("channels", "4.3.2"),
    ("cleo", "2.1.0"),
    ("coloredlogs", "15.0.1"),
    ("colorlog", "6.12.0"),
    ("comm", "0.2.3"),
    ("commonmark", "0.9.2"),
    ("configargparse", "1.9.0"),
    ("configobj", "5.0.9"),
    ("connexion", "3.3.0"),
    ("cookiecutter", "2.7.1"),
    ("copier", "9.19.1"),
    ("courlan", "1.4.0"),
    ("croniter", "7.0.0"),
    ("cssselect", "1.6.0"),
    ("daphne", "4.2.3"),
    ("dask", "2026.8.0"),
    ("dataclasses-json", "0.6.7"),
    ("datasets", "5.2.0"),
    ("dateparser", "1.5.0"),
    ("defusedxml", "0.7.1"),
    ("deprecated", "3.0.1"),
    ("diskcache", "5.6.3"),
    ("distlib", "0.4.4"),
    ("distributed", "2026.8.0"),
    ("distro", "1.9.0"),
    ("django", "6.1.3"),
    ("django-cors-headers", "4.9.0"),
    ("django-debug-toolbar", "8.0.0"),
    ("django-extensions", "4.1"),
    ("django-filter", "26.2"),
    ("djangorestframework", "3.18.3"),
    ("dnspython", "2.9.2"),
    ("docopt", "0.6.2"),
    ("docstring-parser", "0.18.0"),
    ("dynaconf", "3.3.5"),
    ("ecdsa", "0.19.2"),
    ("elasticsearch", "9.5.1"),
    ("emoji", "2.16.0"),
    ("environs", "15.2.0"),
    ("evaluate", "0.4.6"),
    ("eventlet", "0.41.3"),
    ("fabric", "3.2.3"),
    ("factory-boy", "3.3.3"),
    ("falcon", "4.4.0"),
    ("fastjsonschema", "2.22.3"),
    ("feedparser", "6.0.14"),
    ("fire", "0.7.1"),
    ("flake8", "7.5.0"),
    ("flit-core", "4.2.0"),
    ("flynt", "1.0.6"),
    ("folium", "0.20.0"),
    ("freezegun", "1.5.5"),
    ("ftfy", "6.3.1"),
    ("funcy", "2.1"),
    ("gast", "0.7.0"),
    ("genshi", "0.7.12"),
    ("geojson", "3.3.0"),
    ("geopy", "2.5.0"),
    ("graphene", "3.4.3"),
    ("graphviz", "0.21"),
    ("griffe", "2.4.1"),
    ("gunicorn", "27.0.1"),
    ("hatchling", "1.33.0"),
    ("holoviews", "1.23.2"),
    ("html2text", "2025.4.15"),
    ("html5lib", "1.1"),
    ("htmldate", "1.11.0"),
    ("httplib2", "0.32.1"),
    ("humanfriendly", "10.0"),
    ("hyperopt", "0.3.0"),
    ("identify", "2.6.20"),
    ("inflect", "7.6.0"),
    ("inflection", "0.5.1"),
    ("intervaltree", "3.2.1"),
    ("invoke", "3.0.3"),
    ("ipykernel", "7.4.0"),
    ("ipywidgets", "8.1.9"),
    ("isodate", "0.7.2"),
    ("isort", "9.0.2"),
    ("jeepney", "0.9.0"),
    ("jsonpath-rw", "1.4.0"),
    ("jsonpickle", "4.1.4"),
    ("jupyter-client", "8.10.0"),
    ("jupyter-core", "5.9.1"),
    ("justext", "3.0.2"),
    ("kafka-python", "3.0.12"),
    ("kazoo", "2.11.0"),
    ("keras", "3.15.1"),
    ("keyring", "25.7.0"),
    ("kombu", "5.7.0"),
    ("langdetect", "1.0.9"),
    ("lark", "1.3.1"),
    ("locket", "1.0.0"),
    ("loguru", "0.7.3"),
    ("mako", "1.4.3"),
    ("markdownify", "1.2.3"),
    ("mccabe", "0.7.0"),
    ("mdit-py-plugins", "0.7.0"),
    ("mistune", "3.4.0"),
    ("mkdocs", "1.6.1"),
    ("mock", "5.2.0"),
    ("more-itertools", "11.2.1"),
    ("nats-py", "2.16.0"),
    ("natsort", "8.4.0"),
    ("nbclient", "0.11.0"),
    ("nbconvert", "7.17.2"),
    ("nbformat", "5.11.1"),
    ("netaddr", "1.3.0"),
    ("nltk", "3.10.4"),
    ("nodeenv", "1.12.0"),
    ("nox", "2026.10.20"),
    ("numpydoc", "1.11.0"),
    ("oauthlib", "4.0.1"),
    ("openpyxl", "3.1.5"),
    ("opentelemetry-sdk", "1.45.2"),
    ("optuna", "5.1.0"),
    ("overrides", "7.7.0"),
    ("paho-mqtt", "2.2.0"),
    ("param", "2.4.2"),
    ("parsel", "1.12.1"),
    ("parsimonious", "0.11.0"),
    ("partd", "1.4.2"),
    ("passlib", "1.7.4"),
    ("pathlib2", "2.3.7.post1"),
    ("pbr", "7.1.3"),
    ("pdfminer.six", "20260107"),
    ("pdm-backend", "2.5.0"),
    ("pendulum", "3.3.0"),
    ("pika", "1.4.4"),
    ("pint", "0.26.2"),
    ("pip-tools", "7.7.0"),
    ("pipdeptree", "4.2.16"),
    ("pipx", "1.18.4"),
    ("pkginfo", "2.0"),
    ("platformdirs", "4.14.9"),
    ("plumbum", "2.0.2"),
    ("ply", "3.11"),
    ("poetry-core", "2.5.0"),
    ("pony", "0.7.20"),
    ("pre-commit", "4.7.0"),
    ("prettytable", "3.19.0"),
    ("pulp", "4.2.0"),
    ("pycodestyle", "2.15.0"),
    ("pydocstyle", "6.3.0"),
    ("pydot", "4.0.1"),
    ("pyee", "16.1.0"),
    ("pyfiglet", "1.0.4"),
    ("pyflakes", "4.1.0"),
    ("pyjwt", "2.15.1"),
    ("pymdown-extensions", "13.1.2"),
    ("pymongo", "4.20.1"),
    ("pymysql", "1.2.4"),
    ("pyopenssl", "26.4.0"),
    ("pypdf", "7.1.1"),
    ("pyperclip", "1.11.0"),
    ("pyramid", "2.1"),
    ("pyrsistent", "0.20.0"),
    ("pyserial", "3.5"),
    ("python-docx", "1.2.0"),
    ("python-engineio", "4.15.1"),
    ("python-json-logger", "4.2.0"),
    ("python-lsp-server", "1.15.0"),
    ("python-pptx", "1.0.2"),
    ("python-slugify", "9.2.0"),
    ("python-socketio", "5.18.1"),
    ("pytz", "2026.6"),
    ("pyupgrade", "3.22.0"),
    ("qrcode", "8.2"),
    ("questionary", "2.1.1"),
    ("radon", "6.0.1"),
    ("rdflib", "7.6.0"),
    ("readability-lxml", "0.9"),
    ("readme-renderer", "46.0"),
    ("redis", "8.2.0"),
    ("returns", "0.30.0"),
    ("rfc3986", "2.0.0"),
    ("ruamel.yaml", "0.19.1"),
    ("sanic", "25.12.1"),
    ("schema", "0.7.8"),
    ("scrapy", "2.19.0"),
    ("secretstorage", "3.5.0"),
    ("send2trash", "2.2.0"),
    ("sentry-sdk", "2.76.0"),
    ("setuptools-scm", "10.3.4"),
    ("sh", "2.4.0"),
    ("simpy", "4.1.2"),
    ("soupsieve", "4.1.4"),
    ("sphinx", "9.2.0"),
    ("sqlalchemy", "2.1.9"),
    ("sqlalchemy-utils", "0.43.0"),
    ("sqlglot", "30.31.0"),
    ("sqlmodel", "0.0.50"),
    ("strawberry-graphql", "0.341.2"),
    ("tablib", "3.10.0"),
    ("tabview", "1.5.0"),
    ("tenacity", "9.2.1"),
    ("tensorboardx", "2.6.5"),
    ("termcolor", "3.3.0"),
    ("terminado", "0.18.1"),
    ("textblob", "0.20.1"),
    ("texttable", "1.7.2"),
    ("textual", "8.2.8"),
    ("thefuzz", "0.22.1"),
    ("thrift", "0.25.0"),
    ("tinycss2", "1.5.1"),
    ("toml", "0.10.2"),
    ("tomli", "2.5.0"),
    ("tornado", "6.6.1"),
    ("tortoise-orm", "1.1.9"),
    ("tox", "4.67.17"),
    ("trafilatura", "2.3.1"),
    ("trl", "1.16.0"),
    ("twine", "7.0.0"),
    ("twisted", "26.10.0"),
    ("typeguard", "4.6.1"),
    ("tzlocal", "5.4.5"),
    ("uncertainties", "3.2.3"),
    ("untangle", "1.3.0"),
    ("vine", "5.1.0"),
    ("virtualenv", "21.15.14"),
    ("vulture", "2.16"),
    ("w3lib", "2.5.0"),
    ("watchdog", "7.1.1"),
    ("wcmatch", "12.0.4"),
    ("webencodings", "0.6.1"),
    ("webob", "1.8.11"),
    ("websocket-client", "1.9.2"),
    ("websockets", "17.4"),
    ("whitenoise", "6.12.0"),
    ("xlrd", "2.0.2"),
    ("xlsxwriter", "3.3.1"),
    ("yamllint", "1.38.0"),
    ("yapf", "0.43.0"),
    ("zarr", "3.4.2"),
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


_INDEX_FORMAT = 2  # 2: the index keeps its files' content keys (for dedup against the packs)


def _index_path() -> Path:
    import site

    # the interpreter and its site folders (their mtimes change when a package is installed or removed), not sys.path,
    # which differs between `python -m` and `python -c` runs of one interpreter
    sites = [(d, os.stat(d).st_mtime_ns) for d in site.getsitepackages() if os.path.isdir(d)]
    key = f"{sys.prefix}|{sys.version}|{sites}|{CORPUS_VERSION}|{_INDEX_FORMAT}"
    key = hashlib.sha1(key.encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"dgemma-corpus-index-{key}.json"


def build_python_index(paths: list[str] | None = None, *, stdlib: bool = True) -> dict[str, Any]:
    """Scan the interpreter (or the site folders ``paths``): projects (all, with licence verdicts) and the kept files
    after every rule."""
    projects = list(python_projects(paths, stdlib=stdlib))
    # eval projects first: a file shared by an eval and a train project stays with eval only
    projects.sort(key=lambda pf: (pf[0].split != "eval", pf[0].name))
    seen: set[str] = set()
    files: list[list[str]] = []
    keys: list[str] = []
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
                keys.append(h)
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
    return {"version": CORPUS_VERSION, "python": sys.version.split()[0], "projects": meta, "files": files} | {
        "keys": keys
    }


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


def pack_paths(pack: str | Iterable[str] | None) -> list[str]:
    """Pack paths from ``a.jsonl.gz,b.jsonl.gz`` or a list; a missing pack is an error, never an empty corpus."""
    if not pack:
        return []
    items = pack.split(",") if isinstance(pack, str) else [q for p in pack for q in str(p).split(",")]
    paths = [p.strip() for p in items if p.strip()]
    missing = [p for p in paths if not os.path.isfile(p)]
    if missing:
        raise FileNotFoundError(f"pack not found: {', '.join(missing)} (build it: python -m training.corpus --help)")
    return paths


def load_docs(
    split: str,
    pack: str | Iterable[str] | None,
    *,
    python: bool = True,
    index: dict[str, Any] | None = None,
    shard: tuple[int, int] | None = None,
) -> dict[str, list[Doc]]:
    """Documents of ``split`` ("train" / "eval") by language id; relpaths start with the project's name.

    ``index``: a :func:`python_index` built by the caller (e.g. once in the parent of data workers); default: the
    cached one. ``pack``: one pack or several (a list or comma-separated; None: no pack). Copies are kept once across
    the index and every pack, and a train document that is also an eval document anywhere is dropped. ``shard=(i,
    n)``: only the documents whose path hashes to ``i`` of ``n`` (data worker ``i`` of ``n`` holds 1/n of the corpus;
    the n shards are disjoint and cover it; dedup sees every document, so shards agree).
    """

    def mine(relpath: str) -> bool:
        return shard is None or zlib.crc32(relpath.encode("utf-8")) % shard[1] == shard[0]

    packs = pack_paths(pack)  # a missing pack fails here, before the long read
    seen: dict[str, set[str]] = {"train": set(), "eval": set()}
    kept: list[tuple[str | None, Doc]] = []  # (content key, document) of this split and shard

    def first(key: str | None, of: str) -> bool:  # the first copy within its split (None: no key, kept)
        if key is None:
            return True
        new = key not in seen[of]
        seen[of].add(key)
        return new

    if python:
        index = index or python_index()
        keys = index.get("keys") or [None] * len(index["files"])  # an older cached index: no dedup against packs
        for (proj, rel, full), key in zip(index["files"], keys, strict=True):
            if first(key, split_of(proj)) and split_of(proj) == split and mine(f"{proj}/{rel}"):
                if (text := _read(full)) is not None:
                    kept.append((key, Doc(f"{proj}/{rel}", "python", text)))
    for rec in (r for p in packs for r in iter_pack(p)):
        of = split_of(rec["project"])
        if is_reserved(rec["project"], rec["relpath"]) or (of == "train" and is_held_out_path(rec["relpath"])):
            continue
        path, key = f"{rec['project']}/{rec['relpath']}", content_key(rec["text"])
        if first(key, of) and of == split and mine(path):
            kept.append((key, Doc(path, rec["language_id"], rec["text"])))
    docs: dict[str, list[Doc]] = {}
    for key, doc in kept:
        if split == "eval" or key not in seen["eval"]:  # eval text is never also trained on
            docs.setdefault(doc.language_id, []).append(doc)
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


# --- the PyPI packs: Python from pinned sdists ---------------------------------------------------------------------

PYPI_JSON = "https://pypi.org/pypi/{name}/{version}/json"
_LICENSE_FILE = re.compile(r"^(licen[cs]e|copying)", re.I)
# A copy of a reserved project under another name (``sentry_sdk/_werkzeug.py``, "# Copied from the Requests
# library"): what the path rule misses. Stricter than the corpus rules, for the PyPI packs only (their own code may
# say so in a header; a false hit costs one file).
_PY_RESERVED = "click|flask|werkzeug|itsdangerous|requests|httpx|attrs?"
_DERIVED = re.compile(
    rf"\b(?:copied|adapted|taken|derived|vendored|borrowed|ported|forked|lifted|based)\b[^\n]{{0,60}}?\b(?:{_PY_RESERVED})\b"
    r"|\bpallets\b|kenneth reitz",
    re.I,
)


def derived_from_reserved(relpath: str, text: str) -> bool:
    """A file that says it is (or is named as) a copy of a reserved project: ``_werkzeug.py``, a Pallets or Kenneth
    Reitz copyright, "adapted from requests"."""
    if any(_component(c).lstrip("_") in RESERVED for c in relpath.split("/")):
        return True
    return _DERIVED.search(text) is not None


def sdist_path(dest: Path, name: str, version: str) -> Path | None:
    """The cached sdist of ``name`` ``version`` in ``dest`` (any archive suffix), None when not fetched yet."""
    stem = f"{normalize(name)}-{version}"
    hits = sorted(p for p in dest.glob(f"{stem}.*") if p.suffix in (".gz", ".zip", ".bz2", ".tgz"))
    return hits[0] if hits else None


def pypi_fetch(name: str, version: str, dest: Path) -> Path:
    """Download the sdist of ``name`` ``version`` into ``dest`` (PyPI's JSON API; cached: a rerun reads the file)."""
    import urllib.parse
    import urllib.request

    if (have := sdist_path(dest, name, version)) is not None:
        return have
    api = PYPI_JSON.format(name=name, version=version)
    with urllib.request.urlopen(api, timeout=60) as r:
        info = json.load(r)
    urls = [u for u in info["urls"] if u["packagetype"] == "sdist"]
    if not urls:
        raise FileNotFoundError(f"{name} {version}: no sdist on PyPI")
    url = urllib.parse.urljoin(api, urls[0]["url"])  # a mirror may answer with relative links
    suffix = ".zip" if url.endswith(".zip") else ".tar.gz"
    out = dest / f"{normalize(name)}-{version}{suffix}"
    tmp = out.with_name(out.name + ".part")
    with urllib.request.urlopen(url, timeout=300) as r:
        tmp.write_bytes(r.read())
    os.replace(tmp, out)
    return out


def _sdist_members(path: Path) -> dict[str, bytes]:
    """Regular files of an sdist (tar or zip) by path below its top folder."""
    import zipfile

    out: dict[str, bytes] = {}
    if path.suffix == ".zip":
        with zipfile.ZipFile(path) as zf:
            for info in zf.infolist():
                if not info.is_dir() and "/" in info.filename:
                    out[info.filename.split("/", 1)[1]] = zf.read(info)
        return out
    with tarfile.open(path) as tar:
        for m in tar.getmembers():
            if m.isfile() and "/" in m.name and (fh := tar.extractfile(m)) is not None:
                out[m.name.split("/", 1)[1]] = fh.read()
    return out


def sdist_records(path: Path, name: str, version: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(project entry, pack records) for one sdist, every rule applied but cross-package dedup. The licence is the
    sdist's own PKG-INFO (then its top-level licence files); an sdist without PKG-INFO is refused."""
    from email.parser import Parser

    files = _sdist_members(path)
    project = normalize(name)
    info = files.get("PKG-INFO")
    meta = Parser().parsestr(info.decode("utf-8", "replace")) if info else Message()
    texts = [b.decode("utf-8", "replace")[:4000] for p, b in sorted(files.items()) if _LICENSE_FILE.match(p)]
    ok, label = dist_license(meta, texts) if info else (False, "no PKG-INFO")
    entry = {
        "name": project,
        "pypi": name,
        "version": version,
        "license": label,
        "source": "pypi",
        "accepted": ok,
        "split": split_of(project),
    }
    if not ok:
        return entry, []
    records = []
    for rel in sorted(files):
        if not rel.endswith(".py") or is_reserved(project, rel):
            continue
        if entry["split"] == "train" and is_held_out_path(rel):
            continue  # a copy of a held-out project inside another package
        text = _read_text(files[rel], "python")
        if text is not None and not derived_from_reserved(rel, text):
            records.append(
                {
                    "project": project,
                    "version": version,
                    "license": label,
                    "relpath": rel,
                    "language_id": "python",
                    "text": text,
                }
            )
    return entry, records


def _refusal(name: str, skip: set[str]) -> str | None:
    """Why a listed package is not read at all: reserved, held out for evaluation, or already in the corpus."""
    key = normalize(name)
    if is_reserved(key):
        return "reserved"
    if key in HELD_OUT:
        return "held-out"
    return "in-corpus" if key in skip else None


def installed_projects(manifests: Iterable[str] = ()) -> set[str]:
    """Projects already in the corpus: this interpreter's distributions and those listed by corpus manifests (the GPU
    image's, e.g. ``/work/ckpt/corpus-h100.json``)."""
    import importlib.metadata as md

    out = {normalize(d.metadata["Name"] or "") for d in md.distributions()}
    for m in manifests:
        out |= {normalize(p["name"]) for p in json.loads(Path(m).read_text())["projects"]}
    return out - {""}


def part_path(out: str | Path, k: int) -> Path:
    """``pack-pypi.jsonl.gz`` -> ``pack-pypi-<k>.jsonl.gz``."""
    out = Path(out)
    return out.with_name(out.name.replace(".jsonl.gz", f"-{k}.jsonl.gz"))


def _write_parts(out: str | Path, by_project: list[list[dict[str, Any]]], max_bytes: int) -> list[Path]:
    """Write the records in parts of at most ``max_bytes`` (gzip), a project never split across two parts (so each
    part's project list is whole). Same records, same bytes (gzip mtime 0)."""
    paths: list[Path] = []
    raw: Any = None
    gz: Any = None
    written = 0
    try:
        for recs in by_project:
            lines = [(json.dumps(r, ensure_ascii=False) + "\n").encode("utf-8") for r in recs]
            ratio = raw.tell() / written if raw is not None and written > 1_000_000 else 0.25
            est = int(sum(map(len, lines)) * ratio * 1.15) + 512_000  # the compressor holds some back
            if raw is None or raw.tell() + est > max_bytes:
                if gz is not None:
                    gz.close()
                    raw.close()
                paths.append(part_path(out, len(paths) + 1))
                raw = open(paths[-1], "wb")  # noqa: SIM115 - closed by the next part or the finally
                gz = gzip.GzipFile("pack.jsonl", "wb", 9, raw, mtime=0)
                written = 0
            for line in lines:
                gz.write(line)
                written += len(line)
    finally:
        if gz is not None:
            gz.close()
            raw.close()
    too_big = [p for p in paths if p.stat().st_size > max_bytes]
    if too_big:
        raise RuntimeError(f"parts over {max_bytes} bytes: {too_big} (one project too big for a part?)")
    return paths


def build_pypi_packs(
    out: str | Path,
    packages: tuple[tuple[str, str], ...] = PYPI_PACKAGES,
    *,
    sdists: str | Path,
    skip: Iterable[str] = (),
    max_mb: float = 25.0,
) -> dict[str, Any]:
    """Fetch (or reuse) the sdists, apply every rule, dedup (eval first) and write ``out``'s parts (``-1``, ``-2``,
    ...; each a pack in the pack-v2 record format with a ``.projects.json`` beside it). Returns entries and counts."""
    dest, skip = Path(sdists), set(skip)
    dest.mkdir(parents=True, exist_ok=True)
    entries: list[dict[str, Any]] = []
    recs: list[dict[str, Any]] = []
    for name, version in packages:
        why = _refusal(name, skip)
        if why is None:
            entry, got = sdist_records(pypi_fetch(name, version, dest), name, version)
            why = None if entry["accepted"] else "licence"
            recs += got
        else:
            entry = {"name": normalize(name), "pypi": name, "version": version, "source": "pypi", "accepted": False}
            entry |= {"license": "", "split": split_of(name)}
        entries.append(entry | ({"refused": why} if why else {}))
    recs.sort(key=lambda r: (split_of(r["project"]) != "eval", r["project"], r["relpath"]))
    seen: set[str] = set()
    by_project: dict[str, list[dict[str, Any]]] = {}
    for r in recs:
        if (h := content_key(r["text"])) not in seen:
            seen.add(h)
            by_project.setdefault(r["project"], []).append(r)
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    parts = _write_parts(out, list(by_project.values()), int(max_mb * 1e6))
    _write_sidecars(parts, entries)
    kept = [r for rs in by_project.values() for r in rs]
    return {"projects": entries, "parts": [str(p) for p in parts], "files": len(kept)} | {
        "bytes": sum(len(r["text"].encode("utf-8")) for r in kept)
    }


def _write_sidecars(parts: list[Path], entries: list[dict[str, Any]]) -> None:
    """Each part's ``.projects.json``: the projects it holds; the first part also lists every refused package."""
    holds = [{r["project"] for r in iter_pack(p)} for p in parts]
    for k, (part, names) in enumerate(zip(parts, holds, strict=True)):
        mine = [e for e in entries if e["name"] in names or (k == 0 and e["name"] not in set().union(*holds))]
        part.with_name(part.name.replace(".jsonl.gz", ".projects.json")).write_text(json.dumps(mine, indent=1))


def pypi_summary(res: dict[str, Any]) -> dict[str, Any]:
    """Packages used / refused (by reason), files, bytes, estimated tokens (3.13 bytes a token of Python) and parts."""
    refused: dict[str, int] = {}
    for e in res["projects"]:
        if "refused" in e:
            refused[e["refused"]] = refused.get(e["refused"], 0) + 1
    used = sum(1 for e in res["projects"] if e["accepted"])
    parts = {os.path.basename(p): round(os.path.getsize(p) / 1e6, 2) for p in res["parts"]}
    return {"used": used, "refused": refused, "files": res["files"], "bytes": res["bytes"]} | {
        "tokens_est": int(res["bytes"] / 3.13),
        "parts_mb": parts,
    }


# --- manifest ------------------------------------------------------------------------------------------------------


def bytes_per_token(sample: list[str], tokenizer: str = "backend/models/small/tokenizer.json") -> float:
    """Measured bytes per token of the shipped small model's tokenizer on ``sample``."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(tokenizer)
    nb = sum(len(t.encode("utf-8")) for t in sample)
    nt = sum(len(e.ids) for e in tok.encode_batch(sample))
    return nb / max(nt, 1)


def manifest(pack: str | Iterable[str] | None, *, python: bool = True, sample_per_lang: int = 200) -> dict[str, Any]:
    """Per project: name, version, licence, source, files, bytes, split; totals per language and split with an
    estimated token count (bytes / the measured bytes per token of that language). ``pack``: one or several packs
    (what they hold, each already deduplicated when built)."""
    packs = pack_paths(pack)
    projects: dict[str, dict[str, Any]] = {}
    samples: dict[str, list[str]] = {}
    if python:
        index = python_index()
        projects.update(index["projects"])
        for _, _, full in index["files"][:: max(1, len(index["files"]) // sample_per_lang)][:sample_per_lang]:
            if (t := _read(full)) is not None:
                samples.setdefault("python", []).append(t)
    for pk in packs:
        for e in json.loads(_pack_projects_json(pk)):
            projects.setdefault(e["name"], {**e, "files": 0, "bytes": 0, "languages": {}})
    for pk in packs:
        for r in iter_pack(pk):
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
        "pack": ",".join(os.path.basename(pk) for pk in packs) or None,
        "pack_sha256": {os.path.basename(pk): hashlib.sha256(Path(pk).read_bytes()).hexdigest() for pk in packs},
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
                "source": "debian-doc" if r["project"].startswith("debian-") else _source_of(r["language_id"]),
                "accepted": True,
                "split": split_of(r["project"]),
            },
        )
    return json.dumps(list(seen.values()))


def _source_of(language_id: str) -> str:
    return "pypi" if language_id == "python" else "npm"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pack", help="download the pinned npm packages and write the pack")
    p.add_argument("--out", default=".train_data/pack-v2.jsonl.gz")
    p.add_argument("--tarballs", help="keep the npm tarballs in this folder (reused when present)")
    y = sub.add_parser("pypi", help="download the pinned PyPI sdists and write the Python packs (-1, -2, ...)")
    y.add_argument("--out", default=".train_data/pack-pypi.jsonl.gz", help="parts are named <out>-1, <out>-2, ...")
    y.add_argument("--max-mb", type=float, default=25.0, help="the most one part may weigh (gzip, MB)")
    y.add_argument("--sdists", default=os.path.join(tempfile.gettempdir(), "pypi-sdists"), help="download cache")
    y.add_argument("--skip-from", action="append", default=[], help="a corpus manifest whose projects are skipped")
    m = sub.add_parser("manifest", help="write the corpus manifest")
    m.add_argument("--pack", action="append", help="a pack (repeat, or comma-separated, for several)")
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
    elif a.cmd == "pypi":
        res = build_pypi_packs(a.out, sdists=a.sdists, skip=installed_projects(a.skip_from), max_mb=a.max_mb)
        print(json.dumps(pypi_summary(res)), f"{time.time() - t0:.0f}s")
    elif a.cmd == "manifest":
        out = manifest(a.pack, python=not a.no_python)
        Path(a.out).write_text(json.dumps(out, indent=1) + "\n")
        print(json.dumps(out["totals"]), f"{time.time() - t0:.0f}s")
    else:
        idx = python_index(rebuild=a.rebuild)
        print(len(idx["files"]), "files", len(idx["projects"]), "projects", f"{time.time() - t0:.0f}s")


if __name__ == "__main__":
    main()
