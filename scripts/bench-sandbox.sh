#!/usr/bin/env bash
# Sandbox benchmarks, all in one run so that the ratios compare like with like:
#   1. launch-to-exit of /bin/true: bare, unshare, bwrap, sharedos-run exec
#   2. teardown time after the command exits (from the run's outcome record)
#   3. 64 MiB through the CONNECT proxy vs a direct loopback copy
# Needs root, hyperfine, bubblewrap, curl, socat (Debian packages; .ci/run installs them).
# Usage: scripts/bench-sandbox.sh [RUNS]   (prints a Markdown section for BENCHMARKS.md)
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS="${1:-100}"
for t in hyperfine bwrap unshare curl socat; do
  command -v "$t" >/dev/null || { echo "bench-sandbox: $t is not installed" >&2; exit 1; }
done
work="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
bin="$work/sharedos-run"
# As the Makefile builds it: urfave_cli_no_docs drops the CLI's man-page generator
# (blackfriday), whose initialisers ran at every start of the binary.
CGO_ENABLED=0 go build -trimpath -tags urfave_cli_no_docs -o "$bin" ./cmd/sharedos-run

echo "## Sandbox"
echo
echo "Measured $(date -u +%Y-%m-%d) on $(nproc) cores, $(uname -r), as $(id -un); cgroup mode: $("$bin" doctor --json | sed -n 's/.*"cgroupMode": "\(.*\)".*/\1/p'). Script: \`scripts/bench-sandbox.sh $RUNS\`."
echo

# 1. Launch to exit.
hyperfine -N --warmup 10 --runs "$RUNS" --export-csv "$work/launch.csv" --style none \
  -n true '/bin/true' \
  -n unshare 'unshare --net --pid --fork --mount-proc /bin/true' \
  -n bwrap 'bwrap --unshare-net --unshare-pid --die-with-parent --ro-bind / / /bin/true' \
  -n sharedos-run-version "$bin version" \
  -n sharedos-run "$bin exec -- /bin/true" >/dev/null 2>&1
echo "### Launch to exit of \`/bin/true\` (hyperfine, $RUNS runs each)"
echo
echo "| command | mean ms | ± ms | vs /bin/true | vs bwrap |"
echo "|---|---:|---:|---:|---:|"
awk -F, 'NR>1 { name[NR]=$1; mean[NR]=$2*1000; sd[NR]=$3*1000; if ($1=="true") base=$2*1000; if ($1=="bwrap") bw=$2*1000; n=NR }
  END { for (i=2;i<=n;i++) printf "| %s | %.2f | %.2f | %.1f× | %.2f× |\n", name[i], mean[i], sd[i], mean[i]/base, mean[i]/bw }' "$work/launch.csv"
awk -F, 'NR>1 { m[$1]=$2 } END { ov=m["sharedos-run"]-m["true"]; ob=m["bwrap"]-m["true"];
  oz=m["sharedos-run"]-m["sharedos-run-version"]-m["true"];
  printf "\nSandbox overhead over bare `/bin/true`: sharedos-run %.2f ms, bwrap %.2f ms: **%.2f× bwrap'"'"'s** (target ≤ 2×).\n", ov*1000, ob*1000, ov/ob;
  printf "Of that, starting the Go binary itself (`sharedos-run version`) is %.2f ms; the sandbox work beyond it (second process start for the stub, namespaces, cgroups, mount view, teardown) is %.2f ms, %.2f× bwrap'"'"'s overhead.\n", (m["sharedos-run-version"])*1000, oz*1000, oz/ob }' "$work/launch.csv"
echo

# 2. Teardown: from the stub's exit to everything gone (cgroups removed, scratch deleted).
for i in $(seq 1 "$RUNS"); do
  "$bin" exec --outcome "$work/o.json" -- /bin/true
  sed -n 's/.*"teardownMs": \([0-9.]*\).*/\1/p' "$work/o.json"
done | sort -n > "$work/teardown.txt"
echo "### Teardown after the command exits ($RUNS runs)"
echo
awk '{ v[NR]=$1 } END { printf "median %.2f ms, p95 %.2f ms, max %.2f ms (target < 50 ms): stats read, cgroups killed and removed, relays closed, scratch removed.\n", v[int(NR/2)+1], v[int(NR*0.95)], v[NR] }' "$work/teardown.txt"
echo

# 3. Proxy throughput: 64 MiB from a loopback server, directly and through the proxy.
head -c $((64 << 20)) /dev/urandom > "$work/big"
port=$((20000 + RANDOM % 20000))
cat > "$work/serve.sh" <<SERVE
printf 'HTTP/1.0 200 OK\r\nContent-Length: 67108864\r\n\r\n'
exec cat "$work/big"
SERVE
socat TCP-LISTEN:$port,bind=127.0.0.1,reuseaddr,fork SYSTEM:"sh $work/serve.sh" 2>/dev/null &
for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.1; done
proxied="curl -sf --noproxy '' -p -x \"\$HTTPS_PROXY\" -o /dev/null http://127.0.0.1:$port/big"
hyperfine -N --warmup 2 --runs 20 --export-csv "$work/proxy.csv" --style none \
  -n direct "curl -sf -o /dev/null http://127.0.0.1:$port/big" \
  -n sandbox-empty "$bin exec -- /bin/true" \
  -n via-proxy "$bin exec --allow-egress 127.0.0.1:$port -- sh -c '$proxied'" >/dev/null 2>&1
echo "### 64 MiB through the CONNECT proxy vs a direct loopback copy (curl, 20 runs each)"
echo
awk -F, 'NR>1 { m[$1]=$2 } END { d=m["direct"]; p=m["via-proxy"]-m["sandbox-empty"];
  printf "| path | time ms | MiB/s |\n|---|---:|---:|\n| direct loopback | %.1f | %.0f |\n| through the proxy (sandbox start subtracted) | %.1f | %.0f |\n\nProxy throughput is %.2f× the direct copy.\n", d*1000, 64/d, p*1000, 64/p, d/p }' "$work/proxy.csv"
