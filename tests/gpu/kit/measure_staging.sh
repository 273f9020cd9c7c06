#!/usr/bin/env bash
# Measures what staging a vLLM + torch pair on the H200 would carry (sizes, times); stages nothing.
#
#   usage (repo root, on a machine with PyPI):  bash tests/gpu/kit/measure_staging.sh [VLLM_VERSION TORCH_VERSION]
#
# Downloads the cp312 manylinux x86_64 wheels with --no-deps into $WORK (default /tmp/v033-wheels), strips vLLM as
# the kits do (strip_vllm_wheel.py), zeroes every CUDA entry that is neither sm_90 code nor PTX <= sm_90 in
# both (fatbin_arches.py --zero; not yet tried on the device), tars the unpacked trees and compresses the tar with
# zstd -19 and xz -9. Prints each step's time and size; the number of 60 MiB parts follows from the sizes.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
VLLM_VERSION="${1:-0.33.0}" TORCH_VERSION="${2:-2.14.0}"
WORK="${WORK:-/tmp/v033-wheels}"
mkdir -p "$WORK/dl" && cd "$WORK"
t() { local s; s=$(date +%s.%N); "$@" >/dev/null; echo "$(echo "$(date +%s.%N) - $s" | bc) s"; }
sz() { stat -c %s "$1"; }
parts() { echo $(( ($1 + 62914559) / 62914560 )); }
PLAT=()
for p in manylinux_2_28 manylinux_2_17 manylinux2014; do PLAT+=(--platform "${p}_x86_64"); done
dl() { python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
         "${PLAT[@]}" -d dl "$@"; }
echo "download vllm==$VLLM_VERSION: $(t dl "vllm==$VLLM_VERSION")"
echo "download torch==$TORCH_VERSION: $(t dl "torch==$TORCH_VERSION")"
VW=$(ls dl/vllm-"$VLLM_VERSION"-*.whl) TW=$(ls dl/torch-"$TORCH_VERSION"-cp312-*.whl)
echo "wheels: vllm $(sz "$VW") B ($(parts "$(sz "$VW")") parts), torch $(sz "$TW") B ($(parts "$(sz "$TW")") parts)"
echo "strip vllm: $(t python3 "$HERE/strip_vllm_wheel.py" "$VW" vllm-stripped.whl), $(sz vllm-stripped.whl) B"
rm -rf payload && mkdir -p payload/torch payload/vllm
echo "unzip: $(t unzip -q "$TW" -d payload/torch) torch, $(t unzip -q vllm-stripped.whl -d payload/vllm) vllm"
s=$(date +%s.%N)
while IFS= read -r f; do
  if readelf -SW "$f" | grep -q '\.nv_fatbin'; then python3 "$HERE/fatbin_arches.py" "$f" --zero "$f.z"; mv "$f.z" "$f"; fi
done < <(find payload -name '*.so' -size +1M)
echo "zero non-Hopper CUDA code: $(echo "$(date +%s.%N) - $s" | bc) s"
echo "tar: $(t tar cf hopper.tar -C payload .), $(sz hopper.tar) B"
echo "zstd -19 -T2: $(t zstd -q -19 -T2 -f hopper.tar -o hopper.tar.zst), $(sz hopper.tar.zst) B ($(parts "$(sz hopper.tar.zst)") parts)"
echo "xz -9 -T2: $(t xz -9 -T2 -k -f hopper.tar), $(sz hopper.tar.xz) B ($(parts "$(sz hopper.tar.xz)") parts)"
