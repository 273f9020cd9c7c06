"""Fused-MoE kernel configs for DiffusionGemma (E=128 experts, N=704) found by vLLM via VLLM_TUNED_CONFIG_FOLDER."""
