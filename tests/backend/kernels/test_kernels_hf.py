"""The kernel denoising step inside transformers' generate (tiny checkpoint, Triton interpreter on CPU)."""

from __future__ import annotations

from tests.support.interpreter_mode import enter_interpreter_mode, rerun_if_late

# before triton is imported (see tests/support/interpreter_mode.py)
_LATE = enter_interpreter_mode()

import pytest  # noqa: E402
import torch  # noqa: E402

from dgemma_lsp.backend.kernels.hf import KernelDenoisingMixin, use_kernels  # noqa: E402
from dgemma_lsp.backend.tiny_model.builder import ensure_tiny_checkpoint  # noqa: E402


@pytest.fixture(scope="module")
def tiny_models():
    from transformers import DiffusionGemmaForBlockDiffusion

    path = ensure_tiny_checkpoint()
    ref = DiffusionGemmaForBlockDiffusion.from_pretrained(path).eval()
    fast = use_kernels(DiffusionGemmaForBlockDiffusion.from_pretrained(path).eval())
    return ref, fast


def test_use_kernels_swaps_in_the_kernel_step(tiny_models) -> None:
    ref, fast = tiny_models
    assert isinstance(fast, KernelDenoisingMixin) and not isinstance(ref, KernelDenoisingMixin)
    assert use_kernels(fast) is fast


def test_one_step_draft_equals_transformers(tiny_models) -> None:
    """With one denoising step the committed canvas is the argmax of one deterministic forward: identical."""
    ref, fast = tiny_models
    prompt = torch.tensor([[2, 40, 41, 42, 43, 44]])
    outs = []
    for model in (ref, fast):
        torch.manual_seed(123)
        out = model.generate(prompt, max_new_tokens=model.config.canvas_length, max_denoising_steps=1)
        outs.append(out.sequences)
    assert torch.equal(outs[0], outs[1])


def test_full_generation_runs_and_stays_in_vocabulary(tiny_models) -> None:
    _, fast = tiny_models
    torch.manual_seed(0)
    c = fast.config.canvas_length
    out = fast.generate(torch.tensor([[2, 50, 51]]), max_new_tokens=c, max_denoising_steps=2)
    new = out.sequences[0, 3:]
    assert 0 < new.numel() <= c
    assert int(new.max()) < fast.config.text_config.vocab_size


def test_an_observing_processor_keeps_the_kernel_step(tiny_models, monkeypatch) -> None:
    """The backend always adds its confidence recorder to the processors; the kernel step must still run (it
    falls back to transformers' step for any processor that changes logits) and show the recorder the logits."""
    from transformers import LogitsProcessorList

    from dgemma_lsp.backend.kernels import hf
    from dgemma_lsp.backend.transformers_backend import _KeepLogits

    _, fast = tiny_models
    calls = []
    real = hf.denoise_step
    monkeypatch.setattr(hf, "denoise_step", lambda *a, **k: calls.append(1) or real(*a, **k))
    keep = _KeepLogits()
    torch.manual_seed(0)
    c = fast.config.canvas_length
    fast.generate(
        torch.tensor([[2, 50, 51]]),
        max_new_tokens=c,
        max_denoising_steps=2,
        logits_processor=LogitsProcessorList([keep]),
    )
    assert calls, "the kernel step was skipped"
    assert keep.first is not None and keep.first.shape[-1] == fast.config.text_config.vocab_size


rerun_if_late(globals(), __file__, _LATE)
