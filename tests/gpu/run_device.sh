#!/usr/bin/env bash
# GPU tests + benchmark on the H200 device, in the three runs that stage the vLLM 0.26 kit
# (kit built here first: `bash ../shared/device/build-vllm-kit.sh` from the repo root; see docs/vllm.md).
#   run 1: carry .kit1   command: bash tests/gpu/run_device.sh 1   (kernel parity on GPU; FULL=1: floors, kernels)
#   run 2: carry .kit2   command: bash tests/gpu/run_device.sh 2   (stage; FULL=1: transformers full-size steps)
#   run 3: carry .kit3   command: bash tests/gpu/run_device.sh 3   (install vLLM; tune the fused-MoE config; native)
#   run b: carry nothing command: bash tests/gpu/run_device.sh b   (vLLM full size: native vs ours, suggestions)
#   run 4: carry nothing command: bash tests/gpu/run_device.sh 4   (vLLM tiny checkpoint end to end; warm only)
#   alone: carry nothing command: bash tests/gpu/run_device.sh t   (transformers only, no kit)
#   alone: carry nothing command: bash tests/gpu/run_device.sh g   (kernel parity + transformers backend on CUDA)
# Each run must start within ~30 s of the previous one ending (the machine keeps /tmp while warm).
# Two-part kit (one run less; session 2): `PART_MB=63 bash ../shared/device/build-vllm-kit.sh`, move
# backend/models/small/model.safetensors out of the tree for the two kit runs (each carries <= 64 MiB with the tree),
#   run A: carry .kit1  command: bash .kit1/stage.sh
#   run B: carry .kit2  command: bash .kit2/install.sh && bash tests/gpu/run_device.sh 4   (or 3's tuning, b ...)
# Three-part kit with the small model's training alongside (session 3; `bash ../shared/device/build-vllm-kit.sh`,
# parts of 42 MB, so the tree travels whole, model included):
#   run A: carry .kit1 .train_data/pack.jsonl.gz  command: bash tests/gpu/run_device.sh A
#          (stage; start training the small model in the background, TRAIN_MIN minutes; GPU kernel/backend tests)
#   run B: carry .kit2  command: bash tests/gpu/run_device.sh B   (stage)
#   run C: carry .kit3  command: bash tests/gpu/run_device.sh C
#          (install vLLM; tiny vLLM tests; collect the trained model; tune the fused-MoE config; suggestions)
#   run D: carry nothing command: bash tests/gpu/run_device.sh D   (the whole benchmark, every engine, one run)
#   on a fresh machine, longer training beside the tiny vLLM tests: A2 (carry .kit1 and the pack), B, C2 (carry .kit3)
# Session 4, the small model's training alone (no kit): T then T2 (each carries .train_data/pack.jsonl.gz; TRAIN_MIN,
# TRAIN_INIT, TRAIN_ARGS pass through), the second within ~30 s of the first. v5: TRAIN_INIT=/tmp/dg/dgemma_lsp/backend/
# models/small (v4, in the tree) TRAIN_ARGS="--cuda-graphs ..." (the exact lines: backend/train/RUN_LOG_5.txt).
# Session 8, issue 4 alone (kit built here first; three runs that stage it, then one benchmark run, all while warm):
#   run A8: carry .kit1  command: bash tests/gpu/run_device.sh A8  (stage; kernel parity, transformers backend on
#           CUDA, the sampling-kernel sweep: its fastest launch shape goes to /tmp/kernel.env for the engines)
#   run B:  carry .kit2  command: bash tests/gpu/run_device.sh B   (stage)
#   run C8: carry .kit3  command: bash tests/gpu/run_device.sh C8  (install vLLM; tiny vLLM tests; profile of
#           denoising steps at batch 1 / 4 with our plugin and CUDA graphs up to 4 canvases)
#   run D8: carry nothing command: bash tests/gpu/run_device.sh D8 (native vs ours, single-line suggestions on
#           canvas-64 and canvas-32 engines)
#   second machine: A9 (carry .kit1: stage), B, C9 (carry .kit3: install; attention tile sweep; tiny tests;
#           profile and suggestions with the picked tiles), then D8 (the whole comparison with the tiles)
# Session 9, issue 8 alone (no kit; each carries .train_data/pack.jsonl.gz where it trains):
#   P: bench/train_step.py (P_ARGS: shapes, variants; the training step's time and kernel table)
#   T, T2 as in session 4 (the next two-run command: docs/small-model.md, "Rebuilding it")
#   H: the training loop for TRAIN_MIN minutes with --host-threads 2, then with torch's default threads
# Session 10, issue 4 with the device time issue 8 left: A9 (carry .kit1), B (.kit2), C10 (.kit3: install; the
#   attention tile sweep with its causal check; the tiny vLLM tests with the picked tiles, within C10_BUDGET seconds)
# Session 11, issue 4 (FlashAttention-3 for the sliding layers, the softcap in the row kernel): kit built here, then
#   `bash tests/gpu/fa3_part.sh` (.kit4/fa3.xz.aa .ab .ac: FA3's kernels, stripped from the kit, one piece per run)
#   run A11: carry .kit1 .kit4/fa3.xz.aa   command: bash tests/gpu/run_device.sh A11   (stage)
#   run B11: carry .kit2 .kit4/fa3.xz.ab   command: bash tests/gpu/run_device.sh B11   (stage)
#   run C11: carry .kit3 .kit4/fa3.xz.ac   command: bash tests/gpu/run_device.sh C11   (install vLLM and FA3; the
#            attention sweep with FA3 candidates; the tiny vLLM tests and ours (steps b1 / b4 / 8k) on the defaults)
#   run D11: carry nothing command: bash tests/gpu/run_device.sh D11 (native, session 8's plugin, ours, suggestions)
#   or, after A11 and B11, V11 (carry .kit3 .kit4/fa3.xz.ac): install vLLM and FA3, then the tiny vLLM tests alone
# Session 12, issue 4 (the row kernel in log2 units with the hardware log2; our head-512 attention kernel; FA3's pass
#   rows once per step): kit and FA3 pieces as in session 11, then
#   run A12: carry .kit1 .kit4/fa3.xz.aa   command: bash tests/gpu/run_device.sh A12   (stage; GPU parity of the row
#            kernel and the head-512 kernel; the sampling-part timings)
#   run B12: carry .kit2 .kit4/fa3.xz.ab   command: bash tests/gpu/run_device.sh B12   (stage)
#   run C12: carry .kit3 .kit4/fa3.xz.ac   command: bash tests/gpu/run_device.sh C12   (install vLLM and FA3; the
#            attention sweep with the head-512 kernel's candidates, its pick to /tmp/attn.env; the tiny vLLM tests;
#            ours (steps b1 / b4 / 8k) with the pick)
#   run D12: carry nothing command: bash tests/gpu/run_device.sh D12 (native, ours with the pick, the profile, suggestions)
#   second machine: A11, B11, then E12 (carry .kit3 .kit4/fa3.xz.ac: install; the head-512 kernel with split key
#            ranges: GPU parity, sweep; ours, the profile and native with the pick)
# Session 13, issue 4 (the request-state kernel, FA3's scheduler plan once per step, head-512 tiles per call size):
#   run A13: carry .kit1 .kit4/fa3.xz.aa   command: bash tests/gpu/run_device.sh A13   (stage; GPU kernel parity)
#   run B12: carry .kit2 .kit4/fa3.xz.ab   command: bash tests/gpu/run_device.sh B12   (stage)
#   run C13: carry .kit3 .kit4/fa3.xz.ac   command: bash tests/gpu/run_device.sh C13   (install; sweep of FA3 planned
#            or not and of the head-512 kernel per call size, picks to /tmp/s13.env; tiny vLLM tests; ours)
#   run D13: carry nothing command: bash tests/gpu/run_device.sh D13 (native, ours, the profile, session 12's plugin)
#   run E13: carry .kit5   command: bash tests/gpu/run_device.sh E13 (fp8 weights: ours and native; suggestions;
#            .kit5 = two pure-Python wheels vLLM's fp8 imports, `bash tests/gpu/fp8_deps.sh`)
#   run S13: carry nothing command: S13_VARIANTS="A=1 B=2;C=off" bash tests/gpu/run_device.sh S13 (suggestions per
#            env variant)
# Session 14, issue 4 (the dense MLP beside the MoE on a second stream; the fused-MoE config for fp8 weights):
#   run A14: carry .kit1 .kit4/fa3.xz.aa   command: bash tests/gpu/run_device.sh A14   (stage; GPU parity)
#   run B12: carry .kit2 .kit4/fa3.xz.ab   command: bash tests/gpu/run_device.sh B12   (stage)
#   run C14: carry .kit3 .kit4/fa3.xz.ac .kit5   command: bash tests/gpu/run_device.sh C14   (install; FFN-overlap
#            tests with vLLM, tiny vLLM tests; fp8 fused-MoE tuning)
#   run D14: carry nothing command: bash tests/gpu/run_device.sh D14 (ours, ours with the opt-in overlap, profile, native)
#   run E14: carry nothing command: bash tests/gpu/run_device.sh E14 (fp8: ours timed + profiled; suggestions; native)
#   not run yet: JOBS=first_cold,first_warm JOB_TIMEOUTS=first_cold=200,first_warm=200 bash tests/gpu/run_device.sh E14
#            (the first suggestions after start on a cold Triton cache, VLLMBackend's warm-up off / on)
# Session 15, issue 4 (the warm-up measured; the FP8 variant's own scheme): A14, B12, then TUNE=0 C14, then
#   run D15: carry nothing command: bash tests/gpu/run_device.sh D15 (first suggestions on a cold Triton cache with
#            VLLMBackend's warm-up off / on; ours bf16 in the same run)
#   run E15: carry nothing command: bash tests/gpu/run_device.sh E15 (FP8_DYNAMIC from config.json: ours with
#            vLLM's fp8 MoE pick, timed + profiled; ours with Triton's fp8 MoE; native)
#   second machine (the warm-up over ~1k prompts): S1 (.kit1 .kit4/fa3.xz.aa), B12, F15 (.kit3 .kit4/fa3.xz.ac .kit5)
#   planned then, run in session 16 as F16 (after A14, B12, TUNE=0 C14): JOBS=first_warm,ours_fp8dyn_lintorch
#            JOB_TIMEOUTS=first_warm=260,ours_fp8dyn_lintorch=240 bash tests/gpu/run_device.sh E15 (the warm-up
#            against contexts it does not cover; the FP8 variant's layer GEMMs through torch._scaled_mm)
# Session 16, issue 4 (the FP8 variant's MoE: our per-token fp8 quantization with the gated activation fused in, the
#   plugin's moe_quant piece):
#   run A16: carry .kit1 .kit4/fa3.xz.aa   command: bash tests/gpu/run_device.sh A16   (stage; GPU parity, the new
#            quantization kernel included)
#   run B12: carry .kit2 .kit4/fa3.xz.ab   command: bash tests/gpu/run_device.sh B12   (stage)
#   run C16: carry .kit3 .kit4/fa3.xz.ac .kit5   command: bash tests/gpu/run_device.sh C16   (install; the quantization
#            kernel against vLLM's and our fused MoE against vLLM's; FFN-overlap and tiny vLLM tests)
#   run E16: carry nothing command: bash tests/gpu/run_device.sh E16 (FP8_DYNAMIC on Triton's MoE: ours with moe_quant,
#            ours without it, timed + profiled)
#   run F16: carry nothing command: bash tests/gpu/run_device.sh F16 (the layers' fp8 GEMMs through torch._scaled_mm;
#            the warm-up against contexts it does not cover)
#   ran: A16, B12, C16, E16, E16 with JOBS=ours_fp8dyn_triton (after the kernel's division changed), F16.
#   not run yet (no machine was lent): JOBS=ours_fp8dyn_triton,ours_fp8dyn_triton_nofq,first_warm
#            JOB_TIMEOUTS=ours_fp8dyn_triton=140,ours_fp8dyn_triton_nofq=140,first_warm=270 bash tests/gpu/run_device.sh
#            E16 (after A16, B12, C16: the shipped moe_quant against none in one run; the warm-up with 1500/2048)
#   not run yet either: K16 (carry nothing; after A16: the sampling kernels alone, Gumbel against the inverse-CDF
#            sampling of the row kernel, DGEMMA_KERNEL_SAMPLE), then JOBS=ours_fp8dyn_triton,ours_fp8dyn_triton_cdf
#            bash tests/gpu/run_device.sh E16 (A16 also runs the new GPU tests of the CDF sampling);
#            T16 (after C16: vLLM's fused-MoE tuning for the FP8 variant's scheme, per-token activations; the file
#            goes in place for the engine jobs after it, and comes back as $OUT/moe_tuned_fp8_token.json)
# Session 17, issue 4: A16, B12, C16; JOBS=ours_fp8dyn_triton,ours_fp8dyn_triton_cdf E16; T16; JOBS=first_warm E16; K16;
#   the transformers backend's GPU tests; JOBS=ours_fp8dyn_triton,ours_fp8dyn_triton_nofq,ours E16 and the tiny vLLM tests
#   (after the inverse-CDF sampling became the default). Next (prepared, not run), after A16, B12, C16 on one machine:
#   run G17: carry nothing command: bash tests/gpu/run_device.sh G17 (the gated first GEMM's GPU tests, then the
#            quantization tests again)
#   run E17: carry nothing command: bash tests/gpu/run_device.sh E17 (the FP8 variant: ours, ours with the gated first
#            expert GEMM (DGEMMA_MOE_GATED_GEMM=1), ours with inductor's coordinate-descent tuning; timed + profiled)
#   run M17: carry nothing command: bash tests/gpu/run_device.sh M17 (inductor's multi-kernel, FP8 variant; bf16 with
#            coordinate-descent tuning)
#   run W17: carry nothing command: bash tests/gpu/run_device.sh W17 (the warm-up's new prompt lengths: first
#            suggestions over 1337, 1338, 1344, 1777, 1778, 3000, 8000 tokens, every JIT compile logged)
#   run S17: carry nothing command: bash tests/gpu/run_device.sh S17 (the head-512 kernel's sweep with session 17's
#            64-row and d_split-1 candidates; a faster pick at four canvases goes to an engine job through
#            DGEMMA_ATTN_WIDE="<one canvas>@256,<more>", e.g. DGEMMA_ATTN_WIDE=... JOBS=ours_fp8dyn_triton ... E17)
# Session 18, issue 4: A16, B12, C16, G17 (18 passed); E17 (ours_fp8dyn_triton timed out cold; _gg, _cdt);
#   JOBS=ours_fp8dyn_triton,ours_fp8dyn_triton_gg_cdt E17; S17; JOBS=<gg_cdt, ours, gg_cdt, ours> E17; W17 (the job
#   names of that commit, 11a955b; since then gg + cdt are the defaults and ours_fp8dyn_triton is them). Next
#   (prepared in session 18, Q18 / E18, not run; session 19 extended and renamed them to Q19 / E19).
# Session 19, issue 4 (ran: A16, B12, C16 32 passed, Q19, E19 twice with JOBS=... as in tests/gpu/LAST_RUN.md; the
#   first E19 job timed out cold at 230 s, now 320). As prepared: after A16, B12, C16 (C16's GPU tests include the
#   summing second GEMM's; its tiny vLLM tests run with the gated GEMM and inductor's tuning, the defaults):
#   run Q19: carry nothing command: bash tests/gpu/run_device.sh Q19 (bench/moe_sweep.py at 1024 tokens, a batch-4
#            step's MoE call: the gated GEMM's tiles, vLLM's second GEMM's tiles, the summing second GEMM and its
#            tiles; winners beating the defaults by > 1% go to /tmp/moe.env as export lines)
#   run E19: carry nothing command: bash tests/gpu/run_device.sh E19 (the FP8 variant, interleaved: the defaults, Q19's
#            winners (ours_fp8dyn_triton_gt, when it found any), the summing second GEMM (ours_fp8dyn_triton_ds));
#            then JOBS=ours,ours_nocdt E19 (bf16 with and without coordinate-descent tuning: bf16 has not run with
#            it); JOBS=ours_fp8dyn_triton,ours_fp8dyn_triton_w4 E19 (S17's one-canvas head-512 pick in an engine)
# Session 20 (issue 4): A16, B12, C16 as in session 19, then JOBS=ours_fp8dyn_triton_mk,ours_fp8dyn_triton
#   JOB_TIMEOUTS=ours_fp8dyn_triton=290,ours_fp8dyn_triton_mk=290 E19 (both cold) and twice the four jobs interleaved
#   (JOB_TIMEOUTS=...=140): every _mk job failed (vLLM 0.26 + torch 2.11: "multi_kernel_0 is not defined"). On a fresh
#   bare machine: run W20: carry nothing command: LIMIT=280 BUDGET=230 bash tests/gpu/run_device.sh W20
#   (bench/wide_sweep.py: the head-512 kernel's tiles without vLLM, 1 and 4 canvases, checked against the reference).
#   Next (prepared, not run): A16, then S20 (carry nothing; torch only, ~40 s: bench/selfcond_batch.py, the
#            self-conditioning MLP per request against once over 4 / 2 canvases, GPU and host ms; a short W20), B12,
#            C16 (C16 now also runs test_gpu_selfcond.py and the tiny engine with the
#            opt-in sc_batch serving two canvases at once), then JOBS=ours_fp8dyn_triton_trace,ours_fp8dyn_triton
#            JOB_TIMEOUTS=ours_fp8dyn_triton_trace=290,ours_fp8dyn_triton=140 E19 (the trace job compiles cold; its
#            engine log has a "dgemma_lsp step trace:" line every 50 steps: does the GPU wait for the host before
#            the model's graph, and for how long?), then JOBS=ours_fp8dyn_triton_scb,ours_fp8dyn_triton,
#            ours_fp8dyn_triton_scb,ours_fp8dyn_triton JOB_TIMEOUTS=ours_fp8dyn_triton=140,ours_fp8dyn_triton_scb=140
#            E19 (the self-conditioning MLP once per step, interleaved with the defaults); then JOBS=ours,ours_nocdt E19
# Session 21 (issue 4; ran, at 1128aaa): `bash tests/gpu/run_device.sh A16; bash tests/gpu/run_device.sh S20` (carry
#   .kit1 .kit4/fa3.xz.aa), B12, C16 (35 passed), JOBS=ours_fp8dyn_triton_trace,ours_fp8dyn_triton
#   JOB_TIMEOUTS=ours_fp8dyn_triton_trace=300,ours_fp8dyn_triton=140 E19, then twice the four jobs _scb / defaults
#   interleaved (JOB_TIMEOUTS=...=140): sc_batch 18.65-18.75 ms at batch 4 against 18.95-19.03; a default since a1f5156.
#   Next (prepared, not run): after A16, B12, C16 (C16's engine tests now run with sc_batch in the module's engine),
#   JOBS=ours_fp8dyn_triton,ours_fp8dyn_triton_noscb,ours_fp8dyn_triton,ours_fp8dyn_triton_noscb
#   JOB_TIMEOUTS=ours_fp8dyn_triton=320,ours_fp8dyn_triton_noscb=140 E19 (the new defaults against the old, cold first)
# Output: $OUT/run<N>.log and $OUT/gpu_step.jsonl (the rows bench/RESULTS.md and tests/gpu/LAST_RUN.md quote).
set -uo pipefail
N="${1:?stage: 1 2 3 b 4 / A B C D / A2 B C2 / A8 B C8 D8 / A9 C9 C10 / A11 B11 C11 D11 V11 / A12 B12 C12 D12 E12 / A13 C13 D13 E13 S13 / A14 C14 D14 E14 / D15 E15 / A16 C16 E16 F16 K16 T16 / E17 M17 W17 S17 G17 / Q19 E19 R19 / W20 S20 / T T2 P H / g k t}"
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 VLLM_USE_FLASHINFER_SAMPLER=0 VLLM_USE_V2_MODEL_RUNNER=1 TOKENIZERS_PARALLELISM=false
# compile caches in /tmp: it survives from one run to the next while the machine stays warm
export VLLM_CACHE_ROOT=/tmp/vllm-cache TRITON_CACHE_DIR=/tmp/triton-cache
T0=$(date +%s)
LOG="$OUT/run$N.log"
exec > >(tee -a "$LOG") 2>&1

install_shim() {
  # our package as installed (dgemma_lsp.backend / .lsp) plus the vllm.general_plugins entry point, no build
  rm -rf /tmp/dg && mkdir -p /tmp/dg/dgemma_lsp /tmp/dg/dgemma_lsp-0.1.0.dist-info
  cp -r dgemma_lsp/. /tmp/dg/dgemma_lsp/ && cp -r lsp /tmp/dg/dgemma_lsp/lsp && cp -r backend /tmp/dg/dgemma_lsp/backend
  touch /tmp/dg/dgemma_lsp/__init__.py
  printf 'Metadata-Version: 2.1\nName: dgemma-lsp\nVersion: 0.1.0\n' > /tmp/dg/dgemma_lsp-0.1.0.dist-info/METADATA
  printf '[vllm.general_plugins]\ndgemma_lsp = dgemma_lsp.backend.vllm_plugin:register\n' \
    > /tmp/dg/dgemma_lsp-0.1.0.dist-info/entry_points.txt
  # a fused-MoE config tuned by run 3 on this machine replaces the shipped one (the plugin points vLLM at it)
  if ls /tmp/moe-tuned/*.json >/dev/null 2>&1; then cp /tmp/moe-tuned/*.json /tmp/dg/dgemma_lsp/backend/moe_configs/; fi
}
PYT=(python3 -m pytest -q -rA --noconftest -p no:cacheprovider -o addopts= -s)
# The small model's training in the background (runs A, A2): its own copy of the code in /tmp/dgt, so a later run's
# install_shim cannot pull files from under it; its own process session, so it outlives this call.
#   start_training OUT_DIR MINUTES [train.py options...]
start_training() {
  install_shim; rm -rf /tmp/dgt && cp -r /tmp/dg /tmp/dgt && cp .train_data/pack.jsonl.gz /tmp/pack.jsonl.gz
  echo "$1" > /tmp/train.dir
  ( cd /tmp && PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True PYTHONPATH=/tmp/dgt setsid nohup python3 -m \
      dgemma_lsp.backend.train.train --init /tmp/dgt/dgemma_lsp/backend/models/small --out "$1" --minutes "$2" \
      --workers 10 --no-tokenizer --pack /tmp/pack.jsonl.gz --log /tmp/train.log "${@:3}" \
      > /tmp/train.out 2>&1 < /dev/null & )
}
# Wait for it (until UNTIL seconds into this run), then ship its checkpoint as $OUT/<dir>.tar (runs C, C2).
collect_training() {
  while ! grep -q "done:" /tmp/train.log 2>/dev/null && [ $(( $(date +%s) - T0 )) -lt "$1" ]; do sleep 3; done
  pkill -f dgemma_lsp.backend.train.train; sleep 2; cat /tmp/train.log; tail -n 5 /tmp/train.out
  d=$(cat /tmp/train.dir); cp /tmp/train.log "$d/" 2>/dev/null
  tar cf "$OUT/$(basename "$d").tar" -C "$(dirname "$d")" "$(basename "$d")" && ls -la "$d"
}
# FA3's kernels (tests/gpu/fa3_part.sh): park this run's piece; after vLLM is installed, join them into /tmp/site
fa3_stage() { mkdir -p /tmp/kp4 && cp .kit4/fa3.xz.* /tmp/kp4/ 2>/dev/null; echo "fa3 pieces: $(ls /tmp/kp4 | tr '\n' ' ')"; }
fa3_install() {
  python3 - <<'PY'
import glob, lzma, sys
sys.path.insert(0, "/tmp/site")
import vllm, os
dst = os.path.join(os.path.dirname(vllm.__file__), "vllm_flash_attn", "_vllm_fa3_C.abi3.so")
parts = sorted(glob.glob("/tmp/kp4/fa3.xz.*"))
if len(parts) == 3 and not os.path.exists(dst):
    data = lzma.decompress(b"".join(open(p, "rb").read() for p in parts))
    open(dst, "wb").write(data)
print("fa3 kernels:", dst, os.path.getsize(dst) if os.path.exists(dst) else "missing", f"({len(parts)} pieces)")
PY
}
echo "== run $N on $(nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader) $(date -u +%FT%TZ)"
case "$N" in
1)
  bash .kit1/stage.sh
  install_shim; export PYTHONPATH=/tmp/dg
  python3 -c "import torch, triton, transformers; print('torch', torch.__version__, 'triton', triton.__version__, 'transformers', transformers.__version__)"
  timeout 120 "${PYT[@]}" tests/gpu/test_gpu_kernels.py
  # FULL=1: also the floors and sampler-kernel timings (measured 2026-11-30 04:06, bench/RESULTS.md)
  [ "${FULL:-0}" = 1 ] && timeout 150 python3 bench/gpu_step.py --parts floors,kernels --out "$OUT/gpu_step.jsonl"
  ;;
2)
  bash .kit2/stage.sh
  install_shim; export PYTHONPATH=/tmp/dg
  # FULL=1: also transformers full-size steps, reference vs kernels (measured 04:07-04:20, bench/RESULTS.md)
  [ "${FULL:-0}" = 1 ] && timeout 230 python3 bench/gpu_step.py --parts transformers --transformers-budget 150 \
    --out "$OUT/gpu_step.jsonl"
  ;;
3)
  # install vLLM, tune the fused-MoE kernel for E=128,N=704 (vLLM's procedure, bench/tune_moe.py), then start the
  # native engine once so its cold torch.compile lands in /tmp/vllm-cache for run b
  bash .kit3/install.sh || exit 3
  install_shim; export PYTHONPATH=/tmp/dg:/tmp/site
  timeout 330 python3 bench/tune_moe.py --out-dir /tmp/moe-tuned --rows "$OUT/gpu_step.jsonl" --budget 270
  cp /tmp/moe-tuned/*.json "$OUT/moe_E128_N704_H200.json" 2>/dev/null  # "=" and "," do not come back
  left=$(( 570 - ($(date +%s) - T0) ))
  if [ "$left" -gt 60 ]; then
    timeout "$left" python3 bench/gpu_step.py --parts vllm --vllm-jobs native --job-timeouts native=$((left - 10)) \
      --out "$OUT/gpu_step.jsonl"
  fi
  ;;
b)  # while warm after run 3: native vLLM, ours (tuned MoE config included) and single-line suggestions, one run
  install_shim; export PYTHONPATH=/tmp/dg:/tmp/site
  timeout 575 python3 bench/gpu_step.py --parts vllm --vllm-jobs native,ours,suggest \
    --job-timeouts native=220,ours=180,suggest=160 --out "$OUT/gpu_step.jsonl"
  ;;
4)  # while still warm after run 3 (vLLM stays in /tmp/site): the tiny end-to-end tests
  install_shim; export PYTHONPATH=/tmp/dg:/tmp/site
  timeout 200 "${PYT[@]}" tests/gpu/test_gpu_vllm_backend.py
  ;;
A)  # 3-part kit, first run: stage; train the small model in the background (v3); meanwhile the GPU tests that
    # need no vLLM
  bash .kit1/stage.sh
  start_training /tmp/small3 "${TRAIN_MIN:-4.5}" --lr 1e-3 --warmup 15 --t-floor 0.3 --fill-weight 0.2 \
    --max-repair-canvas 256 --mix-single 0.4 --mix-multi 0.1 --mix-repair 0.5
  export PYTHONPATH=/tmp/dg
  timeout 150 "${PYT[@]}" tests/gpu/test_gpu_kernels.py tests/gpu/test_gpu_transformers_backend.py
  sleep 20; cat /tmp/train.log
  ;;
A2) # second machine: as A, from the checkpoint copied into backend/models/small in the tree for the call (v4):
    # bigger batches and a memory cap that leaves a vLLM engine room; no GPU tests
  bash .kit1/stage.sh
  start_training /tmp/small4 "${TRAIN_MIN:-9}" --lr 8e-4 --warmup 15 --t-floor 0.3 --fill-weight 0.2 \
    --max-repair-canvas 256 --mix-single 0.3 --mix-multi 0.1 --mix-repair 0.6 --tokens-per-batch 128000 \
    --max-batch 768 --ar-frac 0.25 --gpu-mem-frac 0.6
  sleep 45; cat /tmp/train.log; tail -n 5 /tmp/train.out
  ;;
B)
  bash .kit2/stage.sh; tail -n 3 /tmp/train.log
  ;;
C|C2)  # install vLLM; the tiny checkpoint through the vllm backend (the training still running beside it);
      # collect the trained model; C only, then alone on the GPU: tune the fused-MoE config and time single-line
      # suggestions with it (C2 waits for a longer training instead)
  bash .kit3/install.sh || exit 3
  install_shim; export PYTHONPATH=/tmp/dg:/tmp/site
  timeout 200 "${PYT[@]}" tests/gpu/test_gpu_vllm_backend.py
  if [ "$N" = C2 ]; then collect_training 570; else collect_training $(( $(date +%s) - T0 + 150 )); fi
  if [ "$N" = C ]; then
    left=$(( 585 - ($(date +%s) - T0) - 175 ))
    if [ "$left" -gt 90 ]; then
      timeout $((left + 20)) python3 bench/tune_moe.py --out-dir /tmp/moe-tuned --rows "$OUT/gpu_step.jsonl" \
        --budget $((left - 40))
      cp /tmp/moe-tuned/*.json "$OUT/moe_E128_N704_H200.json" 2>/dev/null  # "=" and "," do not come back
    else echo "no time left to tune ($left s)"; fi
    install_shim
    left=$(( 585 - ($(date +%s) - T0) ))
    timeout "$left" python3 bench/gpu_step.py --parts vllm --vllm-jobs suggest --job-timeouts suggest=$((left - 5)) \
      --out "$OUT/gpu_step.jsonl"
  fi
  ;;
D)  # the whole benchmark in one run (issue 7): floors, sampling kernels, transformers reference vs our kernels,
    # native vLLM vs ours (plugin on; the fused-MoE config tuned by run C)
  install_shim; export PYTHONPATH=/tmp/dg:/tmp/site
  timeout 585 python3 bench/gpu_step.py --parts floors,kernels,transformers,vllm --kernel-dtypes bf16 \
    --transformers-budget 80 --vllm-jobs native,ours --job-timeouts native=240,ours=160 --out "$OUT/gpu_step.jsonl"
  ;;
A8)
  bash .kit1/stage.sh
  install_shim; export PYTHONPATH=/tmp/dg
  timeout 150 "${PYT[@]}" tests/gpu/test_gpu_kernels.py tests/gpu/test_gpu_transformers_backend.py
  timeout 200 python3 bench/gpu_step.py --parts kernels --kernel-dtypes bf16 --kernel-env /tmp/kernel.env \
    --out "$OUT/gpu_step.jsonl"
  cat /tmp/kernel.env
  ;;
C8)
  bash .kit3/install.sh || exit 3
  install_shim; export PYTHONPATH=/tmp/dg:/tmp/site
  [ -f /tmp/kernel.env ] && . /tmp/kernel.env && env | grep DGEMMA_KERNEL
  timeout 200 "${PYT[@]}" tests/gpu/test_gpu_vllm_backend.py
  left=$(( 585 - ($(date +%s) - T0) ))
  timeout "$left" python3 bench/gpu_step.py --parts vllm --vllm-jobs profile --job-timeouts profile=$((left - 5)) \
    --out "$OUT/gpu_step.jsonl"
  ;;
D8)  # (after C9 on the same machine it runs with the sweeps' picks: /tmp/kernel.env, /tmp/attn.env)
  install_shim; export PYTHONPATH=/tmp/dg:/tmp/site
  [ -f /tmp/kernel.env ] && . /tmp/kernel.env && env | grep DGEMMA_KERNEL
  [ -f /tmp/attn.env ] && . /tmp/attn.env && env | grep DGEMMA_ATTN
  timeout 585 python3 bench/gpu_step.py --parts vllm --vllm-jobs "${JOBS:-native,ours,suggest,suggest32}" \
    --job-timeouts "${JOB_TIMEOUTS:-native=170,ours=150,suggest=125,suggest32=125}" --out "$OUT/gpu_step.jsonl"
  ;;
C9)  # session 8, second machine (after A9 = stage .kit1 and B): install; attention tile sweep; tiny vLLM tests;
     # profile and canvas-32 suggestions with the chosen tiles (then D8 for native vs ours: the first engine of a
     # fresh machine compiles cold, ~110 s, so the timed engines do not fit in this call too)
  bash .kit3/install.sh || exit 3
  install_shim; export PYTHONPATH=/tmp/dg:/tmp/site
  timeout 150 python3 bench/gpu_step.py --parts attention --attn-env /tmp/attn.env --out "$OUT/gpu_step.jsonl"
  [ -f /tmp/attn.env ] && . /tmp/attn.env && env | grep DGEMMA_ATTN
  timeout 170 "${PYT[@]}" tests/gpu/test_gpu_vllm_backend.py
  left=$(( 585 - ($(date +%s) - T0) ))
  timeout "$left" python3 bench/gpu_step.py --parts vllm --vllm-jobs "${JOBS:-profile,suggest32}" \
    --job-timeouts "profile=170,suggest32=$((left - 175))" --out "$OUT/gpu_step.jsonl"
  ;;
A9)
  bash .kit1/stage.sh
  ;;
C10)  # session 10 (after A9 and B): install; the attention tile sweep, whose numerics check now covers causal calls
      # (the prompt's prefill and the commit step run the same launch); then the tiny vLLM tests with the picks
  bash .kit3/install.sh || exit 3
  install_shim; export PYTHONPATH=/tmp/dg:/tmp/site
  timeout 150 python3 bench/gpu_step.py --parts attention --attn-env /tmp/attn.env --out "$OUT/gpu_step.jsonl"
  [ -f /tmp/attn.env ] && . /tmp/attn.env && env | grep DGEMMA_ATTN
  left=$(( ${C10_BUDGET:-585} - ($(date +%s) - T0) ))
  [ "$left" -gt 60 ] && timeout "$left" "${PYT[@]}" tests/gpu/test_gpu_vllm_backend.py
  ;;
A11)
  bash .kit1/stage.sh; fa3_stage
  ;;
B11)
  bash .kit2/stage.sh; fa3_stage
  ;;
C11)  # session 11 (after A11 and B11): install vLLM and FA3; sweep (tiles and FA3); tiny tests; our steps
  bash .kit3/install.sh || exit 3
  fa3_stage; fa3_install
  install_shim; export PYTHONPATH=/tmp/dg:/tmp/site
  # the sweep's pick is printed, not used: the engines below measure the shipped defaults (FA3 1:rows from one
  # canvas up; in the engine FA3 beat the tiles at one canvas although the sweep's synthetic call did not, session 11)
  timeout 200 python3 bench/gpu_step.py --parts attention --attn-env /tmp/attn.env --out "$OUT/gpu_step.jsonl"
  cat /tmp/attn.env 2>/dev/null
  timeout 200 "${PYT[@]}" tests/gpu/test_gpu_vllm_backend.py
  left=$(( 585 - ($(date +%s) - T0) ))
  [ "$left" -gt 60 ] && timeout "$left" python3 bench/gpu_step.py --parts vllm --vllm-jobs "${JOBS:-ours}" \
    --job-timeouts "ours=$((left - 5))" --out "$OUT/gpu_step.jsonl"
  ;;
V11)  # after A11 and B11 (carry .kit3 .kit4/fa3.xz.ac): install vLLM and FA3; the tiny vLLM tests alone
  bash .kit3/install.sh || exit 3
  fa3_stage; fa3_install
  install_shim; export PYTHONPATH=/tmp/dg:/tmp/site
  timeout "${V11_BUDGET:-300}" "${PYT[@]}" tests/gpu/test_gpu_vllm_backend.py
  ;;
D11)  # while warm after C11: native vLLM, session 8's plugin (no FA3, softcap outside the kernel), suggestions
  install_shim; export PYTHONPATH=/tmp/dg:/tmp/site
  timeout 585 python3 bench/gpu_step.py --parts vllm --vllm-jobs "${JOBS:-native,ours_s8,suggest32}" \
    --job-timeouts "${JOB_TIMEOUTS:-native=200,ours_s8=120,suggest32=150}" --out "$OUT/gpu_step.jsonl"
  ;;
A12)
  bash .kit1/stage.sh; fa3_stage
  install_shim; export PYTHONPATH=/tmp/dg
  timeout 200 "${PYT[@]}" tests/gpu/test_gpu_kernels.py tests/gpu/test_gpu_wide_attention.py
  timeout 150 python3 bench/gpu_step.py --parts kernels --kernel-dtypes bf16 --out "$OUT/gpu_step.jsonl"
  ;;
B12)
  bash .kit2/stage.sh; fa3_stage
  ;;
C12)  # session 12 (after A12 and B12): install vLLM and FA3; sweep (tiles, FA3, the head-512 kernel: its pick is
      # used from here on, /tmp/attn.env); tiny vLLM tests; our steps
  bash .kit3/install.sh || exit 3
  fa3_stage; fa3_install
  install_shim; export PYTHONPATH=/tmp/dg:/tmp/site
  timeout 200 python3 bench/gpu_step.py --parts attention --attn-env /tmp/attn.env --out "$OUT/gpu_step.jsonl"
  grep WIDE /tmp/attn.env > /tmp/wide.env; . /tmp/wide.env; env | grep DGEMMA_ATTN
  timeout 200 "${PYT[@]}" tests/gpu/test_gpu_vllm_backend.py
  left=$(( 585 - ($(date +%s) - T0) ))
  [ "$left" -gt 60 ] && timeout "$left" python3 bench/gpu_step.py --parts vllm --vllm-jobs "${JOBS:-ours}" \
    --job-timeouts "ours=$((left - 5))" --out "$OUT/gpu_step.jsonl"
  ;;
D12)  # while warm after C12, with C12's head-512 pick: native vLLM, ours, the profile, suggestions
  install_shim; export PYTHONPATH=/tmp/dg:/tmp/site
  [ -f /tmp/wide.env ] && . /tmp/wide.env; env | grep DGEMMA_ATTN
  timeout 585 python3 bench/gpu_step.py --parts vllm --vllm-jobs "${JOBS:-native,ours,profile,suggest32}" \
    --job-timeouts "${JOB_TIMEOUTS:-native=190,ours=100,profile=100,suggest32=150}" --out "$OUT/gpu_step.jsonl"
  ;;
E12)  # session 12, second machine (after A11 and B11): install vLLM and FA3; the head-512 kernel's GPU parity (split
      # key ranges included) and sweep (its pick to /tmp/wide.env); ours and the profile with the pick; native last
  bash .kit3/install.sh || exit 3
  fa3_stage; fa3_install
  install_shim; export PYTHONPATH=/tmp/dg:/tmp/site
  timeout 120 "${PYT[@]}" tests/gpu/test_gpu_wide_attention.py
  timeout 150 python3 bench/gpu_step.py --parts attention --attn-heads 512 --attn-env /tmp/attn.env \
    --out "$OUT/gpu_step.jsonl"
  grep WIDE /tmp/attn.env > /tmp/wide.env; . /tmp/wide.env; env | grep DGEMMA_ATTN
  left=$(( 585 - ($(date +%s) - T0) ))
  [ "$left" -gt 60 ] && timeout "$left" python3 bench/gpu_step.py --parts vllm --vllm-jobs "${JOBS:-ours,profile,native}" \
    --job-timeouts "${JOB_TIMEOUTS:-ours=170,profile=70,native=$((left - 250))}" --out "$OUT/gpu_step.jsonl"
  ;;
A13)  # session 13: stage; GPU parity of the kernels (row kernel, request-state kernel, head-512 kernel incl. the
      # per-size defaults)
  bash .kit1/stage.sh; fa3_stage
  install_shim; export PYTHONPATH=/tmp/dg
  timeout 200 "${PYT[@]}" tests/gpu/test_gpu_kernels.py tests/gpu/test_gpu_wide_attention.py
  ;;
C13)  # session 13 (after A13 and B12): install vLLM and FA3; the sweep of FA3 (planned or not) and the head-512
      # kernel per call size, its picks to /tmp/s13.env; the tiny vLLM tests (request-state kernel in the engine);
      # ours at 1k context, batch 1 and 4
  bash .kit3/install.sh || exit 3
  fa3_stage; fa3_install
  install_shim; export PYTHONPATH=/tmp/dg:/tmp/site
  timeout 200 python3 bench/gpu_step.py --parts attention --attn-kinds fa3,wide --attn-env /tmp/attn.env \
    --out "$OUT/gpu_step.jsonl"
  grep -E 'WIDE|FA3_PLAN' /tmp/attn.env > /tmp/s13.env; . /tmp/s13.env; env | grep DGEMMA_ATTN
  timeout 200 "${PYT[@]}" tests/gpu/test_gpu_vllm_backend.py
  left=$(( 585 - ($(date +%s) - T0) ))
  [ "$left" -gt 60 ] && timeout "$left" python3 bench/gpu_step.py --parts vllm --vllm-jobs "${JOBS:-ours}" \
    --job-timeouts "ours=$((left - 5))" --out "$OUT/gpu_step.jsonl"
  ;;
D13|E13)  # while warm after C13, with its picks: D13 native, ours, the profile, session 12's plugin; E13 fp8 weights
      # (vLLM's fp8 needs compressed-tensors and loguru, which the kit lacks: carry .kit5 from tests/gpu/fp8_deps.sh)
  install_shim; export PYTHONPATH=/tmp/dg:/tmp/site
  for w in .kit5/*.whl; do [ -f "$w" ] && python3 -c "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall('/tmp/site')" "$w"; done
  [ -f /tmp/s13.env ] && . /tmp/s13.env; env | grep DGEMMA_ATTN
  if [ "$N" = D13 ]; then jobs=native,ours,profile,ours_s12; lim=native=190,ours=110,profile=100,ours_s12=100
  else jobs=ours_fp8,native_fp8,suggest32; lim=ours_fp8=150,native_fp8=190,suggest32=150; fi
  timeout 585 python3 bench/gpu_step.py --parts vllm --vllm-jobs "${JOBS:-$jobs}" \
    --job-timeouts "${JOB_TIMEOUTS:-$lim}" --out "$OUT/gpu_step.jsonl"
  ;;
S13)  # session 13, after E13 while warm: the canvas-32 suggestions again under the env variants in S13_VARIANTS
      # (';'-separated, each a space-separated list of VAR=value), to find what moved their first draft
  install_shim; export PYTHONPATH=/tmp/dg:/tmp/site
  IFS=';' read -ra variants <<< "${S13_VARIANTS:-DGEMMA_ATTN_FA3_PLAN=off}"
  for v in "${variants[@]}"; do
    ( [ -f /tmp/s13.env ] && . /tmp/s13.env; for kv in $v; do export "$kv"; done; env | grep -E 'DGEMMA_(ATTN|VLLM)'
      timeout 200 python3 bench/gpu_step.py --parts vllm --vllm-jobs suggest32 --job-timeouts suggest32=190 \
        --out "$OUT/gpu_step.jsonl" )
  done
  ;;
A14)  # session 14: stage; GPU parity of the kernels and the two-stream FFN branches (no vLLM yet)
  bash .kit1/stage.sh; fa3_stage
  install_shim; export PYTHONPATH=/tmp/dg
  timeout 200 "${PYT[@]}" tests/gpu/test_gpu_kernels.py tests/gpu/test_gpu_wide_attention.py tests/gpu/test_gpu_ffn_overlap.py
  ;;
C14)  # session 14 (after A14 and B12; carry .kit3 .kit4/fa3.xz.ac .kit5): install vLLM, FA3 and the fp8 deps; the
      # FFN-overlap tests with vLLM (its layer forward is the one the piece restates; the tiny engine with the piece
      # on and off gives the same tokens); then vLLM's fused-MoE tuning for the fp8 weights (to /tmp/moe-tuned,
      # which install_shim puts beside the shipped bf16 file; the file comes back in $OUT; TUNE=0 skips it)
  bash .kit3/install.sh || exit 3
  fa3_stage; fa3_install
  for w in .kit5/*.whl; do [ -f "$w" ] && python3 -c "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall('/tmp/site')" "$w"; done
  install_shim; export PYTHONPATH=/tmp/dg:/tmp/site
  timeout 260 "${PYT[@]}" tests/gpu/test_gpu_ffn_overlap.py tests/gpu/test_gpu_vllm_backend.py
  left=$(( 585 - ($(date +%s) - T0) ))
  [ "${TUNE:-1}" = 1 ] && [ "$left" -gt 90 ] && timeout "$left" python3 bench/tune_moe.py --dtype fp8_w8a8 --out-dir /tmp/moe-tuned \
    --rows "$OUT/tune_moe.jsonl" --budget "$((left - 60))"
  cp /tmp/moe-tuned/*.json "$OUT/moe_tuned_fp8.json" 2>/dev/null
  ;;
V14)  # while warm after C14: the tiny vLLM tests again (after a fix), the tuned fp8 file back under a plain name
  install_shim; export PYTHONPATH=/tmp/dg:/tmp/site
  cp /tmp/moe-tuned/*.json "$OUT/moe_tuned_fp8.json" 2>/dev/null
  timeout 300 "${PYT[@]}" tests/gpu/test_gpu_vllm_backend.py
  ;;
D14|E14)  # while warm after C14 (fp8 MoE file in place): D14 ours, ours with the opt-in FFN overlap, the profile,
      # native vLLM (session 14 ran it with the overlap as the default: JOBS=ours,ours_noovl,profile,native at commit
      # 1b7731a); E14 fp8 weights: ours timed and profiled, then the canvas-32 suggestions
  install_shim; export PYTHONPATH=/tmp/dg:/tmp/site
  if [ "$N" = D14 ]; then jobs=ours,ours_ffn_overlap,profile,native; lim=ours=150,ours_ffn_overlap=150,profile=90,native=190
  else jobs=ours_fp8_profile,suggest32,native_fp8; lim=ours_fp8_profile=200,suggest32=150,native_fp8=190; fi
  timeout 585 python3 bench/gpu_step.py --parts vllm --vllm-jobs "${JOBS:-$jobs}" \
    --job-timeouts "${JOB_TIMEOUTS:-$lim}" --out "$OUT/gpu_step.jsonl"
  ;;
A16)  # session 16: stage; GPU parity of the kernels (the per-token fp8 quantization included; no vLLM yet)
  bash .kit1/stage.sh; fa3_stage
  install_shim; export PYTHONPATH=/tmp/dg
  timeout 240 "${PYT[@]}" tests/gpu/test_gpu_kernels.py tests/gpu/test_gpu_wide_attention.py tests/gpu/test_gpu_ffn_overlap.py \
    tests/gpu/test_gpu_act_quant.py
  ;;
C16)  # session 16 (after A16 and B12; carry .kit3 .kit4/fa3.xz.ac .kit5): install vLLM, FA3 and the fp8 deps; the
      # quantization kernel against vLLM's kernels, our fused MoE against vLLM's; FFN-overlap and tiny vLLM tests
  bash .kit3/install.sh || exit 3
  fa3_stage; fa3_install
  for w in .kit5/*.whl; do [ -f "$w" ] && python3 -c "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall('/tmp/site')" "$w"; done
  install_shim; export PYTHONPATH=/tmp/dg:/tmp/site
  timeout 330 "${PYT[@]}" tests/gpu/test_gpu_act_quant.py tests/gpu/test_gpu_ffn_overlap.py tests/gpu/test_gpu_selfcond.py \
    tests/gpu/test_gpu_vllm_backend.py
  ;;
T16)  # session 16, not run yet (after C16): vLLM's fused-MoE tuning for per-channel fp8 weights and per-token
      # activations (the FP8 variant's scheme) to /tmp/moe-tuned, which install_shim puts in place for later jobs
  install_shim; export PYTHONPATH=/tmp/dg:/tmp/site
  timeout 560 python3 bench/tune_moe.py --dtype fp8_w8a8_token --out-dir /tmp/moe-tuned --rows "$OUT/tune_moe.jsonl" \
    --budget 480
  cp /tmp/moe-tuned/*fp8_w8a8.json "$OUT/moe_tuned_fp8_token.json" 2>/dev/null
  ;;
K16)  # session 16, not run yet (after A16; no vLLM needed): the sampling kernels alone, Gumbel against CDF sampling
  install_shim; export PYTHONPATH=/tmp/dg
  timeout 420 python3 bench/gpu_step.py --parts kernels --kernel-dtypes bf16 --out "$OUT/gpu_step.jsonl"
  ;;
G17)  # session 17 (prepared), while warm after C16: the MoE kernels' GPU tests, the gated first GEMM included
  install_shim; export PYTHONPATH=/tmp/dg:/tmp/site
  timeout 300 "${PYT[@]}" tests/gpu/test_gpu_act_quant.py
  ;;
S17)  # session 17 (prepared), while warm after C16: the head-512 sweep alone (no --attn-env: it covers one head size)
  install_shim; export PYTHONPATH=/tmp/dg:/tmp/site
  timeout 400 python3 bench/gpu_step.py --parts attention --attn-kinds wide --attn-heads 512 --out "$OUT/gpu_step.jsonl"
  ;;
E17|M17|W17)  # session 17 (prepared; E17, W17 ran in session 18), while warm after C16. E17 ran jobs since renamed
      # (gated GEMM and coordinate-descent tuning became the defaults): session 17's defaults, each piece alone
  install_shim; export PYTHONPATH=/tmp/dg:/tmp/site
  if [ "$N" = E17 ]; then jobs=ours_fp8dyn_triton_s17,ours_fp8dyn_triton_nocdt,ours_fp8dyn_triton_nogg
    lim=ours_fp8dyn_triton_s17=200,ours_fp8dyn_triton_nocdt=130,ours_fp8dyn_triton_nogg=250
  elif [ "$N" = M17 ]; then jobs=ours_fp8dyn_triton_mk,ours_nocdt; lim=ours_fp8dyn_triton_mk=250,ours_nocdt=200
  else jobs=first_warm; lim=first_warm=300; fi
  timeout 585 python3 bench/gpu_step.py --parts vllm --vllm-jobs "${JOBS:-$jobs}" \
    --job-timeouts "${JOB_TIMEOUTS:-$lim}" --out "$OUT/gpu_step.jsonl"
  ;;
E19)  # session 19, while warm after C16 and Q19: the defaults against Q19's winners and the summing
      # second GEMM, interleaved; the first job compiles cold (session 19: torch.compile 174 s, the job > 230 s)
  install_shim; export PYTHONPATH=/tmp/dg:/tmp/site
  export MOE_SWEEP_ENV="$(cat /tmp/moe.env 2>/dev/null)"
  echo "MOE_SWEEP_ENV=$MOE_SWEEP_ENV"
  jobs=ours_fp8dyn_triton,ours_fp8dyn_triton_ds,ours_fp8dyn_triton,ours_fp8dyn_triton_ds
  [ -n "$MOE_SWEEP_ENV" ] && jobs=ours_fp8dyn_triton,ours_fp8dyn_triton_gt,ours_fp8dyn_triton_ds,ours_fp8dyn_triton,ours_fp8dyn_triton_gt
  timeout 585 python3 bench/gpu_step.py --parts vllm --vllm-jobs "${JOBS:-$jobs}" \
    --job-timeouts "${JOB_TIMEOUTS:-ours_fp8dyn_triton=320,ours_fp8dyn_triton_gt=120,ours_fp8dyn_triton_ds=120,ours=250,ours_nocdt=200,ours_fp8dyn_triton_w4=120}" \
    --out "$OUT/gpu_step.jsonl"
  ;;
W20)  # session 20, a bare machine (torch and triton only): the head-512 kernel's tiles at 4 and 1 canvases
      # (bench/wide_sweep.py; session 20 ran it with a register prefetch of the next key tile, since removed)
  timeout "${LIMIT:-300}" python3 bench/wide_sweep.py --rows "$OUT/wide_sweep.jsonl" --budget "${BUDGET:-240}"
  ;;
S20)  # session 20 (prepared; run in session 21 after A16, no vLLM needed): the self-conditioning MLP per request
      # against once over the canvases (bench/selfcond_batch.py), GPU and host ms
  timeout "${LIMIT:-120}" python3 bench/selfcond_batch.py --rows "$OUT/selfcond_batch.jsonl"
  ;;
R19)  # session 19, a bare machine (torch and triton only): inductor's norm + fp8-quantize reductions, looped against
      # persistent (bench/inductor_reductions.py)
  timeout "${LIMIT:-200}" python3 bench/inductor_reductions.py --tokens "${TOKENS:-1024,256}" \
    --rows "$OUT/inductor_reductions.jsonl"
  ;;
Q19)  # session 19, while warm after C16: the expert GEMMs' tile sweep (bench/moe_sweep.py)
  install_shim; export PYTHONPATH=/tmp/dg:/tmp/site
  timeout 420 python3 bench/moe_sweep.py --tokens "${TOKENS:-1024}" --rows "$OUT/moe_sweep.jsonl" \
    --env-out /tmp/moe.env --budget 330
  cat /tmp/moe.env 2>/dev/null
  ;;
E16|F16)  # session 16, while warm after C16
  install_shim; export PYTHONPATH=/tmp/dg:/tmp/site
  if [ "$N" = E16 ]; then jobs=ours_fp8dyn_triton,ours_fp8dyn_triton_nofq; lim=ours_fp8dyn_triton=240,ours_fp8dyn_triton_nofq=200
  else jobs=ours_fp8dyn_lintorch,first_warm; lim=ours_fp8dyn_lintorch=240,first_warm=260; fi
  timeout 585 python3 bench/gpu_step.py --parts vllm --vllm-jobs "${JOBS:-$jobs}" \
    --job-timeouts "${JOB_TIMEOUTS:-$lim}" --out "$OUT/gpu_step.jsonl"
  ;;
S1)  # stage only (carry .kit1 .kit4/fa3.xz.aa); then B12, then F15
  bash .kit1/stage.sh; fa3_stage
  ;;
F15)  # session 15, after S1 and B12 (carry .kit3 .kit4/fa3.xz.ac .kit5): install, then the first suggestions after
      # start with the warm-up of prompts of 16, 1001 and 1024 tokens (no tests: the budget's last minutes)
  bash .kit3/install.sh || exit 3
  fa3_stage; fa3_install
  for w in .kit5/*.whl; do [ -f "$w" ] && python3 -c "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall('/tmp/site')" "$w"; done
  install_shim; export PYTHONPATH=/tmp/dg:/tmp/site
  left=$(( 585 - ($(date +%s) - T0) ))
  timeout "$left" python3 bench/gpu_step.py --parts vllm --vllm-jobs "${JOBS:-first_warm}" \
    --job-timeouts "${JOB_TIMEOUTS:-first_warm=$((left - 10))}" --out "$OUT/gpu_step.jsonl"
  ;;
D15|E15)  # session 15, while warm after TUNE=0 C14
  install_shim; export PYTHONPATH=/tmp/dg:/tmp/site
  if [ "$N" = D15 ]; then jobs=first_cold,first_warm,ours; lim=first_cold=220,first_warm=170,ours=170
  else jobs=ours_fp8dyn,ours_fp8dyn_triton,native_fp8dyn; lim=ours_fp8dyn=240,ours_fp8dyn_triton=190,native_fp8dyn=140; fi
  timeout 585 python3 bench/gpu_step.py --parts vllm --vllm-jobs "${JOBS:-$jobs}" \
    --job-timeouts "${JOB_TIMEOUTS:-$lim}" --out "$OUT/gpu_step.jsonl"
  ;;
T|T2)  # issue 8, session 4: training in the foreground, one run each (no kit; carry .train_data/pack.jsonl.gz)
  # T: from TRAIN_INIT (unset: from scratch); T2 right after, while warm: continue from T's checkpoint with a fresh
  # warmup + cosine (TRAIN_INIT overrides, e.g. a carried checkpoint after the machine was released). TRAIN_ARGS
  # passes train.py options (--cuda-graphs ...).
  install_shim; cp .train_data/pack.jsonl.gz /tmp/pack.jsonl.gz
  export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
  python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
  if [ "$N" = T ]; then d=/tmp/small5a; init=(${TRAIN_INIT:+--init "$TRAIN_INIT"}); else d=/tmp/small5b; init=(--init "${TRAIN_INIT:-/tmp/small5a}"); fi
  left=$(( 585 - ($(date +%s) - T0) ))
  ( cd /tmp && PYTHONPATH=/tmp/dg timeout "$left" python3 -m dgemma_lsp.backend.train.train "${init[@]}" --out "$d" \
      --minutes "${TRAIN_MIN:-8}" --workers 13 --no-tokenizer --pack /tmp/pack.jsonl.gz \
      --log "$OUT/train_$N.log" ${TRAIN_ARGS:-} ) > "$OUT/train_$N.out" 2>&1
  echo "train exit $?"; tail -n 3 "$OUT/train_$N.out"
  tar cf "$OUT/$(basename "$d").tar" -C /tmp "$(basename "$d")" && ls -la "$d"
  ;;
H)  # issue 8, session 9: the training loop's step time with the trainer's torch threads at 2, then torch's default
  install_shim; cp .train_data/pack.jsonl.gz /tmp/pack.jsonl.gz; export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
  for t in 2 0; do
    ( cd /tmp && PYTHONPATH=/tmp/dg timeout 130 python3 -m dgemma_lsp.backend.train.train --out "/tmp/h$t" \
        --minutes "${TRAIN_MIN:-1.3}" --workers 13 --no-tokenizer --pack /tmp/pack.jsonl.gz --cuda-graphs \
        --host-threads "$t" --log "$OUT/train_H$t.log" ${TRAIN_ARGS:-} ) > "$OUT/train_H$t.out" 2>&1
    echo "host threads $t:"; grep "ms/step" "$OUT/train_H$t.log" | tail -n 5 | sed 's/.*B=/B=/; s/ ar=.*s\/step=/ s\/step=/'
  done
  ;;
P)  # issue 8, session 9: where the small model's training step spends its time (bench/train_step.py; no kit)
  install_shim; export PYTHONPATH=/tmp/dg PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
  timeout "${P_TIMEOUT:-420}" python3 bench/train_step.py --out "$OUT/train_step.jsonl" ${P_ARGS:-}
  ;;
g)  # no kit: kernel parity, and the transformers backend on CUDA with the kernels switched in
  install_shim; export PYTHONPATH=/tmp/dg
  python3 -c "import torch, triton, transformers; print('torch', torch.__version__, 'triton', triton.__version__, 'transformers', transformers.__version__)"
  timeout 150 "${PYT[@]}" tests/gpu/test_gpu_kernels.py tests/gpu/test_gpu_transformers_backend.py
  ;;
k)  # kernels only (no kit): GPU parity and the sampling-part timings
  install_shim; export PYTHONPATH=/tmp/dg
  timeout 120 "${PYT[@]}" tests/gpu/test_gpu_kernels.py
  timeout 150 python3 bench/gpu_step.py --parts kernels --kernel-dtypes bf16 --out "$OUT/gpu_step.jsonl"
  ;;
t)  # transformers reference vs our kernels only (no vLLM kit needed)
  install_shim; export PYTHONPATH=/tmp/dg
  timeout 230 python3 bench/gpu_step.py --parts transformers --transformers-budget 150 --out "$OUT/gpu_step.jsonl"
  ;;
esac
echo "== run $N done $(date -u +%FT%TZ)"; nvidia-smi --query-gpu=memory.used --format=csv,noheader
