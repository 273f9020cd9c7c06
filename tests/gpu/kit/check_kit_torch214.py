"""Checks an installed torch 2.14 kit (KIT=0.33 or 0.34): versions, the modules the text-only AsyncLLM path imports, sm_90 code that runs,
and FlashAttention-3 (its kernels load: vLLM's Hopper pick starts from FA3 and moves DiffusionGemma to FA4 only where FA3
is available, vllm/v1/attention/backends/fa_utils.py).

usage: KIT=0.34 PYTHONPATH=/tmp/site-0.34 python3 tests/gpu/kit/check_kit_torch214.py [--cpu]

install.sh runs it on the device after unpacking; ``--cpu`` (a machine without a GPU, e.g. where the kit is built)
checks versions and imports only. Exit 1 with every failure listed.
"""

from __future__ import annotations

import importlib
import os
import sys
import traceback

KIT = os.environ.get("KIT", "0.33")
WANT = {"torch": "2.14.0", "vllm": f"{KIT}.0", "triton": "3.8.0"}
# LLM / AsyncLLM on the CUDA platform with TRITON_ATTN, both model runners, the DiffusionGemma model and its
# sampler, fp8 / compressed-tensors checkpoints, and what our plugin and the GPU tests import
MODULES = (
    "vllm.engine.arg_utils",
    "vllm.v1.engine.async_llm",
    "vllm.v1.engine.core",
    "vllm.v1.executor.uniproc_executor",
    "vllm.v1.executor.multiproc_executor",
    "vllm.platforms.cuda",
    "vllm.v1.worker.gpu_worker",
    "vllm.v1.worker.gpu.model_runner",
    "vllm.v1.attention.backends.triton_attn",
    "vllm.v1.attention.ops.triton_unified_attention",
    "vllm.model_executor.models.diffusion_gemma",
    "vllm.model_executor.models.diffusion_gemma_sampler",
    "vllm.model_executor.layers.fused_moe.experts.triton_moe",
    "vllm.model_executor.layers.quantization.fp8",
    "vllm.model_executor.layers.quantization.compressed_tensors.compressed_tensors",
    "vllm.utils.diffusion",
    "vllm.vllm_flash_attn",
    "vllm._custom_ops",
    "compressed_tensors",
    "pygls.lsp.server",
    "lsprotocol.types",
    "pytest_lsp",
    "pytest_asyncio",
    "json_repair",
)
# 0.34 imports CuTe DSL and quack at every engine's warm-up (0.33 only in kernels of other models)
MODULES_034 = ("cutlass", "quack", "vllm.vllm_flash_attn.cute.interface")


FA3_SO = "vllm/vllm_flash_attn/_vllm_fa3_C.abi3.so"


def _fa3(bad: list[str], cpu: bool) -> None:
    """FA3's kernels are in the kit (``--cpu``) and, on the GPU, load (the kit once stripped them, and vLLM then falls
    back to another attention backend without a word)."""
    import os

    import vllm

    if not os.path.isfile(os.path.join(os.path.dirname(os.path.dirname(vllm.__file__)), FA3_SO)):
        bad.append(f"FA3: {FA3_SO} not in the kit")
        return
    if cpu:
        return
    import torch
    from vllm.vllm_flash_attn import flash_attn_interface as fai

    if not fai.FA3_AVAILABLE:
        bad.append(f"FA3 does not import: {fai.FA3_UNAVAILABLE_REASON}")
        return
    names = [a.name for a in torch.ops._vllm_fa3_C.fwd.default._schema.arguments]
    print(f"kit: FA3 loads, forward op with {len(names)} arguments")


def _gpu(bad: list[str]) -> None:
    import torch
    import triton
    import triton.language as tl

    if not torch.cuda.is_available():
        bad.append("torch sees no GPU")
        return
    if torch.cuda.get_device_capability() != (9, 0) or "sm_90" not in torch.cuda.get_arch_list():
        bad.append(f"not sm_90: {torch.cuda.get_device_capability()} {torch.cuda.get_arch_list()}")
    x = torch.arange(1 << 20, device="cuda", dtype=torch.float32)
    if float((x * 2).sum()) != float(x.sum()) * 2:  # libtorch_cuda's own (zeroed-around) sm_90 kernels
        bad.append("torch elementwise / reduction on the GPU")
    a = torch.randn(64, 64, device="cuda", dtype=torch.bfloat16)
    torch.testing.assert_close((a @ a).float(), a.float() @ a.float(), rtol=0.05, atol=0.5)
    conv = torch.nn.functional.conv2d(torch.ones(1, 1, 4, 4, device="cuda"), torch.ones(1, 1, 3, 3, device="cuda"))
    if float(conv.sum()) != 36.0:  # cuDNN 9.24 (torch's runtime version check runs here)
        bad.append("cuDNN conv2d")
    print(f"kit: cuDNN {torch.backends.cudnn.version()}, NCCL {torch.cuda.nccl.version()}")
    from vllm import _custom_ops as ops

    h = torch.randn(8, 256, device="cuda", dtype=torch.bfloat16)
    w = torch.ones(256, device="cuda", dtype=torch.bfloat16)
    out = torch.empty_like(h)
    ops.rms_norm(out, h, w, 1e-6)  # vLLM's _C (zeroed-around) sm_90 code
    ref = h.float() * torch.rsqrt(h.float().pow(2).mean(-1, keepdim=True) + 1e-6)
    torch.testing.assert_close(out.float(), ref, rtol=0.02, atol=0.02)

    @triton.jit
    def _add_one(p, n, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(p + i, tl.load(p + i, mask=i < n) + 1, mask=i < n)

    y = torch.zeros(1000, device="cuda")
    _add_one[(4,)](y, 1000, BLOCK=256)  # triton 3.8 with its own ptxas for sm_90
    if float(y.sum()) != 1000.0:
        bad.append("triton kernel")


def main(argv: list[str]) -> int:
    cpu = "--cpu" in argv
    bad: list[str] = []
    for name, want in WANT.items():
        try:
            mod = importlib.import_module(name)
        except Exception as exc:
            bad.append(f"{name} ({type(exc).__name__}: {exc})")
            continue
        got = mod.__version__.split("+")[0]
        if got != want:
            bad.append(f"{name} {mod.__version__} from {mod.__file__}, want {want}")
    for name in MODULES + (MODULES_034 if KIT == "0.34" else ()):
        try:
            importlib.import_module(name)
        except Exception as exc:
            bad.append(f"{name} ({type(exc).__name__}: {exc})")
    if not bad:
        try:
            _fa3(bad, cpu)
        except Exception as exc:
            traceback.print_exc()
            bad.append(f"FA3 check ({type(exc).__name__}: {exc})")
    if not cpu and not bad:
        try:
            _gpu(bad)
        except Exception as exc:
            traceback.print_exc()
            bad.append(f"GPU check ({type(exc).__name__}: {exc})")
    import torch

    where = torch.__file__.rsplit("/torch/", 1)[0]
    print(
        f"kit {KIT}: torch {torch.__version__} from {where}; "
        + (f"MISSING: {'; '.join(bad)}" if bad else "all checks pass")
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
