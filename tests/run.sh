#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# README command 2: installs what the tests need, builds Release (build/) and
# ASan+UBSan (build-asan/), runs ctest in both (Release: labels unit, fuzz,
# fault; Asan: unit, fuzz), then the integration suite (tests/integration/
# run.py) against the Release binary. The last line is the summary; the exit
# code is non-zero when anything failed, including a build.
#
# Tiers like SQLite's testrunner (STYLE.md 7). Environment: MG_JOBS (build
# jobs, default 2), MG_SKIP_INSTALL=1 (no apt-get/npm), MG_INTEGRATION_ARGS
# (passed to run.py, e.g. a suite name to run only that suite).
set -uo pipefail

cd "$(dirname "$0")/.."
ROOT=$(pwd)
START=$(date +%s)
# shellcheck source=deploy/deps.sh
. deploy/deps.sh

PASSED=0
FAILED=0
SKIPPED=0        # integration cases skipped (e.g. the 1 GiB test on a full disk)
DETAIL=""        # "unit 40, fuzz 8, ..." in run order
PROBLEMS=""      # one line per failed stage, repeated before the summary

log() { printf '\n=== %s (%d s)\n' "$*" "$(($(date +%s) - START))"; }

# add LABEL PASSED FAILED: adds a stage's counts to the totals.
add() {
    PASSED=$((PASSED + $2))
    FAILED=$((FAILED + $3))
    DETAIL="${DETAIL:+$DETAIL, }$1 $(($2 + $3))"
}

problem() {
    PROBLEMS="${PROBLEMS}  - $*"$'\n'
    echo "metagate tests: FAILED: $*" >&2
}

finish() {
    local secs=$(($(date +%s) - START))
    if [ -n "$PROBLEMS" ]; then
        printf '\nFailures:\n%s' "$PROBLEMS"
    fi
    local skipped=""
    [ "$SKIPPED" -ne 0 ] && skipped=", $SKIPPED skipped"
    echo "metagate tests by stage: ${DETAIL:-nothing ran}${skipped}; took $secs s"
    # The last line is the bare summary a CI reader parses ("tests: N passed, N failed").
    echo "tests: $PASSED passed, $FAILED failed"
    [ "$FAILED" -eq 0 ] && [ -z "$PROBLEMS" ]
    exit $?
}

# --- 1. packages ------------------------------------------------------------
if [ "${MG_SKIP_INSTALL:-0}" != 1 ]; then
    log "install: Debian packages"
    # shellcheck disable=SC2086
    if ! mg_apt_install $MG_BUILD_PKGS $MG_TEST_PKGS $(mg_node_pkgs); then
        problem "apt-get install"
        FAILED=$((FAILED + 1))
    fi
    log "install: npm packages (tests/integration/package-lock.json)"
    if [ ! -d tests/integration/node_modules/@aws-sdk/client-s3 ] ||
        [ tests/integration/package-lock.json -nt tests/integration/node_modules/.package-lock.json ]; then
        if ! (cd tests/integration && npm ci --no-audit --no-fund --loglevel=error); then
            problem "npm ci in tests/integration"
            FAILED=$((FAILED + 1))
        fi
    fi
fi

# --- 2. builds --------------------------------------------------------------
RELEASE_OK=0
ASAN_OK=0
log "build: Release (build/)"
if mg_build Release build; then
    RELEASE_OK=1
else
    problem "Release build (cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build -j2)"
    FAILED=$((FAILED + 1))
fi
log "build: Asan (build-asan/)"
if mg_build Asan build-asan; then
    ASAN_OK=1
else
    problem "Asan build (cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Asan && cmake --build build-asan -j2)"
    FAILED=$((FAILED + 1))
fi

# --- 3. ctest ---------------------------------------------------------------
export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

# run_ctest DIR LABEL NAME: runs one label's tests and adds its counts.
# ctest prints "N% tests passed, F tests failed out of T", or "No tests
# were found" (a failure: every label run here has tests).
run_ctest() {
    local dir=$1 label=$2 name=$3 out rc total failed
    log "ctest: $name ($dir, label $label)"
    out=$(ctest --test-dir "$dir" -L "^${label}\$" --output-on-failure \
        --timeout 600 -j "${MG_JOBS:-2}" 2>&1)
    rc=$?
    printf '%s\n' "$out" | tail -n 200
    total=$(printf '%s\n' "$out" | sed -n 's/.*tests failed out of \([0-9]*\).*/\1/p' | tail -n 1)
    failed=$(printf '%s\n' "$out" | sed -n 's/.* \([0-9]*\) tests failed out of.*/\1/p' | tail -n 1)
    if [ -z "$total" ]; then
        if printf '%s\n' "$out" | grep -q 'No tests were found'; then
            # Every label has tests; none found means a CMake file stopped registering them.
            problem "ctest $name in $dir found no tests with label $label"
            add "$name" 0 1
            return
        fi
        problem "ctest $name in $dir did not report (exit $rc)"
        add "$name" 0 1
        return
    fi
    add "$name" $((total - failed)) "$failed"
    if [ "$failed" -ne 0 ] || [ "$rc" -ne 0 ]; then
        problem "ctest $name: $failed of $total failed (ctest --test-dir $dir -L $label --output-on-failure)"
    fi
}

if [ "$RELEASE_OK" = 1 ]; then
    run_ctest build unit unit
    run_ctest build fuzz fuzz
    run_ctest build fault fault
    # The chaos test's one-line verdict (issue 4), which ctest keeps in its log.
    grep -h '^groups [0-9]*, acked' build/Testing/Temporary/LastTest*.log 2>/dev/null | tail -n 1
fi
if [ "$ASAN_OK" = 1 ]; then
    run_ctest build-asan unit "asan unit"
    run_ctest build-asan fuzz "asan fuzz"
fi

# --- 4. integration -----------------------------------------------------------
if [ "$RELEASE_OK" = 1 ] && [ -x build/metagate ]; then
    log "integration: stock S3 clients against build/metagate"
    out_file=$(mktemp)
    # shellcheck disable=SC2086
    /usr/bin/python3 tests/integration/run.py --bin "$ROOT/build/metagate" \
        ${MG_INTEGRATION_ARGS:-} 2>&1 | tee "$out_file"
    rc=${PIPESTATUS[0]}
    line=$(grep -E '^integration: [0-9]+ passed, [0-9]+ failed' "$out_file" | tail -n 1)
    rm -f "$out_file"
    if [ -z "$line" ]; then
        problem "integration runner did not report (exit $rc)"
        add integration 0 1
    else
        p=$(echo "$line" | sed -n 's/^integration: \([0-9]*\) passed.*/\1/p')
        f=$(echo "$line" | sed -n 's/.* \([0-9]*\) failed.*/\1/p')
        sk=$(echo "$line" | sed -n 's/.* \([0-9]*\) skipped.*/\1/p')
        SKIPPED=$((SKIPPED + ${sk:-0}))
        add integration "$p" "$f"
        if [ "$f" -ne 0 ] || [ "$rc" -ne 0 ]; then
            problem "integration: $f failed (python3 tests/integration/run.py --bin build/metagate)"
        fi
    fi
else
    problem "integration not run: no build/metagate"
    add integration 0 1
fi

finish
