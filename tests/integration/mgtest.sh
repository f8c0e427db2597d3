# SPDX-License-Identifier: Apache-2.0
# Helpers for the bash integration suites (sourced). run.py sets MG_* (the
# server's endpoint and keys, a scratch dir MG_TMP); a suite calls
# `check NAME COMMAND...` per test case, which prints `ok - NAME` or
# `not ok - NAME` with the command's output, and ends with `finish`.

MG_FAILED=0

# check NAME CMD...: runs CMD (a function or command) and reports it.
check() {
    local name=$1 out rc
    shift
    out=$("$@" 2>&1)
    rc=$?
    if [ $rc -eq 0 ]; then
        echo "ok - $name"
    else
        echo "not ok - $name"
        printf '%s\n' "$out" | tail -n 40 | sed 's/^/#   /'
        MG_FAILED=1
    fi
}

# skip NAME REASON
skip() { echo "ok - $1 # SKIP $2"; }

# expect_eq WHAT EXPECTED ACTUAL: fails (exit 1 of the subshell) when different.
expect_eq() {
    if [ "$2" != "$3" ]; then
        echo "$1: expected [$2]"
        echo "$1: actual   [$3]"
        return 1
    fi
}

# rand_file PATH BYTES: random content; prints nothing.
rand_file() { head -c "$2" /dev/urandom >"$1"; }

finish() { exit $MG_FAILED; }
