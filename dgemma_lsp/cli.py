"""``dgemma-lsp``: the language server (``--stdio``) and headless commands (complete, fix, doctor).

Every failure a user can cause (missing file, bad position, undecodable bytes, a model folder that is
not DiffusionGemma, an unreachable server) ends as one ``dgemma-lsp: error: ...`` line on stderr and a
non-zero exit status, never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import difflib
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

EXIT_USAGE = 2  # bad input: file, position, language
EXIT_BACKEND = 3  # model/backend unavailable or failed
EXIT_NO_FIX = 4  # no validated fix exists


class CliError(Exception):
    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.code = code


def _common(p: argparse.ArgumentParser, *, sub: bool = False) -> None:
    # On subcommands the defaults are SUPPRESS, so `dgemma-lsp --model X doctor` keeps the X given before it.
    kw: dict[str, Any] = {"default": argparse.SUPPRESS} if sub else {}
    p.add_argument("--backend", choices=["transformers", "vllm", "openai"], help="diffusion backend", **kw)
    p.add_argument("--model", help="checkpoint folder or hub id (default: the embedded model)", **kw)
    p.add_argument("--config", help="settings file (TOML or JSON)", **kw)
    p.add_argument("--device", help="auto | cpu | cuda | cuda:N", **kw)
    p.add_argument("--base-url", dest="base_url", help="OpenAI-compatible server URL (openai backend)", **kw)
    p.add_argument("--steps", dest="denoising_steps", type=int, help="max denoising steps per canvas", **kw)
    p.add_argument("--seed", type=int, help="RNG seed", **kw)
    p.add_argument("--log-file", help="also write the log to this file", **kw)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dgemma-lsp", description=__doc__.splitlines()[0])
    parser.add_argument("--stdio", action="store_true", help="run the language server over stdin/stdout")
    parser.add_argument("--version", action="store_true")
    _common(parser)
    sub = parser.add_subparsers(dest="command")

    c = sub.add_parser("complete", help="print the completion at a position (0-based, UTF-16 like LSP)")
    c.add_argument("file")
    c.add_argument("--line", type=int, required=True)
    c.add_argument("--character", type=int, required=True)
    c.add_argument("--language", help="language id (default: from the file name)")
    c.add_argument(
        "--min-confidence",
        dest="min_confidence",
        type=float,
        help="withhold suggestions below this confidence (0 = show all; default: the model's recommendation)",
    )
    _common(c, sub=True)

    f = sub.add_parser("fix", help="repair broken JSON/JSONC/Markdown structure")
    f.add_argument("file", help="a file, or - for standard input")
    f.add_argument("--language", choices=["json", "jsonc", "markdown"])
    f.add_argument("--output", choices=["diff", "fixed"], default="diff")
    f.add_argument("--repair", choices=["auto", "model", "rules"], help="force one repair path")
    _common(f, sub=True)

    d = sub.add_parser("doctor", help="report backend, device, model, versions and what is missing")
    d.add_argument("--no-load", action="store_true", help="do not load the model")
    _common(d, sub=True)
    return parser


def _settings(args: argparse.Namespace) -> Any:
    from .config import ConfigError, load_settings

    cli = {k: getattr(args, k, None) for k in ("backend", "model", "device", "base_url", "denoising_steps", "seed")}
    if getattr(args, "repair", None):
        cli["repair"] = args.repair
    if getattr(args, "min_confidence", None) is not None:
        cli["min_confidence"] = args.min_confidence
    if getattr(args, "log_file", None):
        cli["log_file"] = args.log_file
    try:
        settings, warnings = load_settings(getattr(args, "config", None), cli)
    except ConfigError as exc:
        raise CliError(str(exc)) from None
    for w in warnings:
        print(f"dgemma-lsp: warning: {w}", file=sys.stderr)
    return settings


def _secret_reason(path: str, settings: Any) -> str | None:
    """Why no model may see ``path`` (lsp/secret_files.py; the current folder's .dgemmaignore counts), or None."""
    from .lsp.secret_files import SecretFiles

    return SecretFiles.build(settings.exclude_files, [os.getcwd()]).reason(os.path.abspath(path))


def _refuse_secret(path: str, settings: Any) -> None:
    why = None if path == "-" else _secret_reason(path, settings)
    if why:
        raise CliError(f"{path} is {why}: nothing is sent to a model")


def _read_text(path: str) -> str:
    if path == "-":
        data = sys.stdin.buffer.read()
        name = "standard input"
    else:
        p = Path(path)
        if p.is_dir():
            raise CliError(f"{path} is a directory, not a file")
        try:
            data = p.read_bytes()
        except FileNotFoundError:
            raise CliError(f"cannot read {path}: no such file") from None
        except OSError as exc:
            raise CliError(f"cannot read {path}: {exc.strerror}") from None
        name = path
    if b"\x00" in data:
        raise CliError(f"{name} looks binary (it contains NUL bytes)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CliError(f"{name} is not UTF-8 text (undecodable byte at offset {exc.start})") from None


async def _started_backend(settings: Any) -> Any:
    from .backend.contract import BackendError
    from .backend.registry import create_backend

    try:
        backend = create_backend(settings)
        await backend.start(None)
    except BackendError as exc:
        raise CliError(str(exc), EXIT_BACKEND) from None
    return backend


async def _complete(args: argparse.Namespace) -> int:
    from .backend.contract import BackendError
    from .lsp.documents import prompt_path
    from .lsp.infill import infill, language_for_path
    from .lsp.text import PositionError, position_to_offset

    settings = _settings(args)
    _refuse_secret(args.file, settings)
    text = _read_text(args.file)
    try:
        offset = position_to_offset(text, args.line, args.character)
    except PositionError as exc:
        raise CliError(f"{args.file}: {exc}") from None
    backend = await _started_backend(settings)
    if not settings.model and settings.backend == "transformers":
        from .backend.defaults import default_model

        # say which model answered: the embedded default is labelled (experimental, or the untrained fixture)
        print(f"dgemma-lsp: model: {default_model()[1]}", file=sys.stderr)
    try:
        result = await infill(
            backend,
            text,
            offset,
            language_id=args.language or language_for_path(args.file),
            path=prompt_path(args.file, [os.getcwd()]),
            settings=settings,
        )
    except BackendError as exc:
        raise CliError(str(exc), EXIT_BACKEND) from None
    finally:
        await backend.aclose()
    held = result.extra.get("withheld")
    if held:  # nothing on stdout (what an editor would show), the reason and the withheld text on stderr
        print(
            f"dgemma-lsp: suggestion withheld: confidence {held['confidence']:.3g} < min_confidence "
            f"{held['min_confidence']:.2f} (set min_confidence = 0 to see it): {held['text']!r}",
            file=sys.stderr,
        )
    sys.stdout.write(result.text)
    if not result.text.endswith("\n"):
        sys.stdout.write("\n")
    return 0


async def _fix(args: argparse.Namespace) -> int:
    from .backend.contract import BackendError
    from .lsp.diagnostics import find_issues
    from .lsp.infill import language_for_path
    from .lsp.repair import repair

    settings = _settings(args)
    text = _read_text(args.file)
    language = args.language or (language_for_path(args.file) if args.file != "-" else "json")
    if language not in ("json", "jsonc", "markdown"):
        raise CliError(f"cannot tell the structure language of {args.file}: pass --language json|jsonc|markdown")
    issues = find_issues(text, language)
    if not issues:
        if args.output == "fixed":
            sys.stdout.write(text)
        print(f"dgemma-lsp: no structure problems found in {args.file}", file=sys.stderr)
        return 0
    mode = settings.repair
    if mode != "rules" and args.file != "-" and _secret_reason(args.file, settings):
        print(f"dgemma-lsp: {args.file} is {_secret_reason(args.file, settings)}: rules only", file=sys.stderr)
        mode = "rules"
    fixes: list[Any] = []
    if mode in ("auto", "rules"):  # the deterministic repair answers at once; the model only where it found none
        fixes = await repair(text, language, None, mode="rules")
    fixed = _first_checked(text, language, fixes)
    if fixed is None and mode in ("auto", "model"):
        backend = None
        try:
            backend = await _started_backend(settings)
        except CliError:
            if mode == "model":
                raise
            print("dgemma-lsp: warning: no model serves and the deterministic repair found no fix", file=sys.stderr)
        if backend is not None:
            try:
                fixes = await repair(
                    text,
                    language,
                    None,
                    mode=mode,
                    generate=backend.generate,
                    settings=settings,
                    tokenizer=getattr(backend, "tokenizer", None),  # enables the seed canvas + pins
                )
            except BackendError as exc:
                raise CliError(str(exc), EXIT_BACKEND) from None
            finally:
                await backend.aclose()
            fixed = _first_checked(text, language, fixes)
    if fixed is None:
        first = issues[0]
        raise CliError(f"no validated fix for {args.file}: {first.message} ({mode} repair)", EXIT_NO_FIX)
    fix, out = fixed
    print(f"dgemma-lsp: {fix.title} [{fix.kind}]", file=sys.stderr)
    if args.output == "fixed":
        sys.stdout.write(out)
    else:
        name = "stdin" if args.file == "-" else args.file
        sys.stdout.writelines(
            difflib.unified_diff(
                text.splitlines(keepends=True), out.splitlines(keepends=True), f"a/{name}", f"b/{name}"
            )
        )
    return 0


def _first_checked(text: str, language: str, fixes: list[Any]) -> tuple[Any, str] | None:
    """The first fix whose output passes the final check (valid, values kept, no problem left), with that output."""
    from .lsp.repair import checked_output

    for fix in fixes:
        out, why = checked_output(text, fix, language, whole=True)
        if out is not None:
            return fix, out
        print(f"dgemma-lsp: dropped a fix that failed the final check: {why}", file=sys.stderr)
    return None


async def _doctor(args: argparse.Namespace) -> int:
    import importlib.metadata as md
    import platform

    settings = _settings(args)
    ok = True
    print(f"python        {platform.python_version()} ({sys.executable})")
    for pkg in ("dgemma-lsp", "pygls", "lsprotocol", "torch", "transformers", "tokenizers", "httpx", "triton", "vllm"):
        try:
            print(f"{pkg:<13} {md.version(pkg)}")
        except md.PackageNotFoundError:
            need = {
                "vllm": "needed only for --backend vllm: pip install 'dgemma-lsp[vllm]' on a CUDA machine",
                "triton": "optional: Triton kernels (CUDA)",
            }.get(pkg, "MISSING: pip install -e .")
            ok = ok and pkg in ("vllm", "triton")
            print(f"{pkg:<13} not installed ({need})")
    from .backend.vllm_support import plugin_lines, vllm_version

    for label, text in plugin_lines(vllm_version()):
        print(f"{label:<13} {text}")
    try:
        import torch

        cuda = torch.cuda.is_available()
        print(f"cuda          {'yes: ' + torch.cuda.get_device_name(0) if cuda else 'no (CPU only)'}")
    except ImportError:
        pass
    print(f"backend       {settings.backend}")
    if settings.backend == "transformers" and not settings.model:
        from .backend.defaults import default_model
        from .backend.model_card import read_measured

        path, label = default_model()
        print(f"model         {label}")
        for what, figure in read_measured(path).items():
            print(f"  {what:<22}{figure}")
    elif settings.backend == "openai":
        from .backend.openai_backend import plain_http_host, redact_url

        print(f"server        {redact_url(settings.base_url)}")
        host = plain_http_host(settings.base_url)
        if host is not None:
            print(
                f"transport     plain HTTP to {host}: code travels unencrypted (allow_insecure_http = true)"
                if settings.allow_insecure_http
                else f"transport     REFUSED: plain HTTP to {host} (use https://, or allow_insecure_http = true)"
            )
            ok = ok and settings.allow_insecure_http
        print(f"model         {settings.remote_model or '(first model the server lists)'}")
    else:
        print(f"model         {settings.model or '(backend default)'}")
    if args.no_load:
        return 0 if ok else 1
    from .backend.contract import BackendError
    from .backend.registry import create_backend

    try:
        backend = create_backend(settings)
        probe = getattr(backend, "doctor", None)
        if probe is not None:  # remote: discovery + one tiny generation, secrets never printed
            report = await probe()
            ok = ok and bool(report.get("ok"))
            print(f"status        {'ready' if report.get('ok') else 'NOT READY: ' + str(report.get('error'))}")
            for k, v in report.items():
                if k not in ("ok", "error"):
                    print(f"  {k:<22}{v}")
        else:
            await backend.start(None)
            info = backend.info()
            print(f"status        ready on {info.device}")
            from .lsp.confidence import recommended, temperatures, threshold

            gate = threshold(settings, backend)
            source = "min_confidence" if settings.min_confidence is not None else "the model's own recommendation"
            print(
                f"suggestions   withheld below confidence {gate:.2f} ({source})"
                if gate > 0
                else "suggestions   all shown (min_confidence 0)"
            )
            lo, hi = temperatures(settings, backend)
            if settings.t_min is not None:
                source = "t_min / t_max"
            elif "t_min" in recommended(backend):
                source = "the model's own recommendation"
            else:
                source = "transformers' defaults"
            print(f"temperature   {hi:.2f} (first step) -> {lo:.2f} (last step) ({source})")
            for k, v in info.detail.items():
                print(f"  {k:<22}{v}")
        await backend.aclose()
    except BackendError as exc:
        print(f"status        NOT READY: {exc}")
        ok = False
    return 0 if ok else 1


def main(argv: list[str] | None = None, *, extend_server: Callable[[Any], None] | None = None) -> int:
    """Run ``dgemma-lsp``; ``extend_server`` sees the language server before it starts (test and benchmark
    launchers add commands or wrap its backends there)."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.version:
        from importlib.metadata import version

        print(f"dgemma-lsp {version('dgemma-lsp')}")
        return 0
    try:
        if args.stdio or args.command is None:
            if not args.stdio:
                parser.print_help(sys.stderr)
                return EXIT_USAGE
            settings = _settings(args)
            from .lsp.server import run_stdio

            # The flags that started the server are its base; the editor's settings (initializationOptions,
            # workspace/configuration) refine them, so a user can switch models from the editor.
            run_stdio(settings, extend=extend_server)
            return 0
        handler = {"complete": _complete, "fix": _fix, "doctor": _doctor}[args.command]
        return asyncio.run(handler(args))
    except CliError as exc:
        print(f"dgemma-lsp: error: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        return 130


def entry(*, extend_server: Callable[[Any], None] | None = None) -> None:
    """Console-script entry: run, flush, and leave without interpreter teardown.

    Native thread pools (torch, tokenizers) can abort the process ("terminate called without an active
    exception") when the interpreter finalises while they wind down; the work is done and flushed by then,
    so skipping finalisation turns a rare spurious crash into the exit status the command earned.
    """
    import logging

    try:
        code = main(extend_server=extend_server)
    except SystemExit as exc:  # argparse errors
        code = exc.code if isinstance(exc.code, int) else 2
    try:
        sys.stdout.flush()
        sys.stderr.flush()
        logging.shutdown()
    finally:
        os._exit(code)


if __name__ == "__main__":
    entry()
