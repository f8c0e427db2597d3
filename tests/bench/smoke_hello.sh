#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# ctest smoke test (label integration): mgbench's hello workload against
# mgbench-hello for one second must succeed, write parseable JSON with a
# nonzero GET rate and no errors, and (when gnuplot is installed) a PNG.
# usage: smoke_hello.sh MGBENCH MGBENCH_HELLO
set -euo pipefail
MGBENCH=$1
HELLO=$2
WORK=$(mktemp -d /tmp/mgb-smoke-XXXXXX)
"$HELLO" --port 0 --threads 1 >"$WORK/hello.log" 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null || true; rm -rf "$WORK"' EXIT
for _ in $(seq 50); do grep -q listening "$WORK/hello.log" && break; sleep 0.1; done
ADDR=$(sed -n 's/.*listening on \([^ ]*\).*/\1/p' "$WORK/hello.log")
PLOT=()
if command -v gnuplot >/dev/null; then PLOT=(--plot "$WORK/hello.png"); fi
"$MGBENCH" --endpoint "http://$ADDR" --duration 1 --concurrency 4 --threads 2 --no-progress \
    --json "$WORK/hello.json" --csv "$WORK/hello.csv" "${PLOT[@]}" hello
python3 - "$WORK/hello.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
g = d["ops"]["GET"]
assert d["workload"] == "hello", d
assert g["ops_per_s"] > 0 and g["errors"] == 0 and g["p50_ms"] > 0, g
PY
grep -q '^http://.*,summary,,GET,' "$WORK/hello.csv"
if [ ${#PLOT[@]} -gt 0 ]; then test -s "$WORK/hello.png"; fi
echo "smoke_hello: ok"
