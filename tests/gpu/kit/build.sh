#!/usr/bin/env bash
# Builds the device kit: everything the H200 machine's image (Python 3.12, torch 2.11+cu130, triton 3.6,
# transformers 5.17, no network) lacks to run vLLM with our plugin and the language server's GPU tests.
#
#   usage (repo root, on a machine with PyPI):  bash tests/gpu/kit/build.sh [EXTRA_WHEEL_SPEC ...]
#                                               KIT=0.33 bash tests/gpu/kit/build.sh [EXTRA_WHEEL_SPEC ...]
#
# KIT=0.34 (default) / 0.33: vLLM 0.34.0 / 0.33.0 on torch 2.14.0 (FlashAttention-3 kept), unpacked, trimmed to
# Hopper and xz-compressed (payload_torch214.sh says what it holds), in one tar cut into parts that each fit one
# device call beside the working tree. Writes .kit-$KIT/part1 ... .kit-$KIT/partN (ignored), each with one piece and
# the manifest (sha256 of every piece).
# Build cache: $KIT_WORK (default /tmp/dgemma-kit-build-$KIT; ~1.8 GB download the first time, minutes of
# compression each build).
# PART_MB: the size of a piece; default: what the 64 MiB of one call leaves beside the travelling tree, less 2 MB.
# Then docs/gpu.md: one device call per part (`bash tests/gpu/run_device.sh stage`), the last one installs.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(git -C "$HERE" rev-parse --show-toplevel)"
KIT="${KIT:-0.34}"
T0=$(date +%s)
case "$KIT" in
0.33 | 0.34) WORK="${KIT_WORK:-/tmp/dgemma-kit-build-$KIT}" KITDIR="$ROOT/.kit-$KIT" ;;
*) echo "KIT=$KIT: no such kit (0.33, 0.34)" >&2; exit 2 ;;
esac
case "$WORK/" in "$ROOT"/*) echo "KIT_WORK must lie outside the tree (it would travel with every call)" >&2; exit 2 ;; esac
WORK="$WORK" KIT="$KIT" bash "$HERE/payload_torch214.sh" "$@"
PAYLOAD="$WORK/kit.tar.xz"

# one piece per device call: what 64 MiB leaves beside the working tree that travels with it
tree=$(cd "$ROOT" && git ls-files -co --exclude-standard -z | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
part_mb=${PART_MB:-$(( (67108864 - tree) / 1000000 - 2 ))}
rm -rf "$KITDIR" && mkdir -p "$KITDIR"
( cd "$WORK" && rm -f kit.part.* && split -b "${part_mb}000000" -a 2 "$PAYLOAD" kit.part. )
n=0
for part in "$WORK"/kit.part.*; do n=$((n + 1)); done
{ echo "kit $KIT"
  echo "total $n"; echo "tar $(sha256sum "$PAYLOAD" | cut -d' ' -f1)"
  for part in "$WORK"/kit.part.*; do echo "piece $(basename "$part") $(sha256sum "$part" | cut -d' ' -f1)"; done
} > "$WORK/MANIFEST"
i=0
for part in "$WORK"/kit.part.*; do
  i=$((i + 1)); mkdir -p "$KITDIR/part$i"; mv "$part" "$KITDIR/part$i/"; cp "$WORK/MANIFEST" "$KITDIR/part$i/"
done
# .gitignore keeps .kit*/ out of git (and so out of the tree that travels)
echo "kit $KIT: $(find "$WORK/site" -type f | wc -l) files, $(( $(du -sb "$WORK/site" | cut -f1) / 1000000 )) MB" \
  "unpacked, xz $(( $(stat -c %s "$PAYLOAD") / 1000000 )) MB in $n pieces of <= $part_mb MB" \
  "(tree $(( tree / 1000000 )) MB travels beside each); built in $(( $(date +%s) - T0 )) s"
du -sh "$KITDIR"/part*
