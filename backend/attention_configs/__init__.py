"""Attention tiles per GPU for the plugin's ``attention`` piece (:func:`..vllm_attention.attention_tuning`), one file
per GPU named as vLLM names its fused-MoE configs: ``device_name=<torch's device name, spaces as _>.json``."""
