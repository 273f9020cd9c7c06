"""The plugin's ``draft_tap`` piece on vLLM 0.32-0.34: vLLM's own DiffusionGemma model and sampler, plus a copy
of each denoising step's argmax canvas for the requests that ask for it.

:func:`.vllm_plugin.register` registers :class:`DGemmaDraftsForConditionalGeneration` for
``DiffusionGemmaForBlockDiffusion`` only where our backend started the engine with a tap
(``DGEMMA_DRAFT_TAP``); elsewhere vLLM's classes serve untouched. The sampler subclass runs vLLM's step as it is
and then reads what the step left in vLLM's request states: ``argmax_canvas`` (the step's draft, what a commit
emits), ``step`` (0 after a commit) and ``is_encoder_phase`` (converged: the next step commits). It changes no
state and no token; it copies those rows into pinned host memory without waiting, and
:class:`.vllm_draft_tap.DraftSender` sends them from its own thread. A request is tapped when its
``extra_args`` carry ``dgemma_draft_tap``; a step with no tapped request costs one set lookup.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from vllm.logger import init_logger
from vllm.model_executor.models import diffusion_gemma as dg
from vllm.utils.torch_utils import async_tensor_h2d

from .vllm_draft_tap import DraftSender
from .vllm_plugin import activate

log = init_logger(f"vllm.{__name__}")  # under "vllm": the only logger tree with handlers in the engine process
TAP_FLAG = "dgemma_draft_tap"  # the request's extra_args key (set by our backend's map_request)


class DGemmaDraftSampler(dg.DiffusionSampler):
    """vLLM's DiffusionSampler, sending each tapped request's draft after every denoising step."""

    _sender: DraftSender | None = None
    _tapped: set[int]
    _failed = False

    @classmethod
    def wrap(cls, native: dg.DiffusionSampler, sender: DraftSender | None) -> DGemmaDraftSampler:
        """This class around the sampler vLLM's model state built (its state, shared, not copied)."""
        self = cls.__new__(cls)
        self.__dict__.update(native.__dict__)
        self._sender = sender
        self._tapped = set()
        return self

    def add_request(self, req_idx: int, sampling_params: Any) -> None:
        super().add_request(req_idx, sampling_params)
        extra = getattr(sampling_params, "extra_args", None) or {}
        if self._sender is not None and extra.get(TAP_FLAG):
            self._tapped.add(req_idx)
        else:  # the slot's previous request may have been tapped
            self._tapped.discard(req_idx)

    def __call__(self, logits: torch.Tensor, input_batch: Any, draft_logits: torch.Tensor | None = None) -> Any:
        # ``logits`` are the hidden states on 0.34 (its sampler projects them per tile): passed through untouched
        out = super().__call__(logits, input_batch, draft_logits)
        if self._tapped and input_batch.num_draft_tokens and not self._failed:
            try:
                self._send_drafts(input_batch, out.num_sampled)
            except Exception:  # the drafts are a copy: losing them must never cost the engine its step
                self._failed = True
                log.exception("dgemma_lsp plugin: draft tap off for this engine (the step's tokens are unaffected)")
        return out

    def _send_drafts(self, input_batch: Any, num_sampled: torch.Tensor) -> None:
        n = input_batch.num_reqs
        slots_np = input_batch.idx_mapping_np[:n]
        per_req_nlogits_np = np.diff(input_batch.cu_num_logits_np[: n + 1])
        rows = [i for i in range(n) if per_req_nlogits_np[i] > 0 and int(slots_np[i]) in self._tapped]
        if not rows or self._sender is None:
            return
        states = self.diffusion_states
        dev = states.argmax_canvas.device
        slots = async_tensor_h2d(slots_np[rows].astype(np.int64), device=dev)
        idx = async_tensor_h2d(rows, dtype=torch.int64, device=dev)
        step = states.step[slots]
        # converged: commit next, or a read-only request that emitted on this step
        final = states.is_encoder_phase[slots] | (num_sampled[idx] > 0)
        code = torch.where(final, -step, step).to(torch.int32)  # 0: a commit step (step reset), not sent
        pin = dev.type == "cuda"
        toks = torch.empty((len(rows), states.canvas_length), dtype=torch.int32, pin_memory=pin)
        steps = torch.empty((len(rows),), dtype=torch.int32, pin_memory=pin)
        toks.copy_(states.argmax_canvas[slots].to(torch.int32), non_blocking=pin)
        steps.copy_(code, non_blocking=pin)
        event = None
        if pin:
            event = torch.cuda.Event()
            event.record()
        req_ids = [input_batch.req_ids[i] for i in rows]
        widths = [int(states.canvas_width_np[int(slots_np[i])]) for i in rows]
        self._sender.put(event, req_ids, steps, toks, widths)


class DGemmaDraftsModelState(dg.DiffusionGemmaModelState):
    """vLLM's model state, handing the runner its own sampler inside :class:`DGemmaDraftSampler`."""

    def custom_sampler(self, sampler: Any) -> tuple[Any, Any] | None:
        native, rejection = super().custom_sampler(sampler)
        sender = DraftSender.from_env()
        log.info("dgemma_lsp plugin: draft tap on vLLM's DiffusionGemma sampler (%s)", "on" if sender else "no tap")
        return DGemmaDraftSampler.wrap(native, sender), rejection


class DGemmaDraftsForConditionalGeneration(dg.DiffusionGemmaForConditionalGeneration):
    # the plugin's process-wide pieces, for DiffusionGemma only, before its layers are built
    def __init__(self, *, vllm_config: Any, prefix: str = "") -> None:
        activate()
        super().__init__(vllm_config=vllm_config, prefix=prefix)

    @staticmethod
    def get_model_state_cls() -> type[DGemmaDraftsModelState]:
        return DGemmaDraftsModelState
