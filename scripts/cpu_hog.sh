#!/usr/bin/env bash
# A CPU hog for the stress run (CONTRIBUTING): N busy processes (default: twice the CPU count)
# until killed. `scripts/cpu_hog.sh & hog=$!; ...; kill $hog`
n="${1:-$(( $(nproc) * 2 ))}"
pids=()
trap 'kill "${pids[@]}" 2>/dev/null' EXIT INT TERM
for _ in $(seq "$n"); do
  ( while :; do :; done ) &
  pids+=($!)
done
wait
