#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# mgbench's own overhead (issue 3, done-when 2): wrk and mgbench's hello
# workload, one run each, same connections, threads and duration, against the
# same trivial endpoint. By default that is mgbench-hello (a fixed 200 "hello"
# keep-alive server, started here on a free port with --server-threads
# threads and stopped by PID); --url points both at another endpoint (e.g.
# metagate's /health). Prints both rates and mgbench/wrk.
#
# Besides the rates it prints each client's CPU time per request (user + system,
# from getrusage of the child), which a shared noisy box disturbs much less than the
# rates: it says directly which client costs more per request.
# With --runs N the pair is repeated N times, alternating wrk and mgbench, and
# the ratio of the medians is printed too (the box is shared and noisy).
#
# usage: tests/bench/hello_vs_wrk.sh [--duration S] [--connections N] [--threads N]
#                                    [--server-threads N] [--url http://host:port/path]
#                                    [--runs N]
# env:   BUILD (default <repo>/build), MGBENCH, HELLO, WRK (/usr/bin/wrk)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-$ROOT/build}
MGBENCH=${MGBENCH:-$BUILD/mgbench}
HELLO=${HELLO:-$BUILD/mgbench-hello}
WRK=${WRK:-wrk}
DURATION=10
CONNS=20
THREADS=$(nproc)
SERVER_THREADS=1
URL=
RUNS=1
while [ $# -gt 0 ]; do
    case "$1" in
    --duration) DURATION=$2; shift 2 ;;
    --connections) CONNS=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --server-threads) SERVER_THREADS=$2; shift 2 ;;
    --url) URL=$2; shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    -h|--help) sed -n '3,22p' "$0"; exit 0 ;;
    *) echo "hello_vs_wrk.sh: unknown option $1" >&2; exit 2 ;;
    esac
done

WORK=$(mktemp -d /tmp/mgb-hello-XXXXXX)
SRV_PID=
cleanup() {
    if [ -n "$SRV_PID" ]; then kill "$SRV_PID" 2>/dev/null || true; fi
}
trap cleanup EXIT

if [ -z "$URL" ]; then
    "$HELLO" --port 0 --threads "$SERVER_THREADS" >"$WORK/hello.log" 2>&1 &
    SRV_PID=$!
    for _ in $(seq 50); do grep -q listening "$WORK/hello.log" 2>/dev/null && break; sleep 0.1; done
    URL="http://$(sed -n 's/.*listening on \([^ ]*\).*/\1/p' "$WORK/hello.log")/"
fi
HOSTPORT=$(echo "$URL" | sed -E 's|^(http://[^/]+).*|\1|')
PATH_PART=$(echo "$URL" | sed -E 's|^http://[^/]+||')
PATH_PART=${PATH_PART:-/}

echo "endpoint:  $URL (server threads: ${SERVER_THREADS}, when started here)"
echo "load:      $CONNS connections, $THREADS threads, ${DURATION} s per run"
WRK_RATES=
MGB_RATES=
# cpu_run OUT CMD...: run CMD with stdout+stderr to OUT; print its user+system CPU seconds.
cpu_run() {
    python3 -c 'import resource,subprocess,sys
with open(sys.argv[1], "w") as f: subprocess.run(sys.argv[2:], stdout=f, stderr=subprocess.STDOUT)
r = resource.getrusage(resource.RUSAGE_CHILDREN); print("%.3f" % (r.ru_utime + r.ru_stime))' "$@"
}
for run in $(seq "$RUNS"); do
    WRK_CPU=$(cpu_run "$WORK/wrk$run.txt" "$WRK" -t"$THREADS" -c"$CONNS" -d"${DURATION}s" "$URL")
    WRK_RATE=$(awk '/^Requests\/sec:/{print $2}' "$WORK/wrk$run.txt")
    WRK_N=$(awk '/requests in/{print $1}' "$WORK/wrk$run.txt")
    MGB_CPU=$(cpu_run "$WORK/mgbench$run.txt" "$MGBENCH" --endpoint "$HOSTPORT" --path "$PATH_PART" \
        --threads "$THREADS" --concurrency "$CONNS" --duration "$DURATION" --no-progress \
        --json "$WORK/mgbench$run.json" hello)
    read -r MGB_RATE MGB_ERR MGB_N < <(python3 -c 'import json,sys; g=json.load(open(sys.argv[1]))["ops"]["GET"]; print("%.2f %d %d" % (g["ops_per_s"], g["errors"], g["count"]))' "$WORK/mgbench$run.json")
    python3 -c 'import sys; a=sys.argv; print("run %s: wrk %s req/s (%.2f us CPU/req), mgbench %s req/s (%.2f us CPU/req, %s errors), mgbench/wrk %.3f" % (a[1], a[2], float(a[5]) * 1e6 / float(a[6]), a[3], float(a[7]) * 1e6 / float(a[8]), a[4], float(a[3]) / float(a[2])))' "$run" "$WRK_RATE" "$MGB_RATE" "$MGB_ERR" "$WRK_CPU" "$WRK_N" "$MGB_CPU" "$MGB_N"
    WRK_RATES="$WRK_RATES $WRK_RATE"
    MGB_RATES="$MGB_RATES $MGB_RATE"
done
if [ "$RUNS" -gt 1 ]; then
    python3 -c 'import statistics as s,sys; w=[float(x) for x in sys.argv[1].split()]; m=[float(x) for x in sys.argv[2].split()]; print("median: wrk %.0f req/s, mgbench %.0f req/s, mgbench/wrk %.3f" % (s.median(w), s.median(m), s.median(m)/s.median(w)))' "$WRK_RATES" "$MGB_RATES"
fi
