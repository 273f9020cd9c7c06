"""Our denoising kernels inside transformers' DiffusionGemma ``generate`` (for the transformers backend on CUDA).

:func:`use_kernels` gives a model a subclass whose ``_denoising_step`` runs one Triton pass over the logits
(temperature, argmax, sample, entropy, the bf16 self-conditioning logits) and the sort-free acceptance, instead of
``softmax`` + ``multinomial`` + ``argmax`` + two ``Categorical(...).entropy()`` passes. Semantics are
transformers' (see :mod:`.reference`), with Gumbel-max sampling on in-kernel hashed noise drawn from a seed that
comes from torch's generator, so ``torch.manual_seed`` still makes runs reproducible.
"""

from __future__ import annotations

from typing import Any

import torch

from .denoise import denoise_step, kernels_usable

_CACHE: dict[type, type] = {}


class KernelDenoisingMixin:
    """Overrides ``DiffusionGemmaGenerationMixin._denoising_step``; everything else stays transformers'."""

    model: Any  # the DiffusionGemma model of the transformers class this mixes into

    def _denoising_step(self, *args: Any, **kwargs: Any):
        # transformers calls this with keywords only; names other than ours (``cache`` in 5.24,
        # ``past_key_values`` in older releases, model kwargs) pass through to the decoder untouched
        from transformers.models.diffusion_gemma.generation_diffusion_gemma import (
            LinearTemperatureScheduleLogitsProcessor,
            StableAndConfidentStoppingCriteria,
        )

        names = ("decoder_forward", "current_canvas", "argmax_canvas", "input_ids", "decoder_position_ids",
                 "self_conditioning_logits", "mask_mapping", "finished_denoising", "cur_step", "sampler",
                 "logits_processor", "diffusion_stopping_criteria")  # fmt: skip
        if args or any(n not in kwargs for n in names):
            return super()._denoising_step(*args, **kwargs)  # type: ignore[misc]
        rest = {k: v for k, v in kwargs.items() if k not in names}
        current_canvas = kwargs["current_canvas"]
        logits_processor = kwargs["logits_processor"]
        crit = kwargs["diffusion_stopping_criteria"]
        # Observers (``observes_only``: they read the logits and change nothing, like the backend's confidence
        # recorder) do not stop the kernel step: they are shown the raw logits, as in transformers' own step.
        observers = [p for p in logits_processor if getattr(p, "observes_only", False)]
        procs = [p for p in logits_processor if not getattr(p, "observes_only", False)]
        simple = (
            kernels_usable(current_canvas.device)
            and len(procs) == 1
            and isinstance(procs[0], LinearTemperatureScheduleLogitsProcessor)
            and (crit is None or type(crit) is StableAndConfidentStoppingCriteria)
        )
        if not simple:  # custom processors or criteria: transformers' own step
            return super()._denoising_step(**kwargs)  # type: ignore[misc]
        argmax_canvas = kwargs["argmax_canvas"]
        self_conditioning_logits = kwargs["self_conditioning_logits"]
        finished_denoising = kwargs["finished_denoising"]
        cur_step = kwargs["cur_step"]
        sampler = kwargs["sampler"]
        out = kwargs["decoder_forward"](
            decoder_input_ids=current_canvas,
            self_conditioning_logits=self_conditioning_logits,
            decoder_attention_mask=kwargs["mask_mapping"],
            decoder_position_ids=kwargs["decoder_position_ids"],
            **rest,
        )
        proc = procs[0]
        raw = out.logits
        for observer in observers:
            observer(kwargs["input_ids"], raw)
        b, c, v = raw.shape
        temperature = proc.t_min + (proc.t_max - proc.t_min) * (cur_step / proc.max_denoising_steps)
        emb_dtype = self.model.decoder.embed_tokens.weight.dtype
        seed = int(torch.randint(0, 2**31 - 1, (1,)).item())
        res = denoise_step(
            raw.view(b * c, v),
            float(temperature),
            renoise_tokens=torch.randint(0, sampler.vocab_size, (b * c,), device=raw.device),
            seed=seed,
            entropy_bound=float(sampler.entropy_bound),
            segments=list(range(0, b * c + 1, c)),
            scaled_dtype=emb_dtype,
            impl="triton",
        )
        sampler.accepted_token_mask = res.accepted.view(b, c)
        new_current = res.next_canvas.view(b, c)
        new_argmax = res.argmax.view(b, c)
        assert res.scaled_logits is not None  # scaled_dtype was given
        scaled = res.scaled_logits.view(b, c, v)
        if crit is not None:
            if finished_denoising.any():
                new_argmax = torch.where(finished_denoising[:, None], argmax_canvas, new_argmax)
                new_current = torch.where(finished_denoising[:, None], current_canvas, new_current)
                scaled = torch.where(finished_denoising[:, None, None], self_conditioning_logits, scaled)
            finished_denoising |= _stable_and_confident(crit, new_argmax, res.entropy.view(b, c))
        return new_current, new_argmax, scaled, finished_denoising


def _stable_and_confident(crit: Any, argmax_canvas: torch.Tensor, entropy: torch.Tensor) -> torch.Tensor:
    """transformers' StableAndConfidentStoppingCriteria, fed the kernel's entropies (no second vocabulary pass)."""
    if crit.stability_threshold == 0:
        stable = torch.ones(argmax_canvas.shape[0], dtype=torch.bool, device=argmax_canvas.device)
    else:
        if crit.argmax_canvas_history is None:
            crit.argmax_canvas_history = torch.full(
                (crit.stability_threshold, *argmax_canvas.shape), -1, dtype=argmax_canvas.dtype,
                device=argmax_canvas.device,
            )  # fmt: skip
        stable = (crit.argmax_canvas_history == argmax_canvas[None]).all(dim=-1).all(dim=0)
        crit.argmax_canvas_history = torch.roll(crit.argmax_canvas_history, shifts=-1, dims=0)
        crit.argmax_canvas_history[-1] = argmax_canvas
    return stable & (entropy.mean(dim=-1) < crit.confidence_threshold)


def use_kernels(model: Any) -> Any:
    """Give ``model`` (a DiffusionGemmaForBlockDiffusion) the kernel denoising step; returns the same object."""
    cls = type(model)
    if issubclass(cls, KernelDenoisingMixin):
        return model
    sub = _CACHE.get(cls)
    if sub is None:
        sub = type(f"Kernel{cls.__name__}", (KernelDenoisingMixin, cls), {})
        _CACHE[cls] = sub
    model.__class__ = sub
    return model
