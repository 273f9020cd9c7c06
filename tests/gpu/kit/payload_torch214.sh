#!/usr/bin/env bash
# The torch 2.14 kits' payload (build.sh runs it with KIT=0.33 or 0.34): vLLM 0.33.0 or 0.34.0 + torch 2.14.0 and what
# they need beyond the device image, unpacked here into one site tree, trimmed to Hopper, in one xz tar:
# $WORK/kit.tar.xz. 0.34.0 pins the same torch and names the same packages; it raises five floors the image (and
# 0.33's pins) fall below: huggingface_hub >= 2.0 (the image has 1.33; hub 2 wants hf-xet >= 1.6), filelock >= 4.2.4,
# tokenizers >= 0.23.3, and transformers < 5.23 with them (5.22.2, what pip resolves for 0.34 today; the image's 5.17
# caps the hub below 2); and CuTe DSL (nvidia-cutlass-dsl 4.8.0 with its cu13 libraries) and quack-kernels 0.6.5 (with
# torch-c-dlpack-ext), which 0.34 imports at every engine's warm-up on CUDA (model_executor/warmup/kernel_warmup.py ->
# minimax_m3_msa_warmup -> `import cutlass`, `import quack`): without them no engine starts.
#
#   - torch 2.14.0 (cu130) with the libraries it pins newer than the image's torch 2.11: triton 3.8.0 (3.6.0 there),
#     nvidia-cudnn-cu13 9.24.0.43 (9.19: torch refuses a runtime cuDNN older than the one it was built with),
#     nvidia-nccl-cu13 2.30.7 (2.28.9 lacks 11 of the symbols torch 2.14 links against); the image's
#     nvidia-cusparselt-cu13 0.8.0 (0.8.1 pinned: a patch release, same soname, every symbol torch uses is there, no
#     runtime version check), cuda-toolkit 13.0.2 (13.0.3 pinned: CUDA minor-version compatible) and
#     nvidia-nvshmem-cu13 3.4.5 (the same) serve;
#   - torchvision 0.29.0 (vLLM 0.33's pin; the image's 0.26 is built against torch 2.11);
#   - vLLM 0.33.0 stripped by strip_vllm_wheel.py, FlashAttention-3's kernels kept (vLLM's Hopper pick moves
#     DiffusionGemma to FA4 only where FA3 loads; ~8.4 MB more xz), and what its requirements name that the image lacks (pins below,
#     resolved against the image's package list) less the GPU-kernel packages the text-only AsyncLLM path on
#     TRITON_ATTN never imports (flashinfer, CuTe DSL / cutlass, quack, tilelang, tokenspeed-mla, humming-kernels,
#     cudnn-frontend, fastsafetensors, instanttensor, torchcodec, PyNvVideoCodec, nvtx: the evidence is in
#     bench/RESULTS.md); numba, opencv-python-headless and torchaudio 2.11 stay the image's;
#   - 0.34 only: FlashAttention-4 (vllm/vllm_flash_attn/cute, 3 MB of Python compiled by CuTe DSL at run time), vLLM's
#     stock attention on Hopper since 0.33 and what our backend runs there (the 0.33 kit lacks it and CuTe DSL: an
#     engine on it falls back to another attention backend, so 0.33 figures need the two added first);
#   - compressed-tensors (fp8 checkpoints) and the language server's GPU tests (pygls ... pytest 9);
#   - triton without proton, Blackwell ptxas / CUPTI and static libraries (its AMD backend stays: `import triton`
#     imports it);
#   - every CUDA fatbin entry that is neither sm_90 code nor PTX <= sm_90 zeroed (fatbin_arches.py --zero).
# xz -9 over zstd -19: smaller and faster here (bench/RESULTS.md); XZ_LEVEL=3 trades 5 % size for minutes on a busy machine. Needs: python3 with pip, readelf, xz.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
: "${WORK:?}"
KIT="${KIT:-0.33}" TORCH_VERSION=2.14.0
KEEP=(--keep vllm/vllm_flash_attn/_vllm_fa3_C)
case "$KIT" in
0.33) VLLM_VERSION=0.33.0 NEWER=() ;;
0.34) VLLM_VERSION=0.34.0 KEEP+=(--keep vllm/vllm_flash_attn/cute/)
  NEWER=(huggingface_hub==2.4.0 hf-xet==1.8.0 filelock==4.3.2 tokenizers==0.23.3 transformers==5.22.2
         nvidia-cutlass-dsl==4.8.0 nvidia-cutlass-dsl-libs-base==4.8.0 nvidia-cutlass-dsl-libs-core==4.8.0
         nvidia-cutlass-dsl-libs-cu13==4.8.0 quack-kernels==0.6.5 torch-c-dlpack-ext==0.1.5) ;;
*) echo "payload: KIT=$KIT: no such kit (0.33, 0.34)" >&2; exit 2 ;;
esac
TORCH_PINS=(triton==3.8.0 nvidia-cudnn-cu13==9.24.0.43 nvidia-nccl-cu13==2.30.7 torchvision==0.29.0)
VLLM_DEPS=(agent-detector==2.0.0 annotated-types==0.8.0 anthropic==2.16.0 apache-tvm-ffi==0.1.11 astor==0.8.1
  blake3==1.0.11 cachetools==8.0.2 cbor2==6.3.0 cffi==2.1.1 cryptography==50.0.2 depyf==0.20.0
  detect-installer==0.2.1 dill==0.4.1 dnspython==2.9.2 docstring_parser==0.18.0 email-validator==2.4.0
  fastapi==0.136.3 fastapi-cli==0.0.34 fastapi-cloud-cli==0.28.0 fastar==0.12.0 googleapis-common-protos==1.76.0
  httpcore2==2.16.2 httptools==0.9.0 httpx2==2.16.2 ijson==3.6.0 interegular==0.3.3 jiter==0.19.0 jmespath==1.1.0
  jsonschema==4.26.0 jsonschema-specifications==2025.9.1 lark==1.2.2 llguidance==1.7.6 lm-format-enforcer==0.11.3
  mcp==2.3.0 mcp-types==2.3.0 mistral_common==1.13.1 model-hosting-container-standards==0.1.16 msgspec==0.23.0
  openai==3.60.0 opentelemetry-api==1.45.2 opentelemetry-exporter-http-transport==0.66b2
  opentelemetry-exporter-otlp==1.45.2 opentelemetry-exporter-otlp-common==0.66b2
  opentelemetry-exporter-otlp-proto-common==1.45.2 opentelemetry-exporter-otlp-proto-grpc==1.45.2
  opentelemetry-exporter-otlp-proto-http==1.45.2 opentelemetry-proto==1.45.2 opentelemetry-sdk==1.45.2
  opentelemetry-semantic-conventions==0.66b2 opentelemetry-semantic-conventions-ai==0.5.1 orjson==3.13.0
  oss-harmony==0.0.11 outlines_core==0.2.14 partial-json-parser==0.2.1.1.post7
  prometheus-fastapi-instrumentator==8.1.0 pybase64==1.5.1 pycountry==26.2.16 pycparser==3.12 pydantic==2.14.4
  pydantic-extra-types==2.11.1 pydantic-settings==2.16.3 pydantic_core==2.50.5 PyJWT==2.15.1 python-dotenv==1.2.4
  python-json-logger==4.2.0 python-multipart==0.0.34 pyzmq==27.3.0 referencing==0.37.0 rich-toolkit==0.20.6
  rignore==0.8.1 rpds-py==2026.9.1 sentry-sdk==2.75.0 setproctitle==1.3.8 sniffio==1.3.1 sse-starlette==3.7.1
  starlette==1.10.0 supervisor==4.3.0 truststore==0.10.5 typing-inspection==0.4.5 uvicorn==0.55.0
  watchfiles==1.3.0 websockets==17.4 xgrammar==0.2.8)
FP8_DEPS=(compressed-tensors==0.17.0 loguru==0.7.3)
LSP_DEPS=(pygls==2.1.1 lsprotocol==2025.0.0 cattrs==26.2.1 attrs==26.1.0 json-repair==0.64.6
          pytest-lsp==1.0.1 pytest-asyncio==1.5.0 pytest==9.2.0 pluggy==1.7.0 iniconfig==2.3.1)
PLAT=()
for p in manylinux_2_39 manylinux_2_35 manylinux_2_34 manylinux_2_31 manylinux_2_28 manylinux_2_27 manylinux_2_26 \
         manylinux_2_24 manylinux_2_18 manylinux_2_17 manylinux2014 manylinux_2_5 manylinux1; do PLAT+=(--platform "${p}_x86_64"); done
TAGS=(--only-binary=:all: --python-version 3.12 --implementation cp "${PLAT[@]}")
now() { date +%s; }
quiet() { grep -v "is ignored\|Running pip as\|Target directory" || true; }
t0=$(now)
mkdir -p "$WORK/dl"
# the wheel cache: pip skips what $WORK/dl already holds
python3 -m pip download -q --no-deps "${TAGS[@]}" -d "$WORK/dl" "vllm==$VLLM_VERSION" "torch==$TORCH_VERSION" \
  "${TORCH_PINS[@]}" "${VLLM_DEPS[@]}" "${NEWER[@]}" "${FP8_DEPS[@]}" "${LSP_DEPS[@]}" "$@" 2>&1 | quiet
[ "${PIPESTATUS[0]}" -eq 0 ] || { echo "payload: download failed" >&2; exit 1; }
echo "payload: wheels in $WORK/dl ($(du -sh "$WORK/dl" | cut -f1)), $(( $(now) - t0 )) s"
rm -rf "$WORK/wheels" "$WORK/site" && mkdir -p "$WORK/wheels" "$WORK/site"
VW="$WORK/dl/vllm-$VLLM_VERSION-cp38-abi3-manylinux_2_28_x86_64.whl"
python3 "$HERE/strip_vllm_wheel.py" "${KEEP[@]}" "$VW" "$WORK/wheels/$(basename "$VW")"
for w in "$WORK"/dl/*.whl; do [ "$w" = "$VW" ] || ln -s "$w" "$WORK/wheels/"; done
# one wheel of each name (a re-run with other pins leaves older wheels in the cache): the pins decide
want=("torch==$TORCH_VERSION" "${TORCH_PINS[@]}" "${VLLM_DEPS[@]}" "${NEWER[@]}" "${FP8_DEPS[@]}" "${LSP_DEPS[@]}" "$@")
python3 -m pip install -q --no-index --no-deps --no-compile --ignore-requires-python "${TAGS[@]}" \
  --target "$WORK/site" --find-links "$WORK/wheels" "vllm==$VLLM_VERSION" "${want[@]}" 2>&1 | quiet
[ "${PIPESTATUS[0]}" -eq 0 ] || { echo "payload: install into the site tree failed" >&2; exit 1; }
echo "payload: installed into the site tree, $(( $(now) - t0 )) s"
# triton: what Hopper inference never loads
( cd "$WORK/site/triton" && rm -rf profiler \
  && find . \( -name '*-blackwell*' -o -name '*.a' -o -name 'libproton*' \) -prune -exec rm -rf {} + )
find "$WORK/site" -name __pycache__ -prune -exec rm -rf {} +
zeroed=0
while IFS= read -r f; do
  if readelf -SW "$f" 2>/dev/null | grep -q '\.nv_fatbin'; then
    python3 "$HERE/fatbin_arches.py" "$f" --zero "$f.z" | sed -n '1p;$p' | sed "s|$WORK/site/||"
    mv "$f.z" "$f"; zeroed=$((zeroed + 1))
  fi
done < <(find "$WORK/site" -name '*.so*' -type f -size +1M)
echo "payload: $zeroed libraries zeroed outside sm_90, site $(du -sb "$WORK/site" | cut -f1) B, $(( $(now) - t0 )) s"
rm -f "$WORK/kit.tar.xz"
tar cf - -C "$WORK/site" . | xz "-${XZ_LEVEL:-9}" -T2 > "$WORK/kit.tar.xz"
echo "payload: kit.tar.xz $(stat -c %s "$WORK/kit.tar.xz") B, $(( $(now) - t0 )) s"
