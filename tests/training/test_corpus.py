"""The training corpus: reserved projects never enter it, licences are checked, copies are kept once, the split by
project is frozen, and the trainer's ``load_docs`` hands out TypeScript from a pack."""

from __future__ import annotations

import gzip
import io
import json
import random
import tarfile
from pathlib import Path

import pytest

from training import corpus, tasks
from training.sources import Doc

CODE = (
    '"""Arithmetic helpers."""\n\n\ndef helper(value):\n    total = value * 2\n    return total + 1\n\n\n'
    "RESULT = helper(20)\nNAMES = ['alpha', 'beta', 'gamma']\n"
)


def _dist(site: Path, name: str, version: str, files: dict[str, str], license_meta: str = "License: MIT\n") -> None:
    """A minimal installed distribution: METADATA, RECORD and its files under ``site``."""
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n{license_meta}\n")
    record = [f"{info.name}/METADATA,,", f"{info.name}/RECORD,,"]
    for rel, text in files.items():
        path = site / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        record.append(f"{rel},,")
    (info / "RECORD").write_text("\n".join(record) + "\n")


def _kept(index: dict) -> set[tuple[str, str]]:
    return {(proj, rel) for proj, rel, _ in index["files"]}


def test_reserved_projects_are_excluded_wherever_they_occur(tmp_path: Path) -> None:
    _dist(tmp_path, "requests", "2.32.0", {"requests/api.py": CODE.replace("helper", "get")})
    _dist(tmp_path, "httpx2", "2.0.0", {"httpx2/_client.py": CODE.replace("helper", "send")})
    _dist(tmp_path, "types-requests", "2.0.0", {"requests_stubs/api.py": CODE.replace("helper", "stub")})
    _dist(
        tmp_path,
        "pip",
        "24.0",
        {
            "pip/_vendor/requests/sessions.py": CODE.replace("helper", "session"),
            "pip/_vendor/flask/app.py": CODE.replace("helper", "route"),
            "pip/_internal/main.py": CODE.replace("helper", "main"),
        },
    )
    index = corpus.build_python_index([str(tmp_path)], stdlib=False)
    assert _kept(index) == {("pip", "pip/_internal/main.py")}
    assert "requests" not in index["projects"] and "httpx2" not in index["projects"]
    assert corpus.is_reserved("ky") and corpus.is_reserved("got") and corpus.is_reserved("flask-cors")
    assert not corpus.is_reserved("gotrue") and not corpus.is_reserved(
        "requests-oauthlib-free".replace("requests", "x")
    )


def test_only_permissive_licences_are_used(tmp_path: Path) -> None:
    _dist(tmp_path, "gpl-tool", "1.0", {"gpl_tool/core.py": CODE}, "License: GPL-3.0-or-later\n")
    _dist(
        tmp_path,
        "lgpl-lib",
        "1.0",
        {"lgpl_lib/core.py": CODE.replace("helper", "lg")},
        "Classifier: License :: OSI Approved :: GNU Lesser General Public License v3 (LGPLv3)\n",
    )
    _dist(
        tmp_path, "mpl-lib", "1.0", {"mpl_lib/core.py": CODE.replace("helper", "mp")}, "License-Expression: MPL-2.0\n"
    )
    _dist(tmp_path, "mystery", "1.0", {"mystery/core.py": CODE.replace("helper", "my")}, "")
    _dist(
        tmp_path, "dual", "1.0", {"dual/core.py": CODE.replace("helper", "du")}, "License-Expression: MIT OR GPL-2.0\n"
    )
    _dist(
        tmp_path,
        "bsd-lib",
        "1.0",
        {"bsd_lib/core.py": CODE.replace("helper", "bs")},
        "Classifier: License :: OSI Approved :: BSD License\n",
    )
    index = corpus.build_python_index([str(tmp_path)], stdlib=False)
    assert {p for p, _ in _kept(index)} == {"dual", "bsd-lib"}
    assert index["projects"]["gpl-tool"]["accepted"] is False and index["projects"]["gpl-tool"]["files"] == 0
    assert corpus.license_verdict("Apache-2.0 AND MIT") and corpus.license_verdict("BSD-3-Clause")
    assert corpus.license_verdict("MPL-2.0 AND MIT") is False


def test_a_distribution_without_record_is_read_from_its_top_level_packages(tmp_path: Path) -> None:
    info = tmp_path / "legacy_lib-1.0.egg-info"
    info.mkdir()
    (info / "PKG-INFO").write_text("Metadata-Version: 1.1\nName: legacy-lib\nVersion: 1.0\nLicense: BSD\n")
    (info / "top_level.txt").write_text("legacy_lib\n")
    (tmp_path / "legacy_lib").mkdir()
    (tmp_path / "legacy_lib" / "core.py").write_text(CODE)
    index = corpus.build_python_index([str(tmp_path)], stdlib=False)
    assert _kept(index) == {("legacy-lib", "legacy_lib/core.py")}


def test_copies_are_kept_once_even_when_spaced_differently(tmp_path: Path) -> None:
    _dist(tmp_path, "alpha-lib", "1.0", {"alpha_lib/util.py": CODE})
    _dist(tmp_path, "beta-lib", "1.0", {"beta_lib/_vendor/util.py": CODE.replace("\n", "  \r\n").replace("    ", "\t")})
    index = corpus.build_python_index([str(tmp_path)], stdlib=False)
    assert len(index["files"]) == 1


def test_split_is_by_project_and_frozen() -> None:
    # Frozen values: a change here means the held-out projects changed and the model may have trained on eval data.
    assert corpus.split_of("python-stdlib") == "train"
    assert corpus.split_of("torch") == "train" and corpus.split_of("transformers") == "train"
    assert corpus.split_of("luxon") == "eval" and corpus.split_of("wsproto") == "eval"
    assert corpus.split_of("Prosemirror_Model") == "eval"  # HELD_OUT, whatever the spelling
    assert corpus.split_of("@remix-run/router") == "eval"
    # vendored copies of held-out projects are left out of training too
    assert corpus.is_held_out_path("vendored/marshmallow/fields.py")
    assert not corpus.is_held_out_path("mylib/fields.py")


def _tgz(path: Path, files: dict[str, str]) -> None:
    with tarfile.open(path, "w:gz") as tar:
        for rel, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"package/{rel}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


TS = (
    "export interface Point {\n  x: number;\n  y: number;\n}\n\n"
    "export function add(a: Point, b: Point): Point {\n  return { x: a.x + b.x, y: a.y + b.y };\n}\n"
)


def test_load_docs_gives_typescript_from_a_pack(tmp_path: Path) -> None:
    tarballs = tmp_path / "tgz"
    tarballs.mkdir()
    pkg = {"name": "shape-kit", "version": "1.0.0", "license": "MIT"}
    _tgz(
        tarballs / "shape-kit-1.0.0.tgz",
        {
            "package.json": json.dumps(pkg, indent=2),
            "src/point.ts": TS,
            "dist/point.d.ts": "export interface Point {\n  x: number;\n  y: number;\n}\n" * 3,
            "dist/point.js": TS.replace(": Point", "").replace(": number", "") + "// compiled\n",
            "README.md": "# shape-kit\n\nTiny 2D geometry helpers: points, vectors and their sums for everyone.\n",
        },
    )
    gpl = {"name": "gpl-widgets", "version": "1.0.0", "license": "GPL-3.0"}
    _tgz(tarballs / "gpl-widgets-1.0.0.tgz", {"package.json": json.dumps(gpl), "src/w.ts": TS.replace("add", "sub")})
    _tgz(tarballs / "ky-1.0.0.tgz", {"package.json": json.dumps({"license": "MIT"}), "src/ky.ts": TS})
    pack = tmp_path / "pack.jsonl.gz"
    res = corpus.build_pack(
        pack, (("shape-kit", "1.0.0"), ("gpl-widgets", "1.0.0"), ("ky", "1.0.0")), tarballs=str(tarballs), debian=False
    )
    assert corpus.split_of("shape-kit") == "train"
    docs = corpus.load_docs("train", str(pack), python=False)
    assert [d.relpath for d in docs["typescript"]] == ["shape-kit/src/point.ts"]  # no .d.ts, no GPL, no ky
    assert "javascript" not in docs  # the compiled copy of the TypeScript is not a second source
    assert [d.relpath for d in docs["json"]] == ["shape-kit/package.json"]
    assert {p["name"]: p["accepted"] for p in res["projects"]} == {"shape-kit": True, "gpl-widgets": False}
    # data workers can each hold a disjoint share; together the shares are the whole split
    shards = [corpus.load_docs("train", str(pack), python=False, shard=(i, 3)) for i in range(3)]
    paths = [d.relpath for s in shards for docs_ in s.values() for d in docs_]
    assert sorted(paths) == sorted(d.relpath for docs_ in docs.values() for d in docs_)
    # and the infill task cuts TypeScript examples with the path the prompt shows
    ex = tasks.infill_example(docs["typescript"][0], random.Random(3), lambda s: len(s) // 3)
    assert ex is not None and ex.kind == "infill-typescript" and "Path: src/point.ts" in ex.messages[0].content


def test_the_pack_is_reproducible(tmp_path: Path) -> None:
    tarballs = tmp_path / "tgz"
    tarballs.mkdir()
    _tgz(tarballs / "shape-kit-1.0.0.tgz", {"package.json": json.dumps({"license": "MIT"}), "src/point.ts": TS})
    a, b = tmp_path / "a.jsonl.gz", tmp_path / "b.jsonl.gz"
    for out in (a, b):
        corpus.build_pack(out, (("shape-kit", "1.0.0"),), tarballs=str(tarballs), debian=False)
    assert a.read_bytes() == b.read_bytes()


def test_example_stream_draws_typescript_when_the_documents_have_it() -> None:
    doc = Doc("shape-kit/src/point.ts", "typescript", TS * 3)
    stream = tasks.ExampleStream({"typescript": [doc]}, lambda s: len(s) // 3, seed=1)
    assert stream.one().kind == "infill-typescript"


def _sdist(folder: Path, name: str, version: str, files: dict[str, str]) -> None:
    """An sdist as PyPI serves it (``name-version/...``), cached under the name the fetcher looks for."""
    top = f"{name.replace('-', '_')}-{version}"
    with tarfile.open(folder / f"{corpus.normalize(name)}-{version}.tar.gz", "w:gz") as tar:
        for rel, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{top}/{rel}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def _pkg_info(name: str, licence: str) -> str:
    return f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n{licence}\n"


def test_a_pypi_pack_refuses_copyleft_reserved_and_unknown(tmp_path: Path) -> None:
    sdists = tmp_path / "sdists"
    sdists.mkdir()
    good = {
        "PKG-INFO": _pkg_info("good-lib", "License-Expression: MIT"),
        "src/good_lib/core.py": CODE,
        "src/good_lib/_vendor/requests/api.py": CODE.replace("helper", "get"),  # vendored reserved project
        "src/good_lib/click.py": CODE.replace("helper", "command"),  # a copy of one, as a module
        "src/good_lib/_werkzeug.py": CODE.replace("helper", "parse"),  # ... under a private name
        "src/good_lib/structures.py": "# Copied from the Requests library by its authors\n"
        + CODE.replace("helper", "s"),
        "tests/test_core.py": CODE.replace("helper", "check"),
        "README.md": "# good-lib\n",
    }
    _sdist(sdists, "good-lib", "1.0", good)
    _sdist(sdists, "gpl-lib", "1.0", {"PKG-INFO": _pkg_info("gpl-lib", "License: GPL-3.0"), "gpl_lib/a.py": CODE * 2})
    _sdist(sdists, "no-meta", "1.0", {"no_meta/a.py": CODE * 3})
    listed = (("good-lib", "1.0"), ("gpl-lib", "1.0"), ("no-meta", "1.0"), ("flask-extra", "1.0"), ("six", "1.0"))
    res = corpus.build_pypi_packs(tmp_path / "p.jsonl.gz", listed, sdists=sdists, skip={"six"})
    assert res["parts"] == [str(tmp_path / "p-1.jsonl.gz")]
    assert {e["name"]: e.get("refused") for e in res["projects"]} == {
        "good-lib": None,
        "gpl-lib": "licence",
        "no-meta": "licence",
        "flask-extra": "reserved",  # never fetched
        "six": "in-corpus",
    }
    docs = corpus.load_docs("train", res["parts"], python=False)
    assert sorted(d.relpath for d in docs["python"]) == ["good-lib/src/good_lib/core.py", "good-lib/tests/test_core.py"]
    side = json.loads((tmp_path / "p-1.projects.json").read_text())
    assert {e["name"] for e in side} == {"good-lib", "gpl-lib", "no-meta", "flask-extra", "six"}


def _pack(path: Path, records: list[tuple[str, str, str]]) -> str:
    """A pack file of (project, relpath, text) Python records."""
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        for project, rel, text in records:
            rec = {"project": project, "version": "1", "license": "MIT", "relpath": rel, "language_id": "python"}
            fh.write(json.dumps(rec | {"text": text}) + "\n")
    return str(path)


def test_several_packs_merge_and_keep_copies_once(tmp_path: Path) -> None:
    _dist(tmp_path / "site", "delta-lib", "1.0", {"delta_lib/util.py": CODE})
    index = corpus.build_python_index([str(tmp_path / "site")], stdlib=False)
    other, shared = CODE.replace("helper", "other"), CODE.replace("helper", "shared")
    assert corpus.split_of("wsproto") == "eval" and {corpus.split_of(p) for p in ("beta-lib", "delta-lib")} == {"train"}
    a = _pack(
        tmp_path / "a.jsonl.gz",
        [
            ("beta-lib", "beta_lib/util.py", CODE.replace("\n", "\r\n")),  # a copy of the installed file
            ("beta-lib", "beta_lib/shared.py", shared),  # its eval twin comes in the next pack
            ("beta-lib", "beta_lib/_vendor/werkzeug/http.py", other + "# w\n"),  # reserved, even in a pack
        ],
    )
    b = _pack(
        tmp_path / "b.jsonl.gz",
        [
            ("gamma-lib", "gamma_lib/other.py", other),
            ("gamma-lib", "gamma_lib/dup.py", other),
            ("wsproto", "w.py", shared),
        ],
    )
    train = corpus.load_docs("train", f"{a},{b}", index=index)
    assert sorted(d.relpath for d in train["python"]) == ["delta-lib/delta_lib/util.py", "gamma-lib/gamma_lib/other.py"]
    assert [d.relpath for d in corpus.load_docs("eval", [a, b], index=index)["python"]] == ["wsproto/w.py"]
    shards = [corpus.load_docs("train", [a, b], index=index, shard=(i, 2)) for i in range(2)]
    assert sorted(d.relpath for s in shards for d in s.get("python", [])) == sorted(d.relpath for d in train["python"])
    with pytest.raises(FileNotFoundError, match="pack not found"):
        corpus.load_docs("train", [a, str(tmp_path / "missing.jsonl.gz")], python=False)


def test_pypi_parts_stay_under_the_limit_and_keep_projects_whole(tmp_path: Path) -> None:
    rng = random.Random(0)
    by_project = [
        [
            {"project": f"p{k}", "relpath": f"m{i}.py", "text": "".join(rng.choice("abcdefgh \n") for _ in range(4000))}
            for i in range(60)
        ]
        for k in range(6)
    ]
    parts = corpus._write_parts(tmp_path / "x.jsonl.gz", by_project, 600_000)
    assert len(parts) > 1 and all(p.stat().st_size <= 600_000 for p in parts)
    held = [{r["project"] for r in corpus.iter_pack(p)} for p in parts]
    assert sum(map(len, held)) == 6 and len(set().union(*held)) == 6
