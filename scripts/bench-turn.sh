#!/usr/bin/env bash
# Turn benchmark: a full scripted Claude Code turn (files.read README.md, then the
# final text) under sharedos-run vs the same CLI invocation outside it, both in one
# run so that the ratio compares like with like. Baseline ("direct"): the same
# kernel, catalogue, scripted model and bridge in process, the same argv, files and
# environment from the harness spec, the CLI started with os/exec. Sandboxed:
# launcher.RunTurn, exactly what `sharedos-run claude-code -- "task"` does.
# Needs root and the pinned Claude Code (scripts/install-harnesses.sh).
# Prints a Markdown section for BENCHMARKS.md.
# Usage: scripts/bench-turn.sh [COUNT] [TURNS]   (defaults: 5 runs of 5 turns each)
set -euo pipefail
cd "$(dirname "$0")/.."
COUNT="${1:-5}"
TURNS="${2:-5}"
claude=.harnesses/node_modules/.bin/claude
[ "$(id -u)" = 0 ] || { echo "bench-turn: needs root (the sandbox)" >&2; exit 1; }
[ -x "$claude" ] || { echo "bench-turn: $claude is not installed (scripts/install-harnesses.sh)" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
out="$work/bench.txt"
# One test binary run COUNT times (not -count, which would run all sandboxed runs
# before all direct ones): sandboxed and direct alternate, so load drift hits both.
go test -c -o "$work/launcher.test" ./launcher/
load_before=$(cut -d' ' -f1 /proc/loadavg)
for _ in $(seq "$COUNT"); do
  (cd launcher && "$work/launcher.test" -test.run '^$' -test.bench 'ClaudeTurn' -test.benchtime="${TURNS}x" -test.timeout 10m) >>"$out"
done
load_after=$(cut -d' ' -f1 /proc/loadavg)
if grep -q -- '--- SKIP' "$out" || ! grep -q 'ClaudeTurn/direct' "$out"; then
  cat "$out" >&2
  echo "bench-turn: the benchmark was skipped or failed" >&2
  exit 1
fi

# median UNIT BENCH-NAME
median() {
  awk -v unit="$1" -v name="$2" '$1 ~ name { for (i = 2; i < NF; i++) if ($(i+1) == unit) print $i }' "$out" |
    sort -g | awk '{ v[n++] = $1 } END { if (n == 0) { print "n/a"; exit } printf "%.1f", (n % 2) ? v[(n-1)/2] : (v[n/2-1] + v[n/2]) / 2 }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b == 0) print "n/a"; else printf "%.2f", a / b }'; }
calc() { awk "BEGIN { printf \"%.1f\", $1 }"; }
range() {
  awk -v unit="$1" -v name="$2" '$1 ~ name { for (i = 2; i < NF; i++) if ($(i+1) == unit) print $i }' "$out" |
    sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%.0f–%.0f", lo, hi }'
}

S='ClaudeTurn/sandboxed'; D='ClaudeTurn/direct'
st=$(median ms/turn "$S"); dt=$(median ms/turn "$D")
ss=$(median setup-ms/turn "$S"); ds=$(median setup-ms/turn "$D")
sc=$(median cli-start-ms/turn "$S"); dc=$(median cli-start-ms/turn "$D")
sp=$(median probe-ms/turn "$S")
su=$(median cpu-ms/turn "$S"); du=$(median cpu-ms/turn "$D")
sr=$(calc "$st - $ss - $sc"); dr=$(calc "$dt - $ds - $dc")

echo "## Turn"
echo
echo "Measured $(date -u +%Y-%m-%d) on $(nproc) cores with $(go version | awk '{print $3}'), as $(id -un), Claude Code $("$claude" --version 2>/dev/null | awk '{print $1}'); load average $load_before before, $load_after after. Script: \`scripts/bench-turn.sh $COUNT $TURNS\` (\`BenchmarkClaudeTurn\` in \`launcher/bench_test.go\`: medians of $COUNT runs, each one test process running sandboxed then direct, each of those the mean of $TURNS turns after an unreported warm-up turn)."
echo
echo "One turn: the scripted model (Anthropic Messages on host loopback) makes Claude Code call \`files.read\` on README.md through the bridge, then answers with the final text. **direct**: the same CLI invocation outside the sandbox — same kernel, catalogue, scripted model and bridge in process (the bridge on a host loopback listener), same argv, files and environment from the harness spec, started with os/exec. **sandboxed**: \`launcher.RunTurn\`, exactly what \`sharedos-run claude-code -- \"task\"\` does."
echo
echo "| measure | direct | sandboxed | sandboxed / direct |"
echo "|---|---:|---:|---:|"
echo "| **full turn** | **${dt} ms** | **${st} ms** | **$(ratio "$st" "$dt")×** |"
echo "| setup before the CLI starts | ${ds} ms | ${ss} ms | $(ratio "$ss" "$ds")× |"
echo "| CLI start to MCP initialize with the bridge | ${dc} ms | ${sc} ms | $(ratio "$sc" "$dc")× |"
echo "| rest: model turns, files.read, exit, teardown | ${dr} ms | ${sr} ms | $(ratio "$sr" "$dr")× |"
echo "| CPU time of the CLI (sandboxed: its cgroup, stub included) | ${du} ms | ${su} ms | $(ratio "$su" "$du")× |"
echo
echo "Range of the $COUNT run means: direct $(range ms/turn "$D") ms, sandboxed $(range ms/turn "$S") ms."
echo
echo "Overhead per turn: $(calc "$st - $dt") ms ($(calc "($st - $dt) * 100 / $dt")% of the direct turn). Where it goes:"
echo
echo "- setup, $(calc "$ss - $ds") ms: the availability probe (\`claude --version\`, which every sharedos-run turn runs and the direct invocation does not) ${sp} ms;"
echo "  the rest, $(calc "$ss - $ds - $sp") ms, is the sandbox start (compare the Sandbox section's launch to exit of \`sharedos-run exec -- /bin/true\`; here the stub is the test binary) with the model mirror and the bridge listener inside;"
echo "- Claude Code's own start-up, from exec until it has initialized with the bridge, is the largest part of either turn; in the sandbox it changes by $(calc "$sc - $dc") ms;"
echo "- the rest of the turn (two model round trips, the bridge call, the CLI's exit; for sandboxed also the sandbox teardown and the record) changes by $(calc "$sr - $dr") ms."
echo
echo "Wall times on this shared 2-core host move with other work (the range above; the load average is the whole host's); the CPU time row does not, and says whether Claude Code works harder inside the sandbox than outside: $(calc "$su - $du") ms per turn."
