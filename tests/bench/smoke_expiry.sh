#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# ctest smoke test (label integration): `mgbench expiry` with 4,000 objects and
# one configuration against its own metagate must load every object, run the
# LIST loops, stop the server, and write the --json document with exactly the
# documented keys (null where the server has no figure yet) and (when gnuplot is
# installed) a PNG. It does not require expiry to happen.
# usage: smoke_expiry.sh MGBENCH METAGATE
set -euo pipefail
MGBENCH=$1
METAGATE=$2
WORK=$(mktemp -d /tmp/mgb-smoke-expiry-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
PLOT=()
if command -v gnuplot >/dev/null; then PLOT=(--plot "$WORK/expiry.png"); fi
"$MGBENCH" expiry --objects 4000 --configs range+locality --metagate "$METAGATE" \
    --before 1 --after 1 --wait 4 --concurrency 8 --json "$WORK/expiry.json" "${PLOT[@]}" \
    >"$WORK/out.txt" 2>"$WORK/err.txt" || { cat "$WORK/err.txt" >&2; exit 1; }
grep -q 'load\] 5000/5000 objects' "$WORK/err.txt"
python3 - "$WORK/expiry.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert list(d) == ["configs"], d
(c,) = d["configs"]
keys = ["config", "objects", "expired_per_s", "list_p50_ms", "list_p99_ms", "list_max_ms",
        "recover_s", "peak_tombstones", "lsm_bytes_written"]
assert list(c) == keys, c
assert c["config"] == "range+locality" and c["objects"] == 4000, c
assert c["list_p50_ms"] > 0 and c["list_max_ms"] >= c["list_p99_ms"] >= c["list_p50_ms"], c
PY
if [ ${#PLOT[@]} -gt 0 ]; then test -s "$WORK/expiry.png"; fi
# the server it started is gone, and so is its data dir
PID=$(sed -n 's/.*metagate pid \([0-9]*\) on .*/\1/p' "$WORK/err.txt")
DIR=$(sed -n 's/.*data in \(.*\)$/\1/p' "$WORK/err.txt")
test -n "$PID" && ! kill -0 "$PID" 2>/dev/null
test -n "$DIR" && test ! -e "$DIR"
echo "smoke_expiry: ok"
