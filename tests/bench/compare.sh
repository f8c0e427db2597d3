#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The side-by-side benchmark (issue 3): start metagate on a free port and the
# Ceph RGW peer, run mgbench --vs (rounds A B A B, A = metagate, B = RGW) for
# put/get/stat/list/delete/mixed at 1 KiB, print the markdown table (also
# written to --out), and stop both servers by PID.
#
# usage: tests/bench/compare.sh [--out FILE.md] [--duration S] [--size 1KiB]
#                               [--concurrency N] [--rounds N] [--workloads "put get ..."]
#                               [--delete-objects N] [--peer-delete-objects N] [--peer-only]
#
# delete consumes its prepared objects: metagate gets --delete-objects (200000) so its
# run lasts more than a blink, RGW --peer-delete-objects (15000, more than it deletes
# in 10 s), so neither side runs dry early and neither spends minutes preparing.
# env:   BUILD (build dir, default <repo>/build), METAGATE, MGBENCH, PEER_DIR
#        (/tmp/ceph-peer), PEERS (<repo>/../shared/peers), RGW_PORT (7480)
#
# Each invocation uses a fresh bucket (mgbcmp-<time>) so neither server lists
# over the leftovers (RGW keeps index tombstones) of earlier runs.
#
# If metagate cannot be started (binary missing, or no answer within 30 s),
# or with --peer-only, the table is produced against RGW alone and says so.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-$ROOT/build}
METAGATE=${METAGATE:-$BUILD/metagate}
MGBENCH=${MGBENCH:-$BUILD/mgbench}
PEERS=${PEERS:-$ROOT/../shared/peers}
[ -d "$PEERS" ] || PEERS=/work/shared/peers
PEER_DIR=${PEER_DIR:-/tmp/ceph-peer}
RGW_PORT=${RGW_PORT:-7480}
AK=AKIAIOSFODNN7EXAMPLE
SK=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY

OUT=compare.md
DURATION=10
SIZE=1KiB
CONC=20
ROUNDS=2
WORKLOADS="put get stat list delete mixed"
PEER_ONLY=0
DELETE_OBJECTS=200000
PEER_DELETE_OBJECTS=15000
while [ $# -gt 0 ]; do
    case "$1" in
    --out) OUT=$2; shift 2 ;;
    --duration) DURATION=$2; shift 2 ;;
    --size) SIZE=$2; shift 2 ;;
    --concurrency) CONC=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --workloads) WORKLOADS=$2; shift 2 ;;
    --peer-only) PEER_ONLY=1; shift ;;
    --delete-objects) DELETE_OBJECTS=$2; shift 2 ;;
    --peer-delete-objects) PEER_DELETE_OBJECTS=$2; shift 2 ;;
    -h|--help) sed -n '3,23p' "$0"; exit 0 ;;
    *) echo "compare.sh: unknown option $1" >&2; exit 2 ;;
    esac
done

[ -x "$MGBENCH" ] || { echo "compare.sh: $MGBENCH not built (cmake --build $BUILD --target mgbench)" >&2; exit 1; }

WORK=$(mktemp -d /tmp/mgb-compare-XXXXXX)
BUCKET=mgbcmp-$(date +%s)
MG_PID=
STARTED_PEER=0

cleanup() {
    if [ -n "$MG_PID" ] && kill -0 "$MG_PID" 2>/dev/null; then
        kill -TERM "$MG_PID" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$MG_PID" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$MG_PID" 2>/dev/null || true
    fi
    if [ "$STARTED_PEER" = 1 ]; then
        "$PEERS/ceph-rgw/stop.sh" "$PEER_DIR" >"$WORK/peer-stop.log" 2>&1 || true
    fi
}
trap cleanup EXIT

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# wait_http PORT SECONDS: any HTTP answer on 127.0.0.1:PORT
wait_http() {
    for _ in $(seq $(( $2 * 10 ))); do
        if curl -s -o /dev/null -m 1 "http://127.0.0.1:$1/"; then return 0; fi
        sleep 0.1
    done
    return 1
}

# --- RGW (reused when already serving: then it is not ours to stop) -------------------
if wait_http "$RGW_PORT" 1; then
    echo "compare.sh: RGW already serving on 127.0.0.1:$RGW_PORT, reusing it" >&2
else
    echo "compare.sh: starting Ceph RGW in $PEER_DIR" >&2
    "$PEERS/ceph-rgw/start.sh" "$PEER_DIR" >"$WORK/peer-start.log" 2>&1 ||
        { echo "compare.sh: RGW failed to start, see $WORK/peer-start.log" >&2; exit 1; }
    STARTED_PEER=1
    wait_http "$RGW_PORT" 60 || { echo "compare.sh: RGW not answering" >&2; exit 1; }
fi
RGW=http://127.0.0.1:$RGW_PORT

# --- metagate --------------------------------------------------------------------------
MG=
if [ "$PEER_ONLY" = 0 ] && [ -x "$METAGATE" ]; then
    PORT=$(free_port)
    mkdir -p "$WORK/data"
    cat >"$WORK/metagate.json" <<EOF
{"listen": "127.0.0.1:$PORT", "data_dir": "$WORK/data",
 "users": [{"name": "main", "access_key": "$AK", "secret_key": "$SK"}]}
EOF
    "$METAGATE" serve --config "$WORK/metagate.json" >"$WORK/metagate.log" 2>&1 &
    MG_PID=$!
    if wait_http "$PORT" 30; then
        MG=http://127.0.0.1:$PORT
    else
        echo "compare.sh: metagate did not answer on $PORT within 30 s (log: $WORK/metagate.log)" >&2
    fi
elif [ "$PEER_ONLY" = 0 ]; then
    echo "compare.sh: $METAGATE not found" >&2
fi

# --- runs ------------------------------------------------------------------------------
MACHINE="$(nproc) vCPU $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(free -g | awk '/Mem:/{print $2}') GiB RAM, $(uname -sr)"
ROWS=$WORK/rows.md
: >"$ROWS"
for w in $WORKLOADS; do
    echo "compare.sh: $w" >&2
    OBJ=()
    PEER_OBJ=()
    if [ "$w" = delete ]; then
        OBJ=(--objects "$DELETE_OBJECTS" --vs-objects "$PEER_DELETE_OBJECTS")
        PEER_OBJ=(--objects "$PEER_DELETE_OBJECTS")
    fi
    if [ -n "$MG" ]; then
        "$MGBENCH" --endpoint "$MG" --access-key "$AK" --secret-key "$SK" --vs "$RGW" --bucket "$BUCKET" "${OBJ[@]}" \
            --size "$SIZE" --duration "$DURATION" --concurrency "$CONC" --rounds "$ROUNDS" \
            --md "$ROWS" --json "$WORK/$w.json" --no-progress "$w" >"$WORK/$w.txt" 2>&1 ||
            echo "compare.sh: $w failed (see $WORK/$w.txt)" >&2
    else
        "$MGBENCH" --endpoint "$RGW" --access-key "$AK" --secret-key "$SK" --bucket "$BUCKET" "${PEER_OBJ[@]}" \
            --size "$SIZE" --duration "$DURATION" --concurrency "$CONC" --rounds "$ROUNDS" \
            --md "$ROWS" --json "$WORK/$w.json" --no-progress "$w" >"$WORK/$w.txt" 2>&1 ||
            echo "compare.sh: $w failed (see $WORK/$w.txt)" >&2
    fi
done

{
    echo "Measured $(date -u '+%Y-%m-%d %H:%M UTC') on $MACHINE."
    echo "mgbench: $SIZE objects, $CONC connections, $(nproc) threads, ${DURATION} s per round, $ROUNDS rounds per endpoint"
    if [ -n "$MG" ]; then
        echo "alternating A B A B (A = metagate $MG, B = Ceph RGW 16.2 $RGW). Server, peer and"
        echo "client share the machine. DELETE is DeleteObjects of 100 keys (objects/s), over"
        echo "$DELETE_OBJECTS prepared objects on metagate and $PEER_DELETE_OBJECTS on RGW."
        echo
        echo "| workload | op | metagate ops/s | p50 ms | p99 ms | errors | RGW ops/s | p50 ms | p99 ms | errors | metagate/RGW |"
        echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    else
        echo "metagate was NOT measured (not usable); Ceph RGW 16.2 alone at $RGW."
        echo "DELETE is DeleteObjects of 100 keys (objects/s), over $PEER_DELETE_OBJECTS prepared objects."
        echo
        echo "| workload | op | RGW ops/s | p50 ms | p99 ms | errors |"
        echo "|---|---|---:|---:|---:|---:|"
    fi
    cat "$ROWS"
} | tee "$OUT"
echo "compare.sh: table in $OUT, raw output in $WORK" >&2
