"""The headless CLI: `complete` and `fix` on the real tiny checkpoint, and every bad input ends as one
clear error line with a non-zero exit status, never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dgemma_lsp.backend.tiny_model.builder import ensure_tiny_checkpoint
from dgemma_lsp.cli import EXIT_BACKEND, EXIT_NO_FIX, EXIT_USAGE, main

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tiny() -> str:
    return str(ensure_tiny_checkpoint())


def run_cli(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, TOKENIZERS_PARALLELISM="false")
    return subprocess.run(
        [sys.executable, "-m", "dgemma_lsp.cli", *args],
        input=stdin,
        capture_output=True,
        timeout=300,
        cwd=ROOT,
        env=env,
    )


def one_error_line(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert "Traceback" not in stderr
    errors = [ln for ln in lines if ln.startswith("dgemma-lsp: error:")]
    assert len(errors) == 1, stderr
    return errors[0]


def test_complete_and_fix_end_to_end(tiny, tmp_path):
    src = tmp_path / "add.py"
    src.write_text("def add(a, b):\n    return \n")
    r = run_cli("complete", str(src), "--line", "1", "--character", "11", "--model", tiny, "--steps", "4")
    assert r.returncode == 0, r.stderr
    assert r.stdout.endswith(b"\n")
    assert "Traceback" not in r.stderr.decode()

    broken = tmp_path / "b.json"
    broken.write_text('{\n  "$id": "C:\\\\Users",\n  "tags": ["a", "b",],\n}\n')
    r = run_cli("fix", str(broken), "--repair", "rules", "--output", "fixed")
    assert r.returncode == 0, r.stderr
    fixed = json.loads(r.stdout)
    assert fixed == {"$id": "C:\\Users", "tags": ["a", "b"]}  # values kept exactly


def test_complete_names_the_embedded_model_it_used(tmp_path):
    """Without --model the embedded default answers, and the CLI says which one (it is labelled experimental).
    Where it has no confident answer (a bare ``return``), its own confidence gate withholds what it wrote: nothing on
    stdout, the reason and the withheld text on stderr; ``--min-confidence 0`` shows it."""
    src = tmp_path / "add.py"
    src.write_text("def add(a, b):\n    return \n")
    r = run_cli("complete", str(src), "--line", "1", "--character", "11", "--steps", "4")
    assert r.returncode == 0, r.stderr
    err = r.stderr.decode()
    assert "dgemma-lsp: model: embedded small model, experimental" in err
    assert "suggestion withheld: confidence" in err and "< min_confidence 0.50" in err
    assert r.stdout.decode().strip() == ""
    shown = run_cli("complete", str(src), "--line", "1", "--character", "11", "--steps", "4", "--min-confidence", "0")
    assert (
        shown.returncode == 0 and shown.stdout.decode().strip() and "suggestion withheld" not in shown.stderr.decode()
    )


def test_readme_close_example_prints_the_closing_bracket():
    """The README's second quick-start command, as written there: the embedded model closes ``max(`` (shown, not
    withheld)."""
    r = run_cli("complete", "fixtures/docs/close.py", "--line", "1", "--character", "38")
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode() == ")\n" and "suggestion withheld" not in r.stderr.decode()


def test_fix_reads_stdin_and_prints_a_diff(capsys, monkeypatch):
    import io

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b'{"a": 1,}\n')))
    assert main(["fix", "-", "--repair", "rules"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("--- a/stdin")
    assert '-{"a": 1,}' in out and '+{"a": 1}' in out


def test_fix_model_only_on_garbage_model_refuses(tiny, tmp_path, capsys):
    """The tiny model has random weights: with --repair model there is no validated fix, so exit 4."""
    broken = tmp_path / "b.json"
    broken.write_text('{"a": 1,,}')
    code = main(["fix", str(broken), "--repair", "model", "--model", tiny, "--steps", "2"])
    err = capsys.readouterr().err
    assert code == EXIT_NO_FIX
    assert "no validated fix" in one_error_line(err)


def test_fix_clean_file_is_a_no_op(tmp_path, capsys):
    ok = tmp_path / "ok.json"
    ok.write_text('{"a": [1, 2]}\n')
    assert main(["fix", str(ok), "--output", "fixed", "--repair", "rules"]) == 0
    cap = capsys.readouterr()
    assert cap.out == '{"a": [1, 2]}\n'
    assert "no structure problems" in cap.err


@pytest.mark.parametrize(
    "args, code, needle",
    [
        (["complete", "missing.py", "--line", "0", "--character", "0"], EXIT_USAGE, "no such file"),
        (["complete", "{doc}", "--line", "99", "--character", "0"], EXIT_USAGE, "past the end"),
        (["complete", "{doc}", "--line", "0", "--character", "500"], EXIT_USAGE, "past the end"),
        (["complete", "{bin}", "--line", "0", "--character", "0"], EXIT_USAGE, "not UTF-8"),
        (["complete", "{nul}", "--line", "0", "--character", "0"], EXIT_USAGE, "binary"),
        (
            ["complete", "{doc}", "--line", "0", "--character", "0", "--model", "{llama}"],
            EXIT_BACKEND,
            "not DiffusionGemma",
        ),
        (
            ["complete", "{doc}", "--line", "0", "--character", "0", "--model", "{empty}"],
            EXIT_BACKEND,
            "no config.json",
        ),
        (["fix", "{doc}"], EXIT_USAGE, "--language"),
        (["fix", "missing.json"], EXIT_USAGE, "no such file"),
        (["fix", "{doc}", "--language", "json", "--config", "{badcfg}"], EXIT_USAGE, "not valid TOML"),
    ],
)
def test_bad_input_is_one_clear_line(args, code, needle, tmp_path, capsys):
    doc = tmp_path / "a.py"
    doc.write_text("x = 1\n")
    (tmp_path / "bin.py").write_bytes(b"x = '\xff\xfe'\n")
    (tmp_path / "nul.py").write_bytes(b"x = 1\x00\n")
    llama = tmp_path / "llama"
    llama.mkdir()
    (llama / "config.json").write_text(json.dumps({"model_type": "llama"}))
    (tmp_path / "empty").mkdir()
    (tmp_path / "bad.toml").write_text("backend = [\n")
    subst = {
        "{doc}": str(doc),
        "{bin}": str(tmp_path / "bin.py"),
        "{nul}": str(tmp_path / "nul.py"),
        "{llama}": str(llama),
        "{empty}": str(tmp_path / "empty"),
        "{badcfg}": str(tmp_path / "bad.toml"),
    }
    argv = [subst.get(a, a) for a in args]
    assert main(argv) == code
    assert needle in one_error_line(capsys.readouterr().err)


def test_bad_input_from_a_real_process_has_no_traceback(tmp_path):
    doc = tmp_path / "a.py"
    doc.write_text("x = '😀'\n")
    r = run_cli("complete", str(doc), "--line", "0", "--character", "6")  # splits the emoji's surrogate pair
    assert r.returncode == EXIT_USAGE
    assert "surrogate" in one_error_line(r.stderr.decode()).lower()


def test_doctor_without_loading(capsys):
    assert main(["doctor", "--no-load"]) == 0
    out = capsys.readouterr().out
    assert "backend       transformers" in out
    assert "model" in out


def test_doctor_names_the_embedded_models_size_and_scores(capsys):
    """What a newcomer should know before trusting a suggestion: which checkpoint, how big, how good (its card)."""
    assert main(["doctor", "--no-load"]) == 0
    out = capsys.readouterr().out
    assert "  version               v10: 33.9 M parameters" in out
    assert "  outside completions   " in out and "frozen outside set" in out


def test_a_malformed_measured_entry_is_ignored(tmp_path: Path):
    from dgemma_lsp.backend.model_card import read_measured

    (tmp_path / "dgemma_lsp.json").write_text('{"measured": ["not", "a", "mapping"]}')
    assert read_measured(tmp_path) == {}
    (tmp_path / "dgemma_lsp.json").write_text('{"measured": {"exact": "4 of 100", "bad": {"x": 1}}}')
    assert read_measured(tmp_path) == {"exact": "4 of 100"}


def test_doctor_says_the_vllm_plugin_is_inactive_without_vllm(capsys):
    """This environment has no vLLM (a real absence, not a fake): doctor says the plugin is inactive and names the
    tested range, which is the one pyproject's ``[vllm]`` extra installs."""
    import importlib.util
    import tomllib

    from dgemma_lsp.backend.vllm_support import TESTED_RANGE

    assert importlib.util.find_spec("vllm") is None
    assert main(["doctor", "--no-load"]) == 0
    out = capsys.readouterr().out
    assert f"vllm plugin   inactive: vLLM not installed (tested range vllm{TESTED_RANGE})" in out
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["vllm"]
    assert f"vllm{TESTED_RANGE}" in extra


def test_the_extra_s_range_admits_exactly_the_tested_releases():
    from packaging.specifiers import SpecifierSet

    from dgemma_lsp.backend.vllm_support import TESTED, TESTED_RANGE, in_tested_range

    spec = SpecifierSet(TESTED_RANGE)
    for minor in range(20, 40):
        for v in (f"0.{minor}.0", f"0.{minor}.2"):
            assert (v in spec) is ((0, minor) in TESTED) is in_tested_range(v), v
    assert in_tested_range("0.33.0+cu130") and in_tested_range("0.34.0") and not in_tested_range("0.32.0+cpu")


def test_doctor_names_the_plugin_pieces_per_vllm_and_warns_outside_the_tested_releases():
    """With vLLM 0.33 (its version string given: no vLLM can be installed here) doctor says it is tested and lists
    what runs (the draft tap on vLLM's own sampler, the fused-MoE configs); 0.32 (CPU-checked only) and other
    releases get a warning; past the releases the tap was checked on, drafts are off and doctor says why."""
    from dgemma_lsp.backend.vllm_support import TESTED_RANGE, plugin_lines

    new = dict(plugin_lines("0.33.0", environ={}))
    assert new["vllm plugin"] == f"vLLM 0.33.0 is in the tested range (vllm{TESTED_RANGE})"
    assert new["  active"] == "draft_tap, moe_config"
    assert new["  drafts"] == "per step, tapped from vLLM's own DiffusionGemma sampler"
    assert dict(plugin_lines("0.34.0+cu130", environ={}))["vllm plugin"].startswith("vLLM 0.34.0+cu130 is in the")
    cpu = dict(plugin_lines("0.32.0+cpu", environ={}))
    assert cpu["  active"] == "draft_tap, moe_config"
    assert cpu["vllm plugin"].startswith("WARNING: vLLM 0.32.0+cpu is outside the tested range")
    for version in ("0.35.0", "0.26.0"):
        other = dict(plugin_lines(version, environ={}))
        assert other["vllm plugin"].endswith("the GPU tests ran on vLLM 0.33 and 0.34)")
        assert other["  active"] == "moe_config" and "whole canvases only" in other["  drafts"]
        assert "0.32-0.34" in other["  drafts"]
    off = dict(plugin_lines("0.33.0", environ={"DGEMMA_VLLM_PLUGIN": "0"}))
    assert off["  active"] == "none (switched off by DGEMMA_VLLM_PLUGIN=0)"


def test_doctor_on_a_vllm_033_that_does_not_import_here(tmp_path: Path):
    """An installed vLLM 0.33 whose import fails (as on a CPU machine where torch finds no CUDA libraries: a stand-in
    package that raises what torch raises there, with real distribution metadata) is still judged by its version:
    doctor lists the pieces that run on 0.33."""
    site = tmp_path / "site"
    (site / "vllm").mkdir(parents=True)
    (site / "vllm" / "__init__.py").write_text(
        'raise ImportError("libcufile.so.0: cannot open shared object file: No such file or directory")\n'
    )
    (site / "vllm-0.33.0.dist-info").mkdir()
    (site / "vllm-0.33.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.33.0\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-m", "dgemma_lsp.cli", "doctor", "--no-load"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert "vllm          0.33.0" in out and "vllm plugin   vLLM 0.33.0 is in the tested range" in r.stdout
    assert "  active      draft_tap, moe_config" in out, r.stdout


def test_doctor_says_what_the_embedded_model_recommends():
    """doctor loads the default model and says which gate and temperatures are in force, and where they come from."""
    r = run_cli("doctor")
    assert r.returncode == 0, r.stdout.decode() + r.stderr.decode()
    out = r.stdout.decode()
    assert "suggestions   withheld below confidence 0.50 (the model's own recommendation)" in out
    assert "temperature   0.30 (first step) -> 0.10 (last step) (the model's own recommendation)" in out


def test_fix_output_is_the_validated_text_on_touching_edits():
    """A comma inserted where a single-quoted string is then requoted: two edits at one offset. The printed
    document (and the diff) is exactly the validated one, so it parses; before, the second edit swallowed the
    first and ``["a""b"']`` came out with exit status 0."""
    r = run_cli("fix", "-", "--language", "json", "--output", "fixed", "--repair", "rules", stdin=b"[\"a\"'b']")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == ["a", "b"]
    d = run_cli("fix", "-", "--language", "json", "--repair", "rules", stdin=b"[\"a\"'b']")
    assert d.returncode == 0 and b'+["a","b"]' in d.stdout


def test_fix_auto_answers_with_the_rules_without_starting_the_model(tmp_path):
    """``repair = auto``: the deterministic fix validates, so the model (here a folder that is no model) is never
    loaded: the fix comes at once with exit 0."""
    r = run_cli(
        "fix", "-", "--language", "json", "--output", "fixed", "--model", str(tmp_path), stdin=b'{"a": 1 "b": [1,]}'
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"a": 1, "b": [1]}


def test_fix_with_no_validated_fix_exits_4_with_one_line():
    r = run_cli("fix", "-", "--language", "json", "--output", "fixed", "--repair", "rules", stdin=b'{"a": 1, :: "b"}')
    assert r.returncode == EXIT_NO_FIX and r.stdout == b""
    assert "no validated fix" in one_error_line(r.stderr.decode())


def test_stdio_flags_are_the_base_the_editor_settings_refine(monkeypatch: pytest.MonkeyPatch) -> None:
    """``dgemma-lsp --stdio --steps 4`` starts from the flag, and an editor's value overrides it (the precedence
    dgemma_lsp/config.py and lsp/settings.py document): the flags are not re-applied over the editor's settings."""
    from dgemma_lsp.lsp import server
    from dgemma_lsp.lsp.settings import SettingsManager

    started: list[tuple[object, ...]] = []
    monkeypatch.setattr(server, "run_stdio", lambda *a, **kw: started.append((*a, kw.get("cli_overrides"))))
    monkeypatch.delenv("DGEMMA_LSP_DENOISING_STEPS", raising=False)
    assert main(["--stdio", "--steps", "4"]) == 0
    ((settings, *rest),) = started
    assert settings.denoising_steps == 4 and rest in ([], [None])
    mgr = SettingsManager(settings)  # what the server builds from run_stdio(settings)
    assert mgr.update(init_options={"denoisingSteps": 8})[0].denoising_steps == 8
