"""Which documents never reach a model: secret files, matched on the document's path (never its language id:
editors give ``.env`` the id ``sh``, ``dotenv`` or ``plaintext``).

Three sources, each only ever adding files (nothing here can un-exclude a file):

* :data:`BUILT_IN` — key material and credential files (``.env``, ``*.pem``, SSH keys, ``.netrc``, cloud and kube
  credentials, password databases); always in force;
* the ``exclude_files`` setting — the user's own globs;
* ``.dgemmaignore`` at the root of each workspace folder — gitignore-style globs relative to that folder, so a
  repository can name its own secret files (``config/master.key``, ``deploy/*.tfvars``) for everyone who clones it.
  It may only add: a ``!`` line is refused, since re-including is exactly what a hostile file would do.

Globs: ``*`` and ``?`` stay inside one path segment, ``**`` spans segments, ``[abc]`` / ``[!abc]`` are character
classes, ``\\`` escapes. A glob without ``/`` matches a file or folder name at any depth; a settings glob with ``/``
matches the end of the path (``.aws/credentials``); in ``.dgemmaignore`` a glob with a leading or inner ``/`` is
anchored at the file's folder, as in ``.gitignore``. A match on a folder covers everything under it. Matching
ignores case (a case-insensitive file system opens ``.ENV`` as ``.env``). A bad glob is reported once and skipped;
every other glob, the built-in list included, stays in force.
"""

from __future__ import annotations

import os
import posixpath
import re
from dataclasses import dataclass, field
from pathlib import Path

from .documents import file_path

__all__ = ["BUILT_IN", "IGNORE_FILE", "GlobError", "SecretFiles", "compile_glob"]

IGNORE_FILE = ".dgemmaignore"
MAX_IGNORE_BYTES = 256_000

BUILT_IN = (
    # environment files
    ".env",
    ".env.*",
    "*.env",
    ".envrc",
    # keys, certificates with keys, keystores
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "*.p8",
    "*.jks",
    "*.keystore",
    "*.ppk",
    # SSH
    "id_rsa*",
    "id_dsa*",
    "id_ecdsa*",
    "id_ed25519*",
    "id_xmss*",
    ".ssh/",
    # credential files of tools
    ".netrc",
    "_netrc",
    ".npmrc",
    ".yarnrc.yml",
    ".pypirc",
    ".git-credentials",
    ".pgpass",
    ".htpasswd",
    ".vault-token",
    ".docker/config.json",
    ".dockercfg",
    # clouds and clusters
    ".aws/credentials",
    ".aws/config",
    ".config/gcloud/",
    ".azure/",
    ".kube/",
    "kubeconfig",
    "*.kubeconfig",
    "*.tfstate",
    "*.tfstate.backup",
    # password databases
    "*.kdbx",
    "*.keychain",
    "*.keychain-db",
)


class GlobError(ValueError):
    pass


def _segment_regex(glob: str) -> str:
    """The regex of a glob (``/`` separators, no anchors)."""
    out: list[str] = []
    i, n = 0, len(glob)
    while i < n:
        c = glob[i]
        if c == "*":
            if glob.startswith("**", i):
                at_start = i == 0 or glob[i - 1] == "/"
                after = glob[i + 2 : i + 3]
                if at_start and after == "/":
                    out.append("(?:.*/)?")  # "**/": any folders, none included
                    i += 3
                    continue
                out.append(".*")
                i += 2
                continue
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            j = i + 1
            if j < n and glob[j] in "!^":
                j += 1
            if j < n and glob[j] == "]":
                j += 1
            while j < n and glob[j] != "]":
                j += 1
            if j >= n:
                raise GlobError(f"unclosed '[' in {glob!r}")
            body = glob[i + 1 : j]
            neg = body[:1] in ("!", "^")
            body = body[1:] if neg else body
            if not body:
                raise GlobError(f"empty character class in {glob!r}")
            escaped = body.replace("\\", "\\\\").replace("[", "\\[")
            out.append(f"[^/{escaped}]" if neg else f"[{escaped}]")
            i = j
        elif c == "\\":
            if i + 1 >= n:
                raise GlobError(f"{glob!r} ends with a lone backslash")
            out.append(re.escape(glob[i + 1]))
            i += 1
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def compile_glob(glob: str, *, anchored_at: str | None = None) -> re.Pattern[str]:
    """The regex matching the paths ``glob`` covers (see the module docstring); :class:`GlobError` when malformed.

    ``anchored_at`` (a folder path) gives ``.dgemmaignore`` semantics: a glob with a leading or inner ``/`` is
    relative to that folder; otherwise a glob with ``/`` matches the end of a path, one without any path segment.
    """
    g = glob.strip()
    if not g:
        raise GlobError("an empty glob")
    if g.startswith("!"):
        raise GlobError(f"{glob!r}: '!' (re-include) is not supported: these files can only add exclusions")
    if g.startswith("~/"):
        g = os.path.expanduser("~") + g[1:]
    folder_only = g.endswith("/")
    g = g.rstrip("/")
    if not g:
        raise GlobError(f"{glob!r} matches nothing")
    tail = "/.*" if folder_only else "(?:/.*)?"  # a folder covers everything under it
    if anchored_at is not None and "/" in g:
        base = anchored_at.rstrip("/")
        return re.compile(f"{re.escape(base)}/{_segment_regex(g.lstrip('/'))}{tail}", re.IGNORECASE | re.DOTALL)
    if g.startswith("/") or re.match(r"^[A-Za-z]:/", g):
        return re.compile(f"{_segment_regex(g)}{tail}", re.IGNORECASE | re.DOTALL)
    g = g[3:] if g.startswith("**/") else g
    prefix = "" if anchored_at is None else f"{re.escape(anchored_at.rstrip('/'))}/(?:.*/)?"
    lead = prefix or "(?:.*/)?"
    return re.compile(f"{lead}{_segment_regex(g)}{tail}", re.IGNORECASE | re.DOTALL)


@dataclass(frozen=True, slots=True)
class _Rule:
    glob: str
    source: str  # "built-in list", "exclude_files", or the ignore file's path
    regex: re.Pattern[str]


@dataclass
class SecretFiles:
    """The exclusion in force: :meth:`reason` says why a document is excluded (None: it is not)."""

    rules: list[_Rule] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # bad globs and unreadable ignore files, reported once each
    ignore_files: list[str] = field(default_factory=list)  # the .dgemmaignore files read

    @classmethod
    def build(
        cls, user_globs: list[str] | tuple[str, ...] = (), roots: list[str] | tuple[str, ...] = ()
    ) -> SecretFiles:
        out = cls([_Rule(g, "built-in list", compile_glob(g)) for g in BUILT_IN])
        for g in user_globs:
            out._add(g, "exclude_files", None)
        for root in roots:
            out._read_ignore_file(root)
        return out

    def _add(self, glob: str, source: str, anchored_at: str | None) -> None:
        try:
            self.rules.append(_Rule(glob.strip(), source, compile_glob(glob, anchored_at=anchored_at)))
        except GlobError as exc:
            self.errors.append(f"{source}: {exc}")
        except re.error as exc:  # a class the regex engine refuses ([z-a])
            self.errors.append(f"{source}: {glob!r} is not a valid glob ({exc})")

    def _read_ignore_file(self, root: str) -> None:
        path = Path(root) / IGNORE_FILE
        try:
            if not path.is_file():
                return
            raw = path.read_bytes()[:MAX_IGNORE_BYTES]
            text = raw.decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            self.errors.append(f"{path}: cannot be read ({exc}); the built-in list and exclude_files still apply")
            return
        self.ignore_files.append(str(path))
        base = root.replace("\\", "/")
        for n, line in enumerate(text.splitlines(), 1):
            s = line.strip()
            if not s or s.startswith("#"):
                continue
            self._add(s, f"{path}:{n}", base)

    def reason(self, uri_or_path: str) -> str | None:
        """Why the document at ``uri_or_path`` is never sent (the first matching glob and its source), or None."""
        path = file_path(uri_or_path)
        if path is None:
            return None  # untitled buffers, settings editors: no path to match
        path = posixpath.normpath(path)
        for rule in self.rules:
            if rule.regex.fullmatch(path):
                return f"a secret file (matches {rule.glob!r}, {rule.source})"
        return None

    def summary(self) -> dict[str, object]:
        """What ``dgemma.status`` shows: how many globs from where, the ignore files read, the errors."""
        counts: dict[str, int] = {}
        for r in self.rules:
            key = r.source if r.source in ("built-in list", "exclude_files") else IGNORE_FILE
            counts[key] = counts.get(key, 0) + 1
        return {"globs": counts, "ignore_files": list(self.ignore_files), "errors": list(self.errors)}
