#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# run.sh [BUILD_DIR] -- the differential conformance run, outside tests/run.sh
# (it needs Ceph): starts metagate from BUILD_DIR (default build/) and the
# Ceph RGW peer (../shared/peers/ceph-rgw, memstore, no mgr) in a temporary
# directory, runs every scenario against both, stops both by PID and writes
# the table to OUT.md and every answer to OUT.json (OUT defaults to
# /tmp/mg-conformance). Exit status: 0 when every difference is intended.
# Needs ports 3300, 6789 and 7480 free (RGW_PORT overrides the last).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BUILD=${1:-$ROOT/build}
OUT=${OUT:-/tmp/mg-conformance}
exec python3 "$HERE/run.py" --start-both --bin "$BUILD/metagate" \
  --rgw-port "${RGW_PORT:-7480}" --md "$OUT.md" --json "$OUT.json"
