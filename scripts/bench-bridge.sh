#!/usr/bin/env bash
# Bridge benchmarks, bridge and baseline in one run so that the ratios compare like
# with like. Baseline: a bare go-sdk server (same transport: stateful Streamable HTTP,
# JSON responses) with a no-op tool. Bridge: token check + kernel decision + files.stat.
# Prints a Markdown section for BENCHMARKS.md.
# Usage: scripts/bench-bridge.sh [COUNT] [CALLS]   (defaults: 6 runs of 4000 calls)
set -euo pipefail
cd "$(dirname "$0")/.."
COUNT="${1:-6}"
CALLS="${2:-4000}"
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
go test ./bridge/ -run '^$' -bench 'CallRoundTrip|Throughput8Clients|IdleSessionHeap' \
  -benchtime="${CALLS}x" -count="$COUNT" >"$out"

# median VALUE-COLUMN-NAME BENCH-NAME
median() {
  awk -v unit="$1" -v name="$2" '$1 ~ name { for (i = 2; i < NF; i++) if ($(i+1) == unit) print $i }' "$out" |
    sort -g | awk '{ v[n++] = $1 } END { if (n == 0) { print "n/a"; exit } printf "%.0f", (n % 2) ? v[(n-1)/2] : (v[n/2-1] + v[n/2]) / 2 }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b == 0) print "n/a"; else printf "%.2f", a / b }'; }

bp50=$(median p50-µs 'CallRoundTrip/bare'); gp50=$(median p50-µs 'CallRoundTrip/bridge')
bp99=$(median p99-µs 'CallRoundTrip/bare'); gp99=$(median p99-µs 'CallRoundTrip/bridge')
bthr=$(median calls/s 'Throughput8Clients/bare'); gthr=$(median calls/s 'Throughput8Clients/bridge')
bheap=$(median heap-B/session 'IdleSessionHeap/bare'); gheap=$(median heap-B/session 'IdleSessionHeap/bridge')

echo "## Bridge"
echo
echo "Measured $(date -u +%Y-%m-%d) on $(nproc) cores with $(go version | awk '{print $3}'). Script: \`scripts/bench-bridge.sh $COUNT $CALLS\` (medians of $COUNT runs of $CALLS calls; client and server in one process over loopback)."
echo
echo "| measure | bare go-sdk server (no-op tool) | bridge (token + kernel + files.stat) | bridge / bare |"
echo "|---|---:|---:|---:|"
echo "| tools/call round trip p50 | ${bp50} µs | ${gp50} µs | $(ratio "$gp50" "$bp50")× |"
echo "| tools/call round trip p99 | ${bp99} µs | ${gp99} µs | $(ratio "$gp99" "$bp99")× |"
echo "| throughput, 8 concurrent clients | ${bthr} calls/s | ${gthr} calls/s | $(ratio "$gthr" "$bthr")× |"
echo "| heap per idle session (both ends) | ${bheap} B | ${gheap} B | $(ratio "$gheap" "$bheap")× |"
echo
echo "Target: p50 round trip ≤ 1.5× the bare server."
