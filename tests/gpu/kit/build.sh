#!/usr/bin/env bash
# Builds the device kit: everything the H200 machine's image (Python 3.12, torch 2.11+cu130, triton 3.6,
# transformers 5.17, no network) lacks to run vLLM with our plugin and the language server's GPU tests.
#
#   usage (repo root, on a machine with PyPI):  bash tests/gpu/kit/build.sh [EXTRA_WHEEL_SPEC ...]
#                                               KIT=0.33 bash tests/gpu/kit/build.sh [EXTRA_WHEEL_SPEC ...]
#
# KIT=0.26 (default): vLLM 0.26 on the image's torch 2.11, in one tar cut into parts that each fit one device call
# beside the working tree:
#   - vLLM 0.26.0, stripped of the kernels TRITON_ATTN inference on Hopper never loads (strip_vllm_wheel.py);
#   - FlashAttention-3's kernels from the same wheel, xz-compressed (the plugin's `attention` piece uses them);
#   - what vLLM 0.26's AsyncLLM path imports and the image lacks, plus compressed-tensors and loguru (fp8 checkpoints);
#   - the language server and its GPU tests: pygls, lsprotocol, cattrs, attrs, json-repair, pytest-lsp,
#     pytest-asyncio, and pytest 9 with pluggy / iniconfig (pytest-asyncio 1.x needs a newer pytest than the image's).
# Writes .kit/part1 ... .kit/partN (ignored), each with one piece and the manifest (sha256 of every piece).
# KIT=0.33 / 0.34: vLLM 0.33.0 / 0.34.0 on torch 2.14.0 (FlashAttention-3 kept), unpacked, trimmed to Hopper and
# xz-compressed (payload_torch214.sh says what it holds); writes .kit-$KIT/part1 ... .kit-$KIT/partN the same way.
# Build cache: $KIT_WORK (default /tmp/dgemma-kit-build, /tmp/dgemma-kit-build-0.33; 0.26: ~300 MB download the
# first time, seconds after; 0.33: ~1.8 GB download, minutes of compression each build).
# PART_MB: the size of a piece; default: what the 64 MiB of one call leaves beside the travelling tree, less 2 MB.
# Then docs/gpu.md: one device call per part (`bash tests/gpu/run_device.sh stage`), the last one installs.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(git -C "$HERE" rev-parse --show-toplevel)"
KIT="${KIT:-0.26}"
T0=$(date +%s)
case "$KIT" in
0.26) WORK="${KIT_WORK:-/tmp/dgemma-kit-build}" KITDIR="$ROOT/.kit" ;;
0.33 | 0.34) WORK="${KIT_WORK:-/tmp/dgemma-kit-build-$KIT}" KITDIR="$ROOT/.kit-$KIT" ;;
*) echo "KIT=$KIT: no such kit (0.26, 0.33, 0.34)" >&2; exit 2 ;;
esac
case "$WORK/" in "$ROOT"/*) echo "KIT_WORK must lie outside the tree (it would travel with every call)" >&2; exit 2 ;; esac
if [ "$KIT" != 0.26 ]; then
  WORK="$WORK" KIT="$KIT" bash "$HERE/payload_torch214.sh" "$@"
  PAYLOAD="$WORK/kit.tar.xz"
else
VLLM_VERSION=0.26.0
mkdir -p "$WORK/dl" "$WORK/wheels"
PLAT=()
for p in manylinux_2_39 manylinux_2_35 manylinux_2_34 manylinux_2_31 manylinux_2_28 manylinux_2_27 manylinux_2_26 \
         manylinux_2_24 manylinux_2_17 manylinux2014 manylinux_2_5 manylinux1; do PLAT+=(--platform "${p}_x86_64"); done
dl() { python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
         "${PLAT[@]}" -d "$1" "${@:2}"; }

VLLM_WHL="$WORK/dl/vllm-$VLLM_VERSION-cp38-abi3-manylinux_2_28_x86_64.whl"
[ -f "$VLLM_WHL" ] || dl "$WORK/dl" "vllm==$VLLM_VERSION"
rm -rf "$WORK/wheels" "$WORK/payload" && mkdir -p "$WORK/wheels" "$WORK/payload"
python3 "$HERE/strip_vllm_wheel.py" "$VLLM_WHL" "$WORK/wheels/$(basename "$VLLM_WHL")"
python3 - "$VLLM_WHL" "$WORK/payload/fa3.so.xz" <<'PY'
import lzma, sys, zipfile
data = zipfile.ZipFile(sys.argv[1]).read("vllm/vllm_flash_attn/_vllm_fa3_C.abi3.so")
packed = lzma.compress(data, preset=6)
open(sys.argv[2], "wb").write(packed)
print(f"fa3 kernels: {len(data) / 1e6:.0f} MB, xz {len(packed) / 1e6:.1f} MB")
PY
# vLLM 0.26's LLM / AsyncLLM imports (found against the image's package list, /work/.library/device/KINDS.md)
VLLM_DEPS=(pydantic==2.14.4 pydantic_core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5
           msgspec==0.23.0 pyzmq==27.3.0 pybase64==1.5.1 cachetools==8.0.2 blake3==1.0.11 cbor2==6.3.0
           setproctitle==1.3.8 partial-json-parser==0.2.1.1.post7 ijson==3.6.0 python-json-logger==4.2.0
           openai==3.57.0 jiter==0.19.0 sniffio==1.3.1 httpx2==2.16.2 httpcore2==2.16.2 truststore==0.10.5
           openai-harmony==0.0.8 llguidance==1.7.6 xgrammar==0.2.9 apache-tvm-ffi==0.1.15.post2
           fastapi==0.136.3 starlette==1.10.0)
FP8_DEPS=(compressed-tensors==0.20.1 loguru==0.7.3)
LSP_DEPS=(pygls==2.1.1 lsprotocol==2025.0.0 cattrs==26.2.1 attrs==26.1.0 json-repair==0.64.6
          pytest-lsp==1.0.1 pytest-asyncio==1.5.0 pytest==9.2.0 pluggy==1.7.0 iniconfig==2.3.1)
dl "$WORK/wheels" "${VLLM_DEPS[@]}" "${FP8_DEPS[@]}" "${LSP_DEPS[@]}"
[ $# -gt 0 ] && dl "$WORK/wheels" "$@"   # extra wheels a run needs
mv "$WORK/wheels" "$WORK/payload/wheels"
( cd "$WORK/payload" && find . -type f | sort > ../payload.txt && tar cf ../kit.tar -T ../payload.txt )
PAYLOAD="$WORK/kit.tar"
fi

# one piece per device call: what 64 MiB leaves beside the working tree that travels with it
tree=$(cd "$ROOT" && git ls-files -co --exclude-standard -z | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
part_mb=${PART_MB:-$(( (67108864 - tree) / 1000000 - 2 ))}
rm -rf "$KITDIR" && mkdir -p "$KITDIR"
( cd "$WORK" && rm -f kit.part.* && split -b "${part_mb}000000" -a 2 "$PAYLOAD" kit.part. )
n=0
for part in "$WORK"/kit.part.*; do n=$((n + 1)); done
{ [ "$KIT" = 0.26 ] || echo "kit $KIT"
  echo "total $n"; echo "tar $(sha256sum "$PAYLOAD" | cut -d' ' -f1)"
  for part in "$WORK"/kit.part.*; do echo "piece $(basename "$part") $(sha256sum "$part" | cut -d' ' -f1)"; done
} > "$WORK/MANIFEST"
i=0
for part in "$WORK"/kit.part.*; do
  i=$((i + 1)); mkdir -p "$KITDIR/part$i"; mv "$part" "$KITDIR/part$i/"; cp "$WORK/MANIFEST" "$KITDIR/part$i/"
done
# .gitignore keeps .kit*/ out of git (and so out of the tree that travels)
if [ "$KIT" = 0.26 ]; then
  echo "kit: $(wc -l < "$WORK/payload.txt") files, tar $(( $(stat -c %s "$PAYLOAD") / 1000000 )) MB in $n pieces of" \
    "<= $part_mb MB (tree $(( tree / 1000000 )) MB travels beside each)"
else
  echo "kit $KIT: $(find "$WORK/site" -type f | wc -l) files, $(( $(du -sb "$WORK/site" | cut -f1) / 1000000 )) MB" \
    "unpacked, xz $(( $(stat -c %s "$PAYLOAD") / 1000000 )) MB in $n pieces of <= $part_mb MB" \
    "(tree $(( tree / 1000000 )) MB travels beside each); built in $(( $(date +%s) - T0 )) s"
fi
du -sh "$KITDIR"/part*
