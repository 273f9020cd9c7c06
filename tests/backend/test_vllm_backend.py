"""CPU-side checks of the vllm backend and plugin: registration, feature detection, the max_num_seqs guard, and
how a CanvasRequest maps onto vLLM's SamplingParams (no vLLM needed; the engine itself runs in tests/gpu/)."""

from __future__ import annotations

import ast
import importlib.metadata
from pathlib import Path

import pytest

from dgemma_lsp.backend.contract import BackendError, BackendUnavailable, CanvasRequest
from dgemma_lsp.backend.vllm_backend import (
    VLLMBackend,
    VLLMFeatures,
    check_max_num_seqs,
    cudagraph_capture_sizes,
    detect_features,
    map_request,
)
from dgemma_lsp.backend.vllm_plugin import (
    ALL_FEATURES,
    NATIVE_DRAFTS_MODEL_CLASS,
    SCOPED_MODEL_CLASS,
    active_features,
    enabled_features,
    register,
)
from dgemma_lsp.config import ConfigError, Settings

try:
    import vllm  # noqa: F401

    HAVE_VLLM = True
except ImportError:
    HAVE_VLLM = False

OLD_NO_OPTIONS = VLLMFeatures(version="0.31.0")  # a vLLM without native per-request diffusion options
NEW = VLLMFeatures(version="0.33.0", native_extra_args=True)
NEW_PLUGIN = VLLMFeatures(version="0.33.0", native_extra_args=True, plugin=True, plugin_features=ALL_FEATURES)


def test_plugin_entry_point_is_declared_and_import_safe() -> None:
    eps = [e for e in importlib.metadata.entry_points(group="vllm.general_plugins") if e.name == "dgemma_lsp"]
    assert eps, "pyproject must declare the dgemma_lsp vllm.general_plugins entry point"
    fn = eps[0].load()
    assert fn is register
    register()  # without vLLM (or with it) this never raises


def test_the_plugin_is_on_unless_switched_off() -> None:
    assert enabled_features({}) == ALL_FEATURES
    assert enabled_features({"DGEMMA_VLLM_PLUGIN": "0"}) == enabled_features({"DGEMMA_VLLM_PLUGIN": "off"}) == set()
    # the draft tap on the releases it was checked against; the fused-MoE configs anywhere
    assert ALL_FEATURES == {"draft_tap", "moe_config"}
    assert active_features({}, "0.32.0+cpu") == active_features({}, "0.33.0") == active_features({}, "0.34.0")
    assert active_features({}, "0.34.0") == ALL_FEATURES
    assert active_features({}, "0.35.0") == active_features({}, "0.31.0") == {"moe_config"}  # internals not checked
    assert active_features({"DGEMMA_VLLM_PLUGIN": "0"}, "0.33.0") == set()


def _module_classes(dotted: str) -> set[str]:
    """The classes a module of ours defines at its top level (read from its source: vLLM is not installed here)."""
    root = Path(__file__).resolve().parents[2]
    rel = dotted.removeprefix("dgemma_lsp.").split(".")
    tree = ast.parse((root.joinpath(*rel[:-1]) / f"{rel[-1]}.py").read_text())
    return {n.name for n in tree.body if isinstance(n, ast.ClassDef)}


def test_the_registry_strings_name_module_level_classes() -> None:
    """vLLM resolves ``"module:Class"`` (the model) by importing the module and reading the attribute: each must be
    a class at the top of a module of ours."""
    module, _, cls = NATIVE_DRAFTS_MODEL_CLASS.partition(":")
    assert module == "dgemma_lsp.backend.vllm_native_drafts" and cls == "DGemmaDraftsForConditionalGeneration"
    assert {cls, "DGemmaDraftsModelState", "DGemmaDraftSampler"} <= _module_classes(module)
    module, _, cls = SCOPED_MODEL_CLASS.partition(":")
    assert cls in _module_classes(module)


def test_feature_detection_uses_native_extra_args_from_0_32(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DGEMMA_VLLM_PLUGIN", raising=False)
    old = detect_features("0.31.0")
    assert not old.native_extra_args and not old.per_request and not old.drafts
    new = detect_features("0.33.1")
    assert new.native_extra_args and new.per_request
    # the draft tap around vLLM's own sampler and the MoE config
    assert new.plugin_features == {"draft_tap", "moe_config"} and new.drafts
    req = CanvasRequest(prompt_ids=[1], canvas_length=32, rng_seed=3, entropy_bound=0.2, want_drafts=True)
    m = map_request(req, prompt_ids=[1], seed_ids=None, engine_canvas=256, vocab_size=500, features=new)
    # of ours, only the tap's flag: the seed and the entropy bound are not vLLM's options
    assert [k for k in m.sampling["extra_args"] if k.startswith("dgemma_")] == ["dgemma_draft_tap"]
    assert {"rng_seed", "entropy_bound"} <= set(m.unsupported)  # reported instead
    later = detect_features("0.35.0")
    assert later.plugin_features == {"moe_config"} and not later.drafts
    m = map_request(req, prompt_ids=[1], seed_ids=None, engine_canvas=256, vocab_size=500, features=later)
    assert not any(k.startswith("dgemma_") for k in m.sampling["extra_args"])  # nothing that engine would read
    off = detect_features("0.33.0", plugin_enabled=False)
    assert off.per_request and not off.drafts and not off.plugin


@pytest.mark.parametrize("n", [5, 8, 64])
def test_max_num_seqs_above_four_is_refused_with_a_clear_error(n: int) -> None:
    with pytest.raises(BackendError, match=r"max_num_seqs=\d+ is refused.*above 4"):
        check_max_num_seqs(n)
    with pytest.raises(BackendError, match="refused"):
        VLLMBackend("some/model", max_num_seqs=n)
    assert check_max_num_seqs(4) == 4


def test_engine_arguments_are_the_vendor_settings() -> None:
    s, _ = Settings().merged({"backend": "vllm", "model": "RedHatAI/diffusiongemma-26B-A4B-it-FP8-dynamic"})
    b = VLLMBackend.from_settings(s)
    kw = b.engine_kwargs()
    assert kw["model"] == "RedHatAI/diffusiongemma-26B-A4B-it-FP8-dynamic"
    assert kw["diffusion_config"] == {"canvas_length": 256}
    # no attention backend named: vLLM's pick, FlashAttention-4 on Hopper since 0.33 (faster than TRITON_ATTN at
    # canvas 32 and 256 on the H100, bench/RESULTS.md)
    assert "attention_backend" not in kw
    assert kw["generation_config"] == "vllm"
    assert kw["language_model_only"] is True
    assert kw["max_num_seqs"] == 4 and kw["enable_prefix_caching"] is True
    assert kw["gpu_memory_utilization"] == s.vllm_gpu_memory_utilization
    assert kw["max_model_len"] == s.vllm_max_model_len


def test_cuda_graphs_cover_every_denoising_batch() -> None:
    # vLLM's default stops at 512 tokens: 4 canvases of 256 stepped without graphs (44 ms vs 16, bench/RESULTS.md)
    kw = VLLMBackend("m", canvas_length=256, max_num_seqs=4).engine_kwargs()
    sizes = kw["compilation_config"]["cudagraph_capture_sizes"]
    assert {256, 512, 768, 1024} <= set(sizes) and max(sizes) == 1024 and sizes == sorted(sizes)
    assert {1, 8, 128, 496} <= set(sizes)  # vLLM's own sizes stay (prefill chunks, commit steps)
    assert cudagraph_capture_sizes(64, 4) is None  # 256 tokens: vLLM's default covers it
    assert "cudagraph_capture_sizes" not in VLLMBackend("m", canvas_length=64).engine_kwargs().get(
        "compilation_config", {}
    )
    assert "compilation_config" not in VLLMBackend("m", enforce_eager=True).engine_kwargs()
    assert max(cudagraph_capture_sizes(256, 3)) == 768


def test_inductor_tunes_its_kernels() -> None:
    # coordinate-descent tuning: 0.1 ms a batch-4 step less on the H200; eager engines compile nothing
    cdt = {"coordinate_descent_tuning": True}
    assert VLLMBackend("m").engine_kwargs()["compilation_config"]["inductor_compile_config"] == cdt
    assert VLLMBackend("m", canvas_length=64).engine_kwargs()["compilation_config"] == {"inductor_compile_config": cdt}
    assert "compilation_config" not in VLLMBackend("m", enforce_eager=True).engine_kwargs()


def test_one_canvas_requests_end_at_their_final_draft() -> None:
    one = map_request(CanvasRequest(prompt_ids=[1], canvas_length=32, want_drafts=False), prompt_ids=[1],
                      seed_ids=None, engine_canvas=256, vocab_size=500, features=NEW_PLUGIN)  # fmt: skip
    assert one.early_commit and one.sampling["extra_args"]["dgemma_draft_tap"] is True  # the tap says which is final
    two = map_request(CanvasRequest(prompt_ids=[1], canvas_length=32, max_new_tokens=64, want_drafts=False),
                      prompt_ids=[1], seed_ids=None, engine_canvas=32, vocab_size=500, features=NEW_PLUGIN)  # fmt: skip
    assert not two.early_commit and "dgemma_draft_tap" not in (two.sampling["extra_args"] or {})
    new = map_request(CanvasRequest(prompt_ids=[1], canvas_length=32), prompt_ids=[1], seed_ids=None,
                      engine_canvas=256, vocab_size=500, features=NEW)  # fmt: skip
    assert not new.early_commit  # no plugin: vLLM's own sampler has no tap


def test_request_mapping_with_the_plugin() -> None:
    req = CanvasRequest(
        prompt_ids=[2, 5, 6],
        canvas_length=32,
        max_denoising_steps=8,
        seed_canvas=[10, 11, 12],
        pinned=[0, 2, 31],
        rng_seed=7,
        entropy_bound=0.2,
    )
    m = map_request(req, prompt_ids=[2, 5, 6], seed_ids=[10, 11, 12], engine_canvas=256, vocab_size=1000,
                    features=NEW_PLUGIN)  # fmt: skip
    extra = m.sampling["extra_args"]
    assert m.canvas_width == 32 and m.sampling["max_tokens"] == 32
    assert m.sampling["detokenize"] is False  # decoding happens in the backend, once per canvas
    assert extra["diffusion_canvas_length"] == 32 and extra["diffusion_max_steps"] == 8
    seed = extra["diffusion_seed_canvas"]
    assert len(seed) == 32 and seed[:3] == [10, 11, 12] and all(0 <= t < 1000 for t in seed)
    again = map_request(req, prompt_ids=[2], seed_ids=[10, 11, 12], engine_canvas=256, vocab_size=1000,
                        features=NEW_PLUGIN)  # fmt: skip
    assert again.sampling["extra_args"]["diffusion_seed_canvas"] == seed  # noise padding follows rng_seed
    assert extra["diffusion_pinned"] == [0, 2, 31]
    # of ours, only the tap's flag: the seed and the entropy bound are not vLLM's options, and are reported
    assert [k for k in extra if k.startswith("dgemma_")] == ["dgemma_draft_tap"]
    assert "seed" not in m.sampling and "temperature" not in m.sampling  # vLLM refuses these for diffusion models
    assert set(m.unsupported) == {"rng_seed", "entropy_bound"}


def test_request_mapping_on_new_vllm_uses_the_same_names() -> None:
    req = CanvasRequest(prompt_ids=[1], canvas_length=64, seed_canvas=list(range(100)), pinned=[1])
    m = map_request(req, prompt_ids=[1], seed_ids=list(range(100)), engine_canvas=256, vocab_size=500, features=NEW)
    extra = m.sampling["extra_args"]
    assert extra["diffusion_seed_canvas"] == list(range(64))  # cut to the canvas
    assert extra["diffusion_pinned"] == [1] and extra["diffusion_canvas_length"] == 64
    assert not any(k.startswith("dgemma_") for k in extra)  # ours only reach a plugin engine


def test_request_mapping_without_per_request_support() -> None:
    req = CanvasRequest(prompt_ids=[1], canvas_length=32, entropy_bound=0.3, t_min=0.2)
    m = map_request(req, prompt_ids=[1], seed_ids=None, engine_canvas=256, vocab_size=500, features=OLD_NO_OPTIONS)
    assert m.sampling["extra_args"] is None
    assert set(m.unsupported) == {"canvas_length", "max_denoising_steps", "entropy_bound", "temperatures"}
    seeded = CanvasRequest(prompt_ids=[1], rng_seed=5)
    m = map_request(seeded, prompt_ids=[1], seed_ids=None, engine_canvas=256, vocab_size=500, features=OLD_NO_OPTIONS)
    assert "rng_seed" in m.unsupported and "seed" not in m.sampling  # reported, never sent (vLLM would refuse)
    pinned = CanvasRequest(prompt_ids=[1], seed_canvas=[3], pinned=[0])
    with pytest.raises(BackendError, match=r"vLLM >= 0.33: pip install 'dgemma-lsp\[vllm\]'"):
        map_request(pinned, prompt_ids=[1], seed_ids=[3], engine_canvas=256, vocab_size=500, features=OLD_NO_OPTIONS)


def test_long_requests_run_several_engine_canvases() -> None:
    req = CanvasRequest(prompt_ids=[1], canvas_length=512, max_new_tokens=600)
    m = map_request(req, prompt_ids=[1], seed_ids=None, engine_canvas=256, vocab_size=500, features=NEW)
    assert m.canvas_width == 256 and m.sampling["max_tokens"] == 600
    assert "diffusion_canvas_length" not in (m.sampling["extra_args"] or {})


def test_registry_creates_the_backend_lazily() -> None:
    from dgemma_lsp.backend.registry import create_backend

    s, _ = Settings().merged({"backend": "vllm"})
    b = create_backend(s)
    assert isinstance(b, VLLMBackend) and b.tokenizer is None
    assert not b.info().ready
    assert b.count_tokens("def f(x):\n    return x") > 0  # an estimate before the engine exists


@pytest.mark.skipif(HAVE_VLLM, reason="checks the message shown where vLLM is not installed")
async def test_start_without_vllm_says_how_to_install() -> None:
    b = VLLMBackend("some/model")
    with pytest.raises(BackendUnavailable, match=r"pip install 'dgemma-lsp\[vllm\]'"):
        await b.start()
    await b.aclose()


def test_the_moe_backend_setting_reaches_the_engine_and_auto_leaves_vllm_s_pick() -> None:
    # the FP8 variant's experts ran 7-8% faster per step on Triton's fused MoE than on vLLM's own pick (H200)
    s, _ = Settings().merged({"backend": "vllm", "vllmMoeBackend": "triton"})
    assert VLLMBackend.from_settings(s).engine_kwargs()["moe_backend"] == "triton"
    assert "moe_backend" not in VLLMBackend("m").engine_kwargs()
    assert VLLMBackend("m", moe_backend="Flashinfer-Cutlass").engine_kwargs()["moe_backend"] == "flashinfer_cutlass"
    assert Settings().merged({"vllm_moe_backend": "Flashinfer-Cutlass"})[0].vllm_moe_backend == "flashinfer_cutlass"


def test_an_unknown_moe_backend_is_refused_with_the_names_that_work() -> None:
    with pytest.raises(ConfigError, match="vllm_moe_backend 'tritonn' is unknown: use one of auto, triton"):
        Settings().merged({"vllm_moe_backend": "tritonn"})
    with pytest.raises(BackendError, match="moe_backend 'tritonn' is unknown: use one of auto, triton"):
        VLLMBackend("m", moe_backend="tritonn")
