#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# mg: server=none
# README command 1 (deploy/run.sh), minus apt and the build: it starts the
# server in the foreground on the address given, prints the endpoint, the
# credentials and an aws-cli example that works as printed, writes its
# config into the data directory on the first start and reuses it after.
set -u
. "$(dirname "$0")/mgtest.sh"

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
DATA=$MG_TMP/deploy-data
OUT=$MG_TMP/deploy.out
PID=

start() {
    METAGATE_BIN=$MG_BIN METAGATE_LISTEN=127.0.0.1:$PORT METAGATE_DATA=$DATA \
        "$MG_ROOT/deploy/run.sh" >"$OUT" 2>&1 </dev/null &
    PID=$!
    for _ in $(seq 1 300); do
        curl -sf "http://127.0.0.1:$PORT/health" >/dev/null && return 0
        kill -0 "$PID" 2>/dev/null || break
        sleep 0.1
    done
    cat "$OUT"
    return 1
}
stop() {
    [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
    PID=
}
trap stop EXIT

t_prints() {
    grep -q "endpoint:   http://127.0.0.1:$PORT" "$OUT" &&
        grep -q "access key: MG" "$OUT" &&
        grep -q "secret key: " "$OUT" &&
        grep -q "aws --endpoint-url http://127.0.0.1:$PORT s3 mb s3://demo" "$OUT" &&
        [ -f "$DATA/metagate.json" ] || { cat "$OUT"; return 1; }
}
t_example_works() {
    # The two printed example lines, run as printed (Debian's aws v2).
    local cmd ak sk
    cmd=$(grep -A1 '^  AWS_ACCESS_KEY_ID=' "$OUT" | sed 's/\\$//' | tr -d '\n' | sed 's/ aws / \/usr\/bin\/aws /')
    (cd "$MG_TMP" && export HOME=$MG_TMP AWS_CONFIG_FILE=/dev/null && eval "$cmd") ||
        { echo "ran: $cmd"; return 1; }
    ak=$(sed -n 's/^  access key: //p' "$OUT")
    sk=$(sed -n 's/^  secret key: //p' "$OUT")
    HOME=$MG_TMP AWS_CONFIG_FILE=/dev/null AWS_ACCESS_KEY_ID=$ak AWS_SECRET_ACCESS_KEY=$sk \
        AWS_DEFAULT_REGION=us-east-1 /usr/bin/aws --endpoint-url "http://127.0.0.1:$PORT" s3 ls |
        grep -q ' demo$'
}

# start runs in this shell (check's command substitution is a subshell).
if start; then
    check "deploy/run.sh starts and prints endpoint, keys, aws-cli example" t_prints
    if [ -x /usr/bin/aws ]; then
        check "the printed aws-cli example works" t_example_works
    else
        skip "the printed aws-cli example works" "no /usr/bin/aws"
    fi
    before=$(grep 'access key:' "$OUT")
    stop
    if start; then
        check "restart reuses data/metagate.json" expect_eq "access key after restart" \
            "$before" "$(grep 'access key:' "$OUT")"
    else
        check "restart reuses data/metagate.json" false
    fi
else
    check "deploy/run.sh starts and prints endpoint, keys, aws-cli example" false
fi
stop
finish
