"""The plugin's reach on the GPU (staged vLLM, the plugin installed through the device shim's entry point): an engine
that builds DiffusionGemma (the tiny checkpoint, our backend's engine arguments) has our tuned MoE configs in force;
an engine serving another model (a tiny Llama) in the same environment has no tuned-config folder. Each engine runs in
a child process with its engine core in-process, so its state can be read (docs/vllm.md, "The plugin").

Run: ``PYTEST_ARGS=tests/gpu/test_gpu_vllm_plugin_scope.py bash tests/gpu/run_device.sh vllm`` (after the kit's
stage / install calls). Written 2026-12-05 and not yet run on a GPU: the CPU job's
``tests/backend/test_vllm_plugin_scope.py`` checks the other side (another model untouched) on vLLM's CPU build."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU: run tests/gpu/run_device.sh"),
]
pytest.importorskip("vllm", reason="needs vLLM (the device kit): run tests/gpu/run_device.sh")

PROBE = r"""
import json, os, sys
os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # the engine core (and its layers) in this process
os.environ.pop("VLLM_TUNED_CONFIG_FOLDER", None)
from vllm import LLM
kind, model = sys.argv[1], sys.argv[2]
if kind == "dgemma":
    from dgemma_lsp.backend.vllm_backend import VLLMBackend
    kw = VLLMBackend(model, canvas_length=32, max_denoising_steps=8, max_model_len=2048, gpu_memory_utilization=0.2,
                     enforce_eager=True).engine_kwargs()
else:
    kw = dict(model=model, attention_backend="TRITON_ATTN", enforce_eager=True, gpu_memory_utilization=0.2,
              max_model_len=2048, max_num_seqs=2)
llm = LLM(**kw)
print(json.dumps({"tuned": os.environ.get("VLLM_TUNED_CONFIG_FOLDER"),
                  "plugin_loaded": "dgemma_lsp.backend.vllm_plugin" in sys.modules}))
"""


def _engine(kind: str, model: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("VLLM_TUNED_CONFIG_FOLDER", "DGEMMA_DRAFT_TAP")}
    out = subprocess.run(
        [sys.executable, "-c", PROBE, kind, str(model)], env=env, capture_output=True, text=True, timeout=400
    )
    assert out.returncode == 0, out.stderr[-4000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_diffusiongemma_gets_our_moe_configs_and_another_model_does_not() -> None:
    from dgemma_lsp.backend import vllm_plugin
    from dgemma_lsp.backend.tiny_model.builder import vllm_ready_tiny_checkpoint
    from tests.support.remote_servers import ensure_tiny_llama

    tmp = Path(tempfile.mkdtemp(prefix="plugin-scope-"))
    dg = _engine("dgemma", vllm_ready_tiny_checkpoint(tmp / "dgemma"))
    print(f"DiffusionGemma engine: {dg}")
    assert dg["plugin_loaded"], dg
    assert dg["tuned"] == str(vllm_plugin.MOE_CONFIG_DIR)
    llama = _engine("llama", ensure_tiny_llama(tmp / "llama", size="vllm"))
    print(f"Llama engine: {llama}")
    assert llama["plugin_loaded"], llama  # installed and loaded in that process too ...
    # ... and the Llama runs without our MoE configs
    assert llama["tuned"] is None, llama
