#!/usr/bin/env bash
# The full conformance matrix (scripted model) with --jobs 1 and --jobs 2 on this
# machine, in one run; prints a Markdown section for BENCHMARKS.md.
# Needs root and the pinned harnesses (scripts/install-harnesses.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
make -s build
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
run() { # jobs
  local start end
  start=$(date +%s.%N)
  ./bin/sharedos-run conformance --full --jobs "$1" --out "$work/jobs$1" >/dev/null 2>&1 || true
  end=$(date +%s.%N)
  awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }'
}
t1=$(run 1)
t2=$(run 2)
cells=$(python3 -c "import json,sys; d=json.load(open('$work/jobs2/mcp-conformance.json')); print(sum(len(r['cells']) for r in d['rows']))")
echo "## Conformance"
echo
echo "Measured $(date -u +%Y-%m-%d) on $(nproc) cores. Script: \`scripts/bench-conformance.sh\` (the full case set, scripted model, every column; one run each)."
echo
echo "| run | cells | wall time | speed-up |"
echo "|---|---:|---:|---:|"
echo "| \`--jobs 1\` | $cells | ${t1} s | 1.00× |"
echo "| \`--jobs 2\` | $cells | ${t2} s | $(awk -v a="$t1" -v b="$t2" 'BEGIN { printf "%.2f", a / b }')× |"
echo
echo "Each cell is one real harness turn in its own sandbox; the unavailable DeepSeek column costs nothing."
