#!/usr/bin/env bash
# On the device: park the kit pieces this call carried (.kit-$KIT/part*/, KIT=0.34 by default or 0.33) in
# /tmp/kp-$KIT, where they survive to the next call while the machine stays warm (~30 s), check each against the
# manifest's sha256, and say at once which pieces are here and which are still missing.
# Exit 0 when every piece is staged, 4 while some are missing, 2 when no manifest is known.
set -uo pipefail
KIT="${KIT:-0.34}"
case "$KIT" in
0.33 | 0.34) SRC=".kit-$KIT" KP="/tmp/kp-$KIT" ;;
*) echo "kit: KIT=$KIT: no such kit (0.33, 0.34)"; exit 2 ;;
esac
mkdir -p "$KP"
for d in "$SRC"/part*/; do
  [ -d "$d" ] || continue
  cp "$d"/kit.part.* "$d"/MANIFEST "$KP"/ 2>/dev/null
done
[ -f "$KP/MANIFEST" ] || { echo "kit $KIT: no piece staged and none carried (carry $SRC/part1 first)"; exit 2; }
have=() missing=() bad=()
while read -r what name sum; do
  [ "$what" = piece ] || continue
  if [ ! -f "$KP/$name" ]; then missing+=("$name")
  elif [ "$(sha256sum "$KP/$name" | cut -d' ' -f1)" != "$sum" ]; then bad+=("$name"); rm -f "$KP/$name"
  else have+=("$name"); fi
done < "$KP/MANIFEST"
echo "kit $KIT pieces staged: ${have[*]:-none}; missing: ${missing[*]:-none}${bad:+; corrupt (removed): ${bad[*]}}"
[ ${#missing[@]} -eq 0 ] && [ ${#bad[@]} -eq 0 ] && exit 0
exit 4
