#!/usr/bin/env bash
# Loss (and its adjoint derivative) along one scene value, to show whether a parameter is
# identifiable: a flat loss along KEY means it is not, whatever an optimizer stops at.
#
#   scripts/loss_scan.sh SCENE KEY PARAM V1 V2 ... [-- extra diffphd args]
#
# KEY is a --set key path (e.g. body.0.material.poisson_ratio), PARAM the [[parameter]]
# name as `diffphd gradcheck` prints it (e.g. poisson_ratio[0]); each value costs one
# forward+adjoint and two finite-difference rollouts. Prints "value loss dL/dtheta".
set -euo pipefail
[ $# -ge 4 ] || { sed -n 2,10p "$0"; exit 2; }
scene=$1 key=$2 param=$3; shift 3
values=(); while [ $# -gt 0 ] && [ "$1" != "--" ]; do values+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
bin=${DIFFPHD:-target/release/diffphd}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
printf '%-14s %-22s %s\n' value loss "dL/dtheta($param)"
k=0
for v in "${values[@]}"; do
  k=$((k + 1))   # one output folder per value: each run owns its folder
  out=$("$bin" gradcheck "$scene" --out "$tmp/$k" --set "$key=$v" --param "$param" \
        --decades 0 --rtol 1e9 "$@" 2>/dev/null)
  loss=$(printf '%s\n' "$out" | awk '/^loss = /{print $3}')
  grad=$(printf '%s\n' "$out" | awk -v p="$param" 'index($0, p) == 1 && NF >= 6 {print $(NF-4)}' | tail -1)
  printf '%-14s %-22s %s\n' "$v" "$loss" "$grad"
done
