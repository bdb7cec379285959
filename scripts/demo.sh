#!/usr/bin/env bash
# The main job on the embedded default, offline: install the pinned harness CLIs,
# build sharedos-run, run one turn of the real Claude Code in the sandbox (the
# scripted model in the model's seat, the built-in files catalogue its only way to
# act) and print the record's summary; then run the whole conformance case set through
# every installed harness and print the comparison table.
# Needs root (the sandbox), Node/npm (the installs) and Go.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-harnesses.sh
make -s build
# The workspace lives outside /tmp, which the sandbox hides (the files tools run
# outside the sandbox anyway; this keeps the demo's paths readable).
ws=$(mktemp -d /var/tmp/sharedos-demo-XXXXXX)
trap 'rm -rf "$ws"' EXIT
cp -r testdata/example/workspace/. "$ws/"
record="${DEMO_RECORD:-demo-record.json}"
echo "== sharedos-run claude-code (scripted model: testdata/demo-script.json; grants: testdata/example/config.yaml)"
status=0
./bin/sharedos-run claude-code --config testdata/example/config.yaml --workspace "$ws" \
  --script testdata/demo-script.json --timeout 3m --record "$record" \
  -- "Summarize this workspace into docs/summary.md" || status=$?
echo
echo "== the workspace afterwards: docs/summary.md"
cat "$ws/docs/summary.md" 2>/dev/null || echo "(not written)"
echo "== full record: $record"
echo
echo "== sharedos-run conformance --full (scripted model, every installed harness)"
./bin/sharedos-run conformance --full --jobs 2 || status=$?
exit "$status"
