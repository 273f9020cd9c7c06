"""Run under vLLM's CPU build (``$DGEMMA_VLLM_PYTHON``) by tests/backend/test_vllm_plugin_scope.py: serves a model
that is not DiffusionGemma (the tiny Llama, argv[1]) with vLLM's ``LLM`` in this process (engine core in-process, so
its state can be read), greedy, and prints one JSON line: which general plugins vLLM found and loaded,
``VLLM_TUNED_CONFIG_FOLDER``, the registry's classes for Llama and for DiffusionGemma, and the generated token ids.
The test runs it with the plugin installed and without, and compares."""

from __future__ import annotations

import json
import os
import sys


def main(model: str) -> dict:
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    import importlib.metadata as md

    from vllm import LLM, ModelRegistry, SamplingParams

    llm = LLM(model=model, enforce_eager=True, max_model_len=256, dtype="float32", seed=0, max_num_seqs=2)
    outs = llm.generate(["def add(a, b):", "The quick brown fox"], SamplingParams(temperature=0.0, max_tokens=12))

    def resolved(arch: str) -> str:
        cls = ModelRegistry._try_load_model_cls(arch)
        return f"{cls.__module__}:{cls.__qualname__}" if cls is not None else ""

    return {
        "plugins": sorted(e.name for e in md.entry_points(group="vllm.general_plugins")),
        "plugin_loaded": "dgemma_lsp.backend.vllm_plugin" in sys.modules,
        "tuned_config_folder": os.environ.get("VLLM_TUNED_CONFIG_FOLDER"),
        "llama": resolved("LlamaForCausalLM"),
        "diffusiongemma": str(ModelRegistry.models.get("DiffusionGemmaForBlockDiffusion")),
        "token_ids": [list(o.outputs[0].token_ids) for o in outs],
    }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
