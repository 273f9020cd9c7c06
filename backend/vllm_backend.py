"""The embedded vLLM backend: an in-process ``AsyncLLM`` engine behind the backend contract.

vLLM is imported only in :meth:`VLLMBackend.start`, so this module (request mapping, feature detection, the
``max_num_seqs`` guard) imports and is tested on machines without vLLM.

Per-request diffusion options travel as ``SamplingParams.extra_args`` under vLLM's names
(``diffusion_canvas_length``, ``diffusion_seed_canvas``, ``diffusion_pinned``, ``diffusion_max_steps``), which vLLM
reads natively. Options it has no per-request form for (the request seed, entropy bound, temperatures) are reported
in ``Done.stats.extra["unsupported"]`` when a request sets them away from the engine's values; our one addition,
``dgemma_draft_tap``, only reaches an engine with the plugin's draft tap (:mod:`.vllm_plugin`). Detokenization is off
in the engine (``detokenize=False``): the backend needs token ids anyway (pins, seeds, warm starts) and decodes a
committed canvas in one call.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import tempfile
import time
import uuid
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dgemma_lsp.config import ConfigError, vllm_moe_backend_name

from .chat_tokens import chat_prompt_ids, text_ids
from .contract import (
    BackendError,
    BackendInfo,
    BackendUnavailable,
    CanvasEvent,
    CanvasRequest,
    Committed,
    Done,
    Draft,
    ProgressCallback,
    Stats,
)
from .vllm_plugin import DRAFT_TAP_ENV, PLUGIN_ENV

if TYPE_CHECKING:
    from dgemma_lsp.config import Settings

MAX_NUM_SEQS = 4  # the vendor's --max-num-seqs: DiffusionGemma engines run out of memory above it
VENDOR_CANVAS = 256
VENDOR_ENTROPY_BOUND = 0.1
DEFAULT_MODEL = "google/diffusiongemma-26B-A4B-it"
# Benchmark-only: "1" starts the engine with random weights (vLLM's ``load_format="dummy"``), so a full-size config
# plus a tokenizer (bench/gpu_step.py: build_bench_model) runs the language server's whole path without the
# checkpoint's 50 GB. Its suggestions are noise; never set it for real use.
DUMMY_WEIGHTS_ENV = "DGEMMA_VLLM_DUMMY_WEIGHTS"


def engine_died(engine: Any, exc: BaseException | None = None) -> bool:
    """Whether vLLM's engine core process is gone: ``EngineDeadError`` (vLLM's name for it) or the client's own flag."""
    if exc is not None and any(type(e).__name__ == "EngineDeadError" for e in (exc, exc.__cause__) if e):
        return True
    return bool(getattr(engine, "errored", False)) if engine is not None else False


@dataclass(slots=True)
class VLLMFeatures:
    """What the installed vLLM (plus our plugin) can do per request."""

    version: str = ""
    native_extra_args: bool = False  # vLLM >= 0.32 validates/uses diffusion_* extra_args itself
    plugin: bool = False  # our plugin is registered and enabled
    plugin_features: frozenset[str] = field(default_factory=frozenset)

    @property
    def per_request(self) -> bool:
        """Seed canvas / pins / canvas width / step cap available."""
        return self.native_extra_args

    @property
    def drafts(self) -> bool:
        return self.plugin and "draft_tap" in self.plugin_features


def detect_features(version: str | None = None, *, plugin_enabled: bool = True) -> VLLMFeatures:
    """Feature detection by capability, not by version string alone.

    ``version`` overrides the installed vLLM's (for tests); native per-request diffusion options are recognised
    by the presence of ``vllm.utils.diffusion.validate_diffusion_sampling_params`` (0.32+).
    """
    from .vllm_plugin import active_features, major_minor, vllm_has_native_options

    native = False
    if version is None:
        try:
            import vllm

            version = str(getattr(vllm, "__version__", "0"))
            native = vllm_has_native_options()
        except ImportError:
            version = ""
    else:
        native = (major_minor(version) or (0, 0)) >= (0, 32)
    # the same rule the engine processes apply in register(): the draft tap on the releases it was checked on
    feats = active_features(version=version) if plugin_enabled else frozenset()
    return VLLMFeatures(
        version=version or "", native_extra_args=native, plugin=bool(plugin_enabled and feats), plugin_features=feats
    )


def check_moe_backend(name: str) -> str:
    try:
        return vllm_moe_backend_name(name)
    except ConfigError as exc:
        raise BackendError(str(exc), kind="config") from None


def check_max_num_seqs(n: int) -> int:
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise BackendError(f"vllm max_num_seqs must be a positive integer (got {n!r})", kind="config")
    if n > MAX_NUM_SEQS:
        raise BackendError(
            f"vllm max_num_seqs={n} is refused: DiffusionGemma engines run out of GPU memory above "
            f"{MAX_NUM_SEQS} concurrent sequences (the vendor's --max-num-seqs {MAX_NUM_SEQS}); set it to 1..4",
            kind="config",
        )
    return n


def cudagraph_capture_sizes(canvas: int, max_num_seqs: int) -> list[int] | None:
    """CUDA-graph sizes that cover every denoising batch, or None where vLLM's default already does.

    vLLM captures up to ``min(2 * max_num_seqs * (1 + canvas), 512)`` tokens: a step of 4 canvases of 256 (1024
    tokens) ran without graphs (44 ms against 16 for one canvas on the H200). Its default list plus each multiple
    of the canvas up to ``max_num_seqs`` canvases.
    """
    top = canvas * max_num_seqs
    if top <= 512:
        return None
    sizes = {1, 2, 4} | set(range(8, 256, 8)) | set(range(256, 513, 16))
    sizes |= {canvas * k for k in range(1, max_num_seqs + 1)}
    return sorted(sizes)


def inductor_compile_config() -> dict[str, Any]:
    """Inductor options beside vLLM's own (vLLM adds its defaults to what is given): coordinate-descent tuning of the
    Triton kernels inductor generates (the fused norm + fp8-quantize reductions); H200, FP8 variant, batch 4: 0.10 ms
    a step less in those kernels, ~35 s more on the first, uncached compile (bench/RESULTS.md)."""
    return {"coordinate_descent_tuning": True}


@dataclass(slots=True)
class MappedRequest:
    """A CanvasRequest in vLLM's terms (plain data: SamplingParams is built from ``sampling`` in the engine)."""

    prompt_ids: list[int]
    sampling: dict[str, Any]
    canvas_width: int
    unsupported: list[str] = field(default_factory=list)  # options this engine cannot honour (reported in stats)
    early_commit: bool = False  # one canvas and the draft tap on: its final draft is the committed canvas


def map_request(
    req: CanvasRequest,
    *,
    prompt_ids: Sequence[int],
    seed_ids: Sequence[int] | None,
    engine_canvas: int,
    vocab_size: int,
    features: VLLMFeatures,
    engine_entropy_bound: float = VENDOR_ENTROPY_BOUND,
    engine_t: tuple[float, float] = (0.4, 0.8),
) -> MappedRequest:
    """Translate a request into prompt ids + SamplingParams keyword arguments.

    The canvas is ``min(req.canvas_length, engine_canvas)`` wide; a longer request runs several canvases of the
    engine's width (vLLM commits canvas after canvas up to ``max_tokens``). A seed canvas is cut to the width or
    padded with uniform noise (seeded by ``rng_seed``), as the contract says.
    """
    width = min(req.canvas_length, engine_canvas)
    extra: dict[str, Any] = {}
    unsupported: list[str] = []
    per_request = features.per_request
    if width < engine_canvas:
        if per_request:
            extra["diffusion_canvas_length"] = width
        else:
            unsupported.append("canvas_length")
    if req.max_denoising_steps:
        if per_request:
            extra["diffusion_max_steps"] = int(req.max_denoising_steps)
        else:
            unsupported.append("max_denoising_steps")
    if seed_ids is not None:
        if not per_request:
            raise BackendError(
                "seed canvases and pinned tokens need vLLM's per-request diffusion options (vLLM >= 0.33: "
                "pip install 'dgemma-lsp[vllm]')",
                kind="unsupported",
            )
        rng = random.Random(req.rng_seed)
        seed = list(seed_ids)[:width]
        seed += [rng.randrange(vocab_size) for _ in range(width - len(seed))]
        extra["diffusion_seed_canvas"] = seed
        if req.pinned:
            extra["diffusion_pinned"] = sorted({int(p) for p in req.pinned if p < width})
    # vLLM's DiffusionGemma sampler takes no per-request seed, entropy bound or temperatures: the engine's serve,
    # and the request hears so (SamplingParams.seed is never sent: vLLM refuses it for diffusion models)
    if req.rng_seed is not None:
        unsupported.append("rng_seed")
    if abs(req.entropy_bound - engine_entropy_bound) > 1e-12:
        unsupported.append("entropy_bound")
    if (req.t_min, req.t_max) != tuple(engine_t):
        unsupported.append("temperatures")
    # with the tap the final draft is the converged canvas, which the next (commit) step emits unchanged
    early = features.drafts and req.total_new_tokens <= width
    if features.drafts and (req.want_drafts or early):
        extra["dgemma_draft_tap"] = True
    sampling: dict[str, Any] = dict(
        max_tokens=req.total_new_tokens,
        detokenize=False,  # decoded here, once per committed canvas
        skip_special_tokens=False,
        extra_args=extra or None,
    )
    return MappedRequest(
        prompt_ids=list(prompt_ids), sampling=sampling, canvas_width=width, unsupported=unsupported, early_commit=early
    )


class _DraftTap:
    """Receives per-step argmax canvases from the plugin over a local zmq PULL socket."""

    def __init__(self) -> None:
        self.address = f"ipc://{tempfile.gettempdir()}/dgemma-tap-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.queues: dict[str, asyncio.Queue] = {}
        self._task: asyncio.Task | None = None
        self._sock: Any = None

    def start(self) -> None:
        import zmq
        import zmq.asyncio

        ctx = zmq.asyncio.Context.instance()
        self._sock = ctx.socket(zmq.PULL)
        self._sock.bind(self.address)
        self._task = asyncio.get_running_loop().create_task(self._pump())

    async def _pump(self) -> None:
        import numpy as np

        while True:
            parts = await self._sock.recv_multipart()
            req_id, step, payload = parts[:3]
            final = parts[3:] == [b"final"]  # the step converged: the next (commit) step emits exactly this canvas
            rid = req_id.decode()
            # the engine appends "-<8 hex>" to our request id
            base = rid.rsplit("-", 1)[0] if rid not in self.queues else rid
            q = self.queues.get(base)
            if q is not None:
                q.put_nowait(("draft", (int(step.decode()), np.frombuffer(payload, dtype=np.int32).tolist(), final)))

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
        if self._sock is not None:
            self._sock.close(linger=0)
        path = self.address.removeprefix("ipc://")
        with contextlib.suppress(OSError):
            os.unlink(path)


# The warm-up's prompt lengths (tokens). On the H200 one 16-token prompt cut the first 1k-context
# suggestion after start from 5.6 s to 1.9 s, not to the steady ~145 ms: a 1k prefill and canvas attention over 1k
# keys still compiled kernels on first use; with 16, 1001 and 1024 the first 1k suggestion took 136 ms. The first
# suggestion over 1337 or 1777 tokens still paid ~1.9 s once (3000 and 8000 did not), and prompts of
# 1500 and 2048 did not help. What explains all of it: a prefill of at most 1024 tokens runs in a CUDA graph padded
# to a captured size (1001 runs as 1024), a longer one runs eagerly at its own size; Triton specializes integer
# arguments (a token count, or 8 times it for the MoE's top-8) on divisibility by 16, and the fused MoE picks its
# tile config by the size nearest its tuned keys (1024 or 2048 here). No warm-up prompt had an odd length over 1024
# (1500 and 2048 are even; 3000 and 8000 come in chunks of 2048 and a remainder). So: odd, even and multiple-of-16
# lengths in both tile buckets over 1024. With them (H200): the first suggestion over 1337 tokens 168.5 ms (was
# 2043), over 1777 tokens 170.6 ms (was 1804); the warm-up 7.8 s (6.0 with the first three).
WARM_UP_PROMPT_LENGTHS = (16, 1001, 1024, 1101, 1102, 1104, 1801, 1802)


class VLLMBackend:
    """DiffusionGemma through an embedded vLLM engine (CUDA)."""

    name = "vllm"

    def __init__(
        self,
        model: str = "",
        *,
        canvas_length: int = VENDOR_CANVAS,
        max_denoising_steps: int | None = None,
        max_num_seqs: int = MAX_NUM_SEQS,
        gpu_memory_utilization: float = 0.8,
        max_model_len: int = 16384,
        enforce_eager: bool = False,
        enable_prefix_caching: bool = True,
        plugin: bool = True,
        load_format: str = "auto",
        tokenizer: str | None = None,
        quantization: str | None = None,
        engine_overrides: dict[str, Any] | None = None,
        eager_start: bool = False,
        early_commit: bool = True,
        warm_up: bool = True,
        moe_backend: str = "auto",
    ) -> None:
        self.model = model or DEFAULT_MODEL
        self.canvas_length = canvas_length
        self.max_denoising_steps = max_denoising_steps
        self.max_num_seqs = check_max_num_seqs(max_num_seqs)
        # vLLM picks CUTLASS's grouped GEMM for the FP8 variant's experts (per-channel weights, per-token
        # activations) on the H200, where Triton's fused MoE measured faster (10.41 / 20.56 ms per step
        # at batch 1 / 4 against 11.17 / 22.37); "auto" keeps vLLM's pick, which other GPUs and formats may need
        self.moe_backend = check_moe_backend(moe_backend)
        if not 0.05 <= gpu_memory_utilization <= 0.98:
            raise BackendError("vllm gpu_memory_utilization must be in 0.05..0.98", kind="config")
        self.gpu_memory_utilization = gpu_memory_utilization
        self.max_model_len = max_model_len
        self.enforce_eager = enforce_eager
        self.enable_prefix_caching = enable_prefix_caching
        self.plugin = plugin
        self.load_format = load_format
        self.tokenizer_name = tokenizer
        self.quantization = quantization
        self.engine_overrides = dict(engine_overrides or {})
        self.eager_start = eager_start
        # a one-canvas request ends at its final draft (the canvas vLLM's commit step would emit) and leaves the
        # engine: the commit step's forward pass and its trip through the output processor are not waited for
        self.early_commit = early_commit
        # short requests right after the engine starts, so that the Triton kernels of the sampler, the attention
        # and the MoE compile then (or load from Triton's cache) rather than during the first suggestion: on the H200
        # the first 1k-context suggestion took 5.6 s without, 136 ms with it (6 s more at start; bench/RESULTS.md)
        self.warm_up = warm_up
        self._warm_up_result: dict[str, Any] | None = None  # seconds it took, or why it failed
        self.tokenizer: Any = None
        self.features = VLLMFeatures()
        self._engine: Any = None
        self._tap: _DraftTap | None = None
        self._start_lock: asyncio.Lock | None = None
        self._vocab_size = 0
        self._eos: set[int] = set()
        self._engine_entropy_bound = VENDOR_ENTROPY_BOUND
        self._engine_t = (0.4, 0.8)
        self._start_s: float | None = None
        self._error: str | None = None
        # requests this backend has in the engine (submitted, not yet finished or aborted) and their high-water mark;
        # with vLLM's own count of unfinished requests (its output processor), what the GPU tests read
        self._live: set[str] = set()
        self.max_in_engine = 0
        self.aborted = 0

    @classmethod
    def from_settings(cls, settings: Settings) -> VLLMBackend:
        return cls(
            settings.model,
            canvas_length=settings.canvas_length,
            max_num_seqs=settings.vllm_max_num_seqs,
            gpu_memory_utilization=settings.vllm_gpu_memory_utilization,
            max_model_len=settings.vllm_max_model_len,
            enforce_eager=settings.vllm_enforce_eager,
            plugin=settings.vllm_plugin,
            eager_start=settings.vllm_eager_start,
            warm_up=settings.vllm_warm_up,
            moe_backend=settings.vllm_moe_backend,
            load_format="dummy" if os.environ.get(DUMMY_WEIGHTS_ENV) == "1" else "auto",
        )

    # ------------------------------------------------------------------ engine
    def engine_kwargs(self) -> dict[str, Any]:
        """The AsyncEngineArgs this backend starts (the vendor's recommended settings)."""
        kw: dict[str, Any] = dict(
            model=self.model,
            tokenizer=self.tokenizer_name,
            diffusion_config={"canvas_length": self.canvas_length}
            | ({"max_denoising_steps": self.max_denoising_steps} if self.max_denoising_steps else {}),
            attention_backend=None,  # vLLM's pick: FlashAttention-4 on Hopper
            max_num_seqs=self.max_num_seqs,
            generation_config="vllm",
            language_model_only=True,
            gpu_memory_utilization=self.gpu_memory_utilization,
            max_model_len=self.max_model_len,
            enable_prefix_caching=self.enable_prefix_caching,
            enforce_eager=self.enforce_eager,
            load_format=self.load_format,
        )
        if self.quantization:
            kw["quantization"] = self.quantization
        if self.moe_backend != "auto":
            kw["moe_backend"] = self.moe_backend
        compilation: dict[str, Any] = {}
        if not self.enforce_eager:
            sizes = cudagraph_capture_sizes(self.canvas_length, self.max_num_seqs)
            if sizes:
                compilation["cudagraph_capture_sizes"] = sizes
            compilation["inductor_compile_config"] = inductor_compile_config()
        if compilation:
            kw["compilation_config"] = compilation
        kw.update(self.engine_overrides)
        return {k: v for k, v in kw.items() if v is not None}

    async def start(self, progress: ProgressCallback | None = None) -> None:
        if self._engine is not None:
            return
        if self._start_lock is None:
            self._start_lock = asyncio.Lock()
        async with self._start_lock:
            if self._engine is not None:
                return
            report = progress or (lambda message, percentage=None: None)
            await self._start(report)
            if self.warm_up:
                report("warming up the kernels", None)
                await self._warm_up_engine()
                report("vLLM engine warmed up", 100)

    async def _start(self, progress: ProgressCallback) -> None:
        t0 = time.monotonic()
        progress("importing vLLM", 2)
        os.environ.setdefault("VLLM_USE_V2_MODEL_RUNNER", "1")
        os.environ.setdefault("VLLM_USE_FLASHINFER_SAMPLER", "0")
        # the server process may already hold a CUDA context (a transformers backend ran before, or the caller
        # touched the GPU): a forked engine core then cannot initialise CUDA ("Cannot re-initialize CUDA in
        # forked subprocess", seen on the H200), so the engine core is spawned
        os.environ.setdefault("VLLM_WORKER_MULTIPROC_METHOD", "spawn")
        os.environ[PLUGIN_ENV] = "1" if self.plugin else "0"
        try:
            from vllm.engine.arg_utils import AsyncEngineArgs
            from vllm.v1.engine.async_llm import AsyncLLM
        except ImportError as exc:
            raise BackendUnavailable(
                f"the vllm backend needs vLLM (>= 0.33) on a CUDA machine: pip install 'dgemma-lsp[vllm]' ({exc})"
            ) from None
        self.features = detect_features(plugin_enabled=self.plugin)
        if self.features.drafts:
            self._tap = _DraftTap()
            os.environ[DRAFT_TAP_ENV] = self._tap.address
            self._tap.start()
        progress(f"starting vLLM {self.features.version} engine for {self.model}", 10)
        try:
            args = AsyncEngineArgs(**self.engine_kwargs())
            self._engine = AsyncLLM.from_engine_args(args)
        except Exception as exc:  # vLLM raises many types; the user needs one line
            self._error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            if self._tap is not None:
                self._tap.close()
                self._tap = None
            raise BackendUnavailable(f"vLLM engine failed to start: {self._error}") from exc
        progress("loading tokenizer", 90)
        self.tokenizer = self._engine.get_tokenizer()
        self._vocab_size = int(self._engine.model_config.get_vocab_size())
        eos = getattr(self.tokenizer, "eos_token_id", None)
        self._eos = {eos} if isinstance(eos, int) else set(eos or [])
        gen = self._engine.model_config.try_get_generation_config() or {}
        sc = gen.get("sampler_config") or {}
        self._engine_entropy_bound = float(sc.get("entropy_bound", VENDOR_ENTROPY_BOUND))
        self._engine_t = (float(gen.get("t_min", 0.4)), float(gen.get("t_max", 0.8)))
        self._start_s = time.monotonic() - t0
        progress("vLLM engine ready", 100)

    # ---------------------------------------------------------------- helpers
    def count_tokens(self, text: str) -> int:
        if self.tokenizer is None:
            return max(1, len(text) // 4)  # before start: a cheap estimate, never a model load on the keystroke path
        return len(self.tokenizer.encode(text, add_special_tokens=False))

    def _prompt_ids(self, req: CanvasRequest) -> list[int]:
        if req.prompt_ids is not None:
            return list(req.prompt_ids)
        # the document's text stays text: a "<start_of_turn>" in it must not open a turn (chat_tokens)
        return chat_prompt_ids(self.tokenizer, [{"role": m.role, "content": m.content} for m in req.messages or ()])

    def _seed_ids(self, req: CanvasRequest) -> list[int] | None:
        if req.seed_canvas is not None:
            return [int(t) for t in req.seed_canvas]
        if req.seed_text is not None:
            return text_ids(self.tokenizer, req.seed_text)
        return None

    def _decode(self, ids: Sequence[int]) -> tuple[str, bool]:
        cut = len(ids)
        for i, t in enumerate(ids):
            if t in self._eos:
                cut = i
                break
        return self.tokenizer.decode(list(ids[:cut]), skip_special_tokens=True), cut < len(ids)

    # --------------------------------------------------------------- generate
    def _sampling_params(self, sampling: dict[str, Any]) -> Any:
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        return SamplingParams(**sampling, output_kind=RequestOutputKind.DELTA)

    def _tokens_prompt(self, ids: list[int]) -> Any:
        from vllm.inputs import TokensPrompt

        return TokensPrompt(prompt_token_ids=ids)

    async def _warm_up_engine(self) -> None:
        """Short canvases (32 tokens, two steps, drafts on) through the whole path, one per prompt length of
        :data:`WARM_UP_PROMPT_LENGTHS`, each with its own first token so no prefix-cache hit shortens its prefill. A
        failure here is not the caller's: it is recorded in ``info().detail["warm_up"]`` and the engine stays up."""
        t0 = time.monotonic()
        base = list(self.tokenizer.encode("def add(a, b):\n    return a + b\n", add_special_tokens=False)) or [0]
        room = max(1, self.max_model_len - self.canvas_length - 1)
        try:
            for k, n in enumerate(sorted({min(n, room) for n in WARM_UP_PROMPT_LENGTHS})):
                ids = [base[(i + k) % len(base)] for i in range(n)]
                req = CanvasRequest(prompt_ids=ids, canvas_length=min(32, self.canvas_length), max_denoising_steps=2,
                                    want_drafts=True, rng_seed=0)  # fmt: skip
                async for _ in self.generate(req):
                    pass
            self._warm_up_result = {"s": round(time.monotonic() - t0, 3)}
        except BackendError as exc:
            self._warm_up_result = {"error": str(exc)}

    def engine_requests(self) -> int | None:
        """vLLM's count of unfinished requests (its output processor's); None before start or on an unknown vLLM."""
        try:
            return int(self._engine.output_processor.get_num_unfinished_requests())
        except Exception:
            return None

    def _dead(self, exc: BaseException | None = None) -> BackendUnavailable:
        why = f": {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}" if exc is not None else ""
        self._error = f"the vLLM engine process died{why}"
        return BackendUnavailable(self._error, kind="dead")

    async def generate(self, request: CanvasRequest) -> AsyncGenerator[CanvasEvent, None]:
        if self._engine is None:  # (not while start() warms the engine up: that holds the start lock)
            await self.start()
        if engine_died(self._engine):
            raise self._dead()
        t0 = time.monotonic()
        prompt_ids = self._prompt_ids(request)
        mapped = map_request(
            request,
            prompt_ids=prompt_ids,
            seed_ids=self._seed_ids(request),
            engine_canvas=self.canvas_length,
            vocab_size=self._vocab_size,
            features=self.features,
            engine_entropy_bound=self._engine_entropy_bound,
            engine_t=self._engine_t,
        )
        params = self._sampling_params(mapped.sampling)
        t_prepared = time.monotonic() - t0
        rid = f"dg{uuid.uuid4().hex[:16]}"
        queue: asyncio.Queue = asyncio.Queue()
        tap = self._tap
        tapped = tap is not None and "dgemma_draft_tap" in (mapped.sampling.get("extra_args") or {})
        if tap is not None and tapped:
            tap.queues[rid] = queue
        # near max_model_len vLLM commits a shorter canvas than the draft: let the engine's commit decide there
        early = tapped and self.early_commit and mapped.early_commit
        early = early and len(prompt_ids) + mapped.canvas_width <= self.max_model_len

        async def pump() -> None:
            try:
                async for out in self._engine.generate(self._tokens_prompt(prompt_ids), params, rid):
                    queue.put_nowait(("out", out))
            except Exception as exc:  # surfaced to the consumer as one BackendError line
                queue.put_nowait(("error", exc))
            queue.put_nowait(("end", None))

        task = asyncio.get_running_loop().create_task(pump())
        self._live.add(rid)
        self.max_in_engine = max(self.max_in_engine, len(self._live), self.engine_requests() or 0)
        stats = Stats(backend=self.name, model=self.model, prompt_tokens=len(prompt_ids))
        if mapped.unsupported:
            stats.extra["unsupported"] = mapped.unsupported
        stats.extra["vllm"] = self.features.version
        canvas = _CanvasStream(request, mapped, stats, self._decode, self._eos, t0, t_prepared, early=early)
        finished = False
        try:
            while True:
                kind, payload = await self._next(queue, request)
                if kind == "wait":
                    continue
                if kind == "error":
                    if engine_died(self._engine, payload):
                        raise self._dead(payload) from payload
                    raise BackendError(f"vLLM request failed: {type(payload).__name__}: {payload}") from payload
                if kind == "end":
                    break
                events, stop, finished = canvas.on_draft(*payload) if kind == "draft" else canvas.on_output(payload)
                for ev in events:
                    yield ev
                if stop:
                    break
        finally:
            if self._tap is not None:
                self._tap.queues.pop(rid, None)
            self._live.discard(rid)
            if not finished and not engine_died(self._engine):
                # cancelled, deadline, consumer closed the stream or stop_at_newline: the request leaves the engine
                self.aborted += 1
                with contextlib.suppress(Exception):
                    await self._engine.abort(rid)
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        yield canvas.done(time.monotonic() - t0)

    @staticmethod
    async def _next(queue: asyncio.Queue, request: CanvasRequest) -> tuple[str, Any]:
        """The next item from the engine (``out`` / ``draft`` / ``error`` / ``end``), or ``wait`` after a short
        timeout so cancellation and the deadline are checked while the engine computes."""
        if request.cancel is not None and request.cancel.cancelled:
            from .contract import Cancelled

            raise Cancelled()
        timeout = 0.005 if request.cancel is not None else None
        rem = request.remaining()
        if rem is not None:
            if rem <= 0:
                from .contract import DeadlineExceeded

                raise DeadlineExceeded()
            timeout = min(timeout or rem, rem)
        try:
            return await asyncio.wait_for(queue.get(), timeout) if timeout else await queue.get()
        except TimeoutError:
            return "wait", None

    def info(self) -> BackendInfo:
        return BackendInfo(
            name=self.name,
            model=self.model,
            device="cuda",
            ready=self._engine is not None,
            detail={
                "vllm": self.features.version,
                "native_extra_args": self.features.native_extra_args,
                "plugin": self.features.plugin,
                "plugin_features": sorted(self.features.plugin_features),
                "canvas_length": self.canvas_length,
                "max_num_seqs": self.max_num_seqs,
                "start_s": self._start_s,
                "warm_up": self._warm_up_result,
                "error": self._error,
                "load_format": self.load_format,
                "requests_in_engine": self.engine_requests(),
                "max_requests_in_engine": self.max_in_engine,
                "aborted": self.aborted,
            },
        )

    async def aclose(self) -> None:
        eng, self._engine = self._engine, None
        if eng is not None:
            with contextlib.suppress(Exception):  # a dead engine's client may fail to shut down what is gone
                eng.shutdown()
        if self._tap is not None:
            self._tap.close()
            self._tap = None


class _CanvasStream:
    """Turns one request's engine outputs (committed canvases) and tapped drafts (one per step) into the contract's
    events, in order: a draft of the next canvas that vLLM's asynchronous scheduling runs before this canvas's
    commit reaches us waits for that commit. With ``early`` (one canvas, drafts tapped) the final draft is the
    commit: the converged argmax canvas, cut to the width, ``max_tokens`` and the first end token.

    Pinned positions of the first canvas show their seed tokens in every draft and in the commit: vLLM holds them in
    the canvas it denoises but emits (and taps) the argmax canvas, where the model may have put something else."""

    def __init__(
        self,
        request: CanvasRequest,
        mapped: MappedRequest,
        stats: Stats,
        decode: Any,
        eos: Any,
        t0: float,
        t_prepared: float,
        *,
        early: bool,
    ) -> None:
        self.request, self.mapped, self.stats, self.decode, self.eos = request, mapped, stats, decode, eos
        self.t0, self.early = t0, early
        self.all_ids: list[int] = []
        self.texts: list[str] = []
        self.canvas_index = 0
        self.step = 0
        self.ahead: list[tuple[int, list[int]]] = []  # drafts of the next canvas that came before this one's commit
        # where a generation's time goes, from generate()'s start (ms): the prompt and request mapping, each draft's
        # arrival, each commit's; the server turns it into latency samples (lsp/stats.py)
        self.timeline: dict[str, Any] = {"prepare": t_prepared * 1e3, "drafts": [], "commits": []}
        stats.extra["timeline_ms"] = self.timeline
        extra = mapped.sampling.get("extra_args") or {}
        seed = extra.get("diffusion_seed_canvas")
        self.pins = [(p, seed[p]) for p in extra.get("diffusion_pinned") or ()] if seed else []

    def _hold_pins(self, ids: list[int]) -> list[int]:
        if not self.pins or self.canvas_index:
            return ids
        ids = list(ids)
        for p, t in self.pins:
            if p < len(ids):
                ids[p] = t
        return ids

    def _commit(self, new_ids: list[int]) -> tuple[Committed, bool]:
        self.all_ids.extend(new_ids)
        text, eos = self.decode(new_ids)
        self.texts.append(text)
        self.stats.canvases += 1
        self.stats.steps_per_canvas.append(self.step)
        if self.stats.first_commit_s is None:
            self.stats.first_commit_s = time.monotonic() - self.t0
        self.timeline["commits"].append((time.monotonic() - self.t0) * 1e3)
        ev = Committed(canvas_index=self.canvas_index, steps=self.step, text=text, token_ids=new_ids, eos=eos)
        self.canvas_index += 1
        self.step = 0
        return ev, eos or (self.request.stop_at_newline and "\n" in text)

    def _draft(self, step_no: int, ids: list[int]) -> Draft:
        if self.stats.first_draft_s is None:
            self.stats.first_draft_s = time.monotonic() - self.t0
        self.timeline["drafts"].append((time.monotonic() - self.t0) * 1e3)
        ids = self._hold_pins(ids[: self.mapped.canvas_width])
        text, _ = self.decode(ids)
        return Draft(canvas_index=self.canvas_index, step=step_no, text=text, token_ids=ids)

    def on_draft(self, step_no: int, ids: list[int], final: bool) -> tuple[list[CanvasEvent], bool, bool]:
        """A tapped step: (events, stop, finished)."""
        if self.ahead or step_no <= self.step:
            # the step count went back: a step of the next canvas, which waits for this canvas's commit (or is dropped)
            self.ahead.append((step_no, ids))
            return [], False, False
        self.step = step_no
        events: list[CanvasEvent] = [self._draft(step_no, ids)] if self.request.want_drafts else []
        if final and self.early:
            new_ids = self._hold_pins(ids[: min(self.mapped.canvas_width, self.request.total_new_tokens)])
            cut = next((i + 1 for i, t in enumerate(new_ids) if t in self.eos), len(new_ids))
            self.stats.extra["early_commit"] = True
            ev, _ = self._commit(new_ids[:cut])
            events.append(ev)
            return events, True, False
        return events, False, False

    def on_output(self, out: Any) -> tuple[list[CanvasEvent], bool, bool]:
        """An engine output (a committed canvas, or the end): (events, stop, finished)."""
        events: list[CanvasEvent] = []
        new_ids = self._hold_pins(list(out.outputs[0].token_ids))
        if new_ids:
            ev, stop = self._commit(new_ids)
            events.append(ev)
            if stop:
                return events, True, bool(out.finished)  # an engine that stopped by itself needs no abort
            pending, self.ahead = self.ahead, []
            if len(self.all_ids) < self.request.total_new_tokens and not out.finished:
                for step_no, ids in pending:
                    self.step = step_no
                    if self.request.want_drafts:
                        events.append(self._draft(step_no, ids))
        if out.finished:
            return events, True, True
        return events, False, False

    def done(self, wall_s: float) -> Done:
        stats = self.stats
        stats.tokens = len(self.all_ids)
        stats.wall_s = wall_s
        steps = sum(stats.steps_per_canvas)
        stats.tokens_per_forward = stats.tokens / steps if steps else 0.0
        return Done(text="".join(self.texts), stats=stats)
