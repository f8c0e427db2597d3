#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# metagate next to Ceph RGW on the lifecycle-expiry scenario (issue 8): start the Ceph
# RGW peer with its lifecycle "day" shrunk to DAY_SECONDS (rgw_lc_debug_interval) and a
# metagate with the same lifecycle.day_seconds (default configuration otherwise, data on
# disk), run `mgbench expiry --endpoint` once against each, back to back, with the same
# client settings, print one table, and stop both servers (metagate by its PID, RGW with
# the peer's stop.sh, which stops only the PIDs it recorded).
#
# usage: tests/bench/expiry_vs_rgw.sh PEER [OUT_DIR]
#   PEER     the Ceph RGW peer's directory, e.g. ../shared/peers/ceph-rgw (start.sh, stop.sh)
#   OUT_DIR  logs, JSON, plots, LIST samples, table.md (default: a new /tmp/mgb-exp-vs-rgw-XXXXXX)
# env: BUILD (<repo>/build), METAGATE, MGBENCH, OBJECTS (150000), DAY_SECONDS (600),
#      WAIT (1800: mgbench --wait, from the rule), BEFORE (5), AFTER (15), CONCURRENCY (32),
#      RGW_DATA (OUT_DIR/rgw, must be absent or empty: a fresh cluster),
#      ONLY (metagate | rgw: run one side only)
#
# Why DAY_SECONDS is large (600 by default, not mgbench's 1): RGW's LC worker wakes once
# per rgw_lc_debug_interval and gives a bucket at most one interval per session
# (RGWLC::thread_stop_at); the next session lists the bucket from the start again. With
# a day of a few seconds RGW would spend its time re-listing, which a real day never
# makes it do; 600 s is about twice what RGW needs for 112,500 objects here. In debug
# mode RGW ignores rgw_lifecycle_work_time (LCWorker::should_work returns true); the
# script still sets it to 00:00-23:59 (a startup option: the peer is restarted in place
# once) so the run does not depend on that. metagate's due time is rounded up to a day
# boundary (AWS's midnight rule), RGW's is mtime + one interval: each waits up to about
# two days after the load before anything is due (metagate re-indexes meanwhile), and
# mgbench's "during" LIST figures include that wait. table.md therefore also gives the
# LIST figures of the expiry window alone (from the first expiry observed to the last),
# from the per-LIST samples mgbench writes for --plot (kept by a gnuplot wrapper on PATH).
#
# It is not run by CI (it needs the Ceph packages, ~2 GB of RAM and 30-60 minutes).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-$ROOT/build}
METAGATE=${METAGATE:-$BUILD/metagate}
MGBENCH=${MGBENCH:-$BUILD/mgbench}
OBJECTS=${OBJECTS:-150000}
DAY_SECONDS=${DAY_SECONDS:-600}
WAIT=${WAIT:-1800}
BEFORE=${BEFORE:-5}
AFTER=${AFTER:-15}
CONCURRENCY=${CONCURRENCY:-32}
ONLY=${ONLY:-}
AK=AKIAIOSFODNN7EXAMPLE
SK=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY

log() { printf '[expiry_vs_rgw %s] %s\n' "$(date -u +%T)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

[ $# -ge 1 ] && [ $# -le 2 ] || { sed -n '3,17p' "$0" >&2; exit 2; }
case "$1" in -h|--help) sed -n '3,33p' "$0"; exit 0 ;; esac
PEER=$(cd "$1" 2>/dev/null && pwd) || die "no directory $1"
[ -x "$PEER/start.sh" ] && [ -x "$PEER/stop.sh" ] || die "$PEER has no start.sh/stop.sh"
case "$ONLY" in ""|metagate|rgw) ;; *) die "ONLY must be metagate or rgw" ;; esac
case "$DAY_SECONDS" in ''|*[!0-9]*) die "DAY_SECONDS must be a positive integer" ;; esac
[ "$DAY_SECONDS" -ge 1 ] || die "DAY_SECONDS must be >= 1"
[ -x "$MGBENCH" ] || die "$MGBENCH not built (cmake --build $BUILD --target mgbench)"
[ "$ONLY" = rgw ] || [ -x "$METAGATE" ] || die "$METAGATE not built"
command -v python3 >/dev/null || die "python3 is needed (free ports, the table)"
command -v curl >/dev/null || die "curl is needed"

if [ $# -eq 2 ]; then
    OUT=$2
    mkdir -p "$OUT"
    OUT=$(cd "$OUT" && pwd)
else
    OUT=$(mktemp -d /tmp/mgb-exp-vs-rgw-XXXXXX)
fi
RGW_DATA=${RGW_DATA:-$OUT/rgw}
RGW_PORT=7480
RGW=http://127.0.0.1:$RGW_PORT

MG_PID=
LOAD_PID=
POLL_PID=
MG_POLL_PID=
STARTED_PEER=0

stop_pid() { # stop_pid PID: TERM, KILL after 20 s; only a child of ours
    local p=$1
    [ -n "$p" ] && kill -0 "$p" 2>/dev/null || return 0
    kill -TERM "$p" 2>/dev/null || true
    for _ in $(seq 200); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
}

cleanup() {
    local rc=$?
    stop_pid "$MG_PID"
    MG_PID=
    stop_pid "$LOAD_PID"
    LOAD_PID=
    stop_pid "$POLL_PID"
    POLL_PID=
    stop_pid "$MG_POLL_PID"
    MG_POLL_PID=
    if [ "$STARTED_PEER" = 1 ]; then
        log "stopping the RGW peer ($RGW_DATA)"
        "$PEER/stop.sh" "$RGW_DATA" >>"$OUT/rgw-stop.log" 2>&1 || log "stop.sh failed: $OUT/rgw-stop.log"
        STARTED_PEER=0
    fi
    [ $rc -eq 0 ] || log "failed (rc=$rc); logs in $OUT"
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
wait_http() { # wait_http URL SECONDS: any HTTP answer
    local end=$(( $(date +%s) + $2 ))
    while [ "$(date +%s)" -lt "$end" ]; do
        curl -s -o /dev/null -m 2 "$1/" && return 0
        sleep 0.2
    done
    return 1
}

log "output in $OUT; objects $OBJECTS, day $DAY_SECONDS s, wait $WAIT s"
printf '%s\n' "$0 $*" "OBJECTS=$OBJECTS DAY_SECONDS=$DAY_SECONDS WAIT=$WAIT BEFORE=$BEFORE AFTER=$AFTER CONCURRENCY=$CONCURRENCY" >"$OUT/command.txt"
git -C "$ROOT" rev-parse --short HEAD >"$OUT/commit.txt" 2>/dev/null || true

# --- the RGW peer: ours alone (a fresh cluster), never somebody else's -------------------
if [ "$ONLY" != metagate ]; then
    for p in 3300 6789 $RGW_PORT; do
        port_busy "$p" && die "127.0.0.1:$p is taken (another Ceph/RGW?): not touching it"
    done
    [ ! -e "$RGW_DATA" ] || [ -z "$(ls -A "$RGW_DATA")" ] || die "$RGW_DATA is not empty (want a fresh cluster)"
    log "starting the RGW peer in $RGW_DATA (RGW_LC_DEBUG_INTERVAL=$DAY_SECONDS)"
    STARTED_PEER=1 # stop.sh stops only what start.sh recorded for this DIR
    RGW_LC_DEBUG_INTERVAL=$DAY_SECONDS "$PEER/start.sh" "$RGW_DATA" >"$OUT/rgw-start.log" 2>&1 ||
        die "the RGW peer did not start: $OUT/rgw-start.log"
    wait_http "$RGW" 60 || die "RGW not answering on $RGW"
    CEPH=(ceph -c "$RGW_DATA/ceph.conf" --connect-timeout 15)
    "${CEPH[@]}" config set client.rgw.a rgw_lifecycle_work_time 00:00-23:59 ||
        die "ceph config set rgw_lifecycle_work_time failed"
    ASOK=$RGW_DATA/run/client.rgw.a.asok
    asok_get() { "${CEPH[@]}" --admin-daemon "$ASOK" config get "$1" 2>/dev/null |
        python3 -c 'import json,sys; print(list(json.load(sys.stdin).values())[0])' 2>/dev/null || echo '?'; }
    # rgw_lifecycle_work_time is read at startup only (`ceph config dump` flags it '*'): the
    # running radosgw keeps 00:00-06:00, so restart the peer in place (start.sh reuses DIR)
    if [ "$(asok_get rgw_lifecycle_work_time)" != 00:00-23:59 ]; then
        log "restarting the RGW peer so that rgw_lifecycle_work_time applies"
        "$PEER/stop.sh" "$RGW_DATA" >>"$OUT/rgw-stop.log" 2>&1 || die "stop.sh failed: $OUT/rgw-stop.log"
        RGW_LC_DEBUG_INTERVAL=$DAY_SECONDS "$PEER/start.sh" "$RGW_DATA" >>"$OUT/rgw-start.log" 2>&1 ||
            die "the RGW peer did not restart: $OUT/rgw-start.log"
        wait_http "$RGW" 60 || die "RGW not answering on $RGW"
    fi
    [ "$(asok_get rgw_lifecycle_work_time)" = 00:00-23:59 ] ||
        die "radosgw does not run with rgw_lifecycle_work_time 00:00-23:59"
    {
        echo "# the running radosgw's lifecycle options (admin socket)"
        for o in rgw_lc_debug_interval rgw_lifecycle_work_time rgw_lc_max_worker rgw_lc_max_wp_worker \
                 rgw_lc_lock_max_time rgw_lc_max_objs rgw_lc_thread_delay; do
            printf '%s = %s\n' "$o" "$(asok_get "$o")"
        done
        radosgw --version 2>/dev/null | head -1
    } >"$OUT/rgw-options.txt"
    log "$(tr '\n' ';' <"$OUT/rgw-options.txt")"
    [ "$(sed -n 's/^rgw_lc_debug_interval = //p' "$OUT/rgw-options.txt")" = "$DAY_SECONDS" ] ||
        die "radosgw does not run with rgw_lc_debug_interval = $DAY_SECONDS (see $OUT/rgw-options.txt)"
fi

# --- metagate: default configuration, lifecycle.day_seconds = DAY_SECONDS ----------------
MG=
if [ "$ONLY" != rgw ]; then
    PORT=$(free_port)
    RPORT=$(free_port)
    mkdir -p "$OUT/metagate/data"
    cat >"$OUT/metagate/metagate.json" <<EOF
{"listen": "127.0.0.1:$PORT", "data_dir": "$OUT/metagate/data",
 "users": [{"name": "main", "access_key": "$AK", "secret_key": "$SK"}],
 "meta": {"raft_listen": "127.0.0.1:$RPORT"},
 "lifecycle": {"day_seconds": $DAY_SECONDS}}
EOF
    "$METAGATE" serve --config "$OUT/metagate/metagate.json" >"$OUT/metagate/metagate.log" 2>&1 &
    MG_PID=$!
    MG=http://127.0.0.1:$PORT
    wait_http "$MG" 60 || die "metagate did not answer on $MG (log: $OUT/metagate/metagate.log)"
    log "metagate pid $MG_PID on $MG"
fi

# --- a gnuplot that keeps mgbench's per-LIST samples (mgbench removes them after plotting)
mkdir -p "$OUT/bin"
REAL_GNUPLOT=$(command -v gnuplot || true)
cat >"$OUT/bin/gnuplot" <<EOF
#!/bin/sh
d=\$(dirname "\$1")
[ -n "\$MGB_SAMPLES_TO" ] && [ -d "\$d" ] && rm -rf "\$MGB_SAMPLES_TO" && cp -r "\$d" "\$MGB_SAMPLES_TO"
[ -n "$REAL_GNUPLOT" ] || exit 1
exec "$REAL_GNUPLOT" "\$@"
EOF
chmod +x "$OUT/bin/gnuplot"
cat >"$OUT/bin/stamp.py" <<'EOF_PY'
import sys, time
with open(sys.argv[1], 'w') as plain, open(sys.argv[2], 'w') as stamped:
    for line in sys.stdin:
        plain.write(line)
        plain.flush()
        stamped.write('%.3f %s' % (time.time(), line))
        stamped.flush()
EOF_PY
# each server's own count of expired objects, polled: RGW's perf counter
# rgw.lc_expire_current straight from its admin socket (no ceph CLI process per poll),
# metagate's metagate_lifecycle_expired_total from /metrics; "TIME COUNT" lines
cat >"$OUT/bin/poll.py" <<'EOF_PY'
import json, socket, struct, sys, time, urllib.request
kind, target, out, every = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
def asok():
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(10)
    s.connect(target)
    s.sendall(b'{"prefix": "perf dump", "logger": "rgw"}\0')
    b = b''
    while len(b) < 4:
        c = s.recv(4 - len(b))
        if not c:
            raise EOFError('short answer')
        b += c
    n = struct.unpack('>I', b)[0]
    d = b''
    while len(d) < n:
        c = s.recv(n - len(d))
        if not c:
            raise EOFError('short answer')
        d += c
    s.close()
    return json.loads(d)['rgw']['lc_expire_current']
def metrics():
    with urllib.request.urlopen(target, timeout=10) as r:
        for line in r.read().decode().splitlines():
            f = line.split()
            if len(f) == 2 and f[0] == 'metagate_lifecycle_expired_total':
                return int(float(f[1]))
    raise KeyError('no metagate_lifecycle_expired_total')
ask = asok if kind == 'asok' else metrics
with open(out, 'a') as f:
    while True:
        try:
            f.write('%.3f %d\n' % (time.time(), ask()))
        except Exception as e:
            f.write('%.3f err %s\n' % (time.time(), str(e).replace(' ', '_')))
        f.flush()
        time.sleep(every)
EOF_PY

# --- load average every 10 s ---------------------------------------------------------------
( while :; do echo "$(date -u +%FT%TZ) $(cut -d' ' -f1-3 /proc/loadavg)"; sleep 10; done ) >"$OUT/load.log" &
LOAD_PID=$!
if [ "$ONLY" != metagate ]; then
    python3 "$OUT/bin/poll.py" asok "$ASOK" "$OUT/rgw-expired.log" 2 2>"$OUT/poll-rgw.err" &
    POLL_PID=$!
fi
if [ -n "$MG" ]; then
    python3 "$OUT/bin/poll.py" metrics "$MG/metrics" "$OUT/metagate-expired.log" 0.5 2>"$OUT/poll-metagate.err" &
    MG_POLL_PID=$!
fi

# --- the runs: same client settings for both -------------------------------------------------
COMMON=(--objects "$OBJECTS" --day-seconds "$DAY_SECONDS" --before "$BEFORE" --after "$AFTER"
        --wait "$WAIT" --concurrency "$CONCURRENCY" --access-key "$AK" --secret-key "$SK")
run() { # run NAME URL [extra mgbench args]
    local name=$1 url=$2
    shift 2
    local b=mgbexp-$name-$(date +%s)
    log "$name: mgbench expiry --endpoint $url --bucket $b ${COMMON[*]} $*"
    echo "$(date -u +%FT%TZ) start $name" >>"$OUT/times.log"
    local rc=0
    # stderr as is in NAME.log, and with the wall clock of each line in NAME.tlog (the rule's
    # line dates the LIST samples, whose t is relative to it, against RGW's counter)
    set +e
    MGB_SAMPLES_TO=$OUT/samples-$name PATH=$OUT/bin:$PATH \
        "$MGBENCH" expiry --endpoint "$url" --name "$name" --bucket "$b" "${COMMON[@]}" "$@" \
        --json "$OUT/$name.json" --plot "$OUT/$name.png" 2>&1 >"$OUT/$name.out" |
        python3 -u "$OUT/bin/stamp.py" "$OUT/$name.log" "$OUT/$name.tlog"
    rc=${PIPESTATUS[0]}
    set -e
    echo "$(date -u +%FT%TZ) end $name rc=$rc bucket=$b" >>"$OUT/times.log"
    log "$name: mgbench exit $rc; $(grep -E 'expired|not complete|stalled' "$OUT/$name.log" | tail -2 | tr '\n' ' ')"
    return 0
}
: >"$OUT/times.log"
if [ -n "$MG" ]; then
    run metagate "$MG" --metrics "$MG/metrics"
    stop_pid "$MG_POLL_PID"
    MG_POLL_PID=
    stop_pid "$MG_PID" # idle from here on; nothing of it runs during RGW's turn
    MG_PID=
fi
if [ "$ONLY" != metagate ]; then
    run rgw "$RGW"
    b=$(sed -n 's/.* end rgw .*bucket=//p' "$OUT/times.log" | tail -1)
    radosgw-admin -c "$RGW_DATA/ceph.conf" bucket stats --bucket "$b" >"$OUT/rgw-bucket-stats.json" 2>/dev/null || true
fi
stop_pid "$LOAD_PID"
LOAD_PID=
stop_pid "$POLL_PID"
POLL_PID=

# --- the table -------------------------------------------------------------------------------
python3 - "$OUT" "$OBJECTS" <<'PY' | tee "$OUT/table.md"
import datetime, json, math, os, re, sys
out, objects = sys.argv[1], int(sys.argv[2])
n_old = objects * 3 // 4

def q(v, p):  # nearest rank, as mgbench
    if not v:
        return float('nan')
    v = sorted(v)
    return v[-1] if p >= 1 else v[max(1, math.ceil(p * len(v))) - 1]

def fmt(x, d=2):
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return '-'
    return '{:,.{}f}'.format(x, d)

def samples(name, k):  # (s since the rule, ms) of every LIST on logs/ (k 0) or keep/ (k 1)
    path = os.path.join(out, 'samples-' + name, 'c0_%d.dat' % k)
    r = []
    if os.path.exists(path):
        for line in open(path):
            t, ms = line.split()
            if ms.lower() != 'nan':
                r.append((float(t), float(ms)))
    return r

def stats(name, k, t0, t1):
    v = [ms for t, ms in samples(name, k) if t0 <= t <= t1]
    return '%s / %s / %s (%d)' % (fmt(q(v, .5)), fmt(q(v, .99)), fmt(q(v, 1)), len(v))

def iso(epoch):
    return datetime.datetime.utcfromtimestamp(epoch).strftime('%Y-%m-%dT%H:%M:%SZ')

def load(t0, t1):  # 1-min load average sampled between two ISO times
    v = []
    for line in open(os.path.join(out, 'load.log')):
        f = line.split()
        if t0 <= f[0] <= t1:
            v.append(float(f[1]))
    return '%.1f-%.1f (mean %.1f)' % (min(v), max(v), sum(v) / len(v)) if v else None

def rule_epoch(name):
    p = os.path.join(out, name + '.tlog')
    if os.path.exists(p):
        for line in open(p):
            if '[rule]' in line:
                return float(line.split()[0])
    return None

def counter(name, t_rule, t_stop):  # the server's own count: (first s, last s, expired, rate)
    p = os.path.join(out, name + '-expired.log')
    if t_rule is None or not os.path.exists(p):
        return None
    pts = []
    for line in open(p):
        f = line.split()
        if len(f) == 2 and f[1].isdigit() and t_rule - 5 <= float(f[0]) <= t_stop:
            pts.append((float(f[0]) - t_rule, int(f[1])))
    if len(pts) < 2:
        return None
    c0 = pts[0][1]
    grow = [i for i in range(1, len(pts)) if pts[i][1] > pts[i - 1][1]]
    if not grow:
        return None
    i0, i1 = grow[0], grow[-1]
    start = pts[i0 - 1][0]  # the last poll before it grew
    done = pts[i1][1] - c0
    rate = (pts[i1][1] - pts[i0 - 1][1]) / (pts[i1][0] - start)
    return start, pts[i1][0], done, rate

times = {}
for line in open(os.path.join(out, 'times.log')):
    f = line.split()
    times.setdefault(f[2], {})[f[1]] = f[0]

rows = []
for name in ('metagate', 'rgw'):
    jp = os.path.join(out, name + '.json')
    if not os.path.exists(jp) or name not in times or 'end' not in times[name]:
        continue
    c = json.load(open(jp))['configs'][0]
    err = open(os.path.join(out, name + '.log')).read()
    t_end = expired = None
    m = re.search(r'all \d+ objects under \S+ expired \(seen by \S+\) at t=([\d.]+)s', err)
    if m:
        t_end, expired = float(m.group(1)), n_old
    else:
        m = re.search(r'([\d.]+) objects left under \S+: ([\d.]+) expired in', err)
        m2 = re.search(r'expiry (?:not complete|stalled) after ([\d.]+) s', err)
        if m and m2:
            expired, t_end = float(m.group(2)), float(m2.group(1))
    rate = c.get('expired_per_s')
    tr = rule_epoch(name)
    stop = datetime.datetime.strptime(times[name]['end'], '%Y-%m-%dT%H:%M:%SZ')
    own = counter(name, tr, stop.replace(tzinfo=datetime.timezone.utc).timestamp())
    if own:  # the window from the server's own counter
        t0, t1, expired_own, own_rate = own
        own_txt = '%s (%s in %.1f s)' % (fmt(own_rate, 0), fmt(expired_own, 0), t1 - t0)
    else:  # from mgbench's figures
        own_txt = '-'
        t0 = t_end - expired / rate if t_end is not None and rate else None
        t1 = t_end
    if t0 is not None:
        win, wk, span = stats(name, 0, t0, t1), stats(name, 1, t0, t1), '%.0f-%.0f' % (t0, t1)
        # load.log has a line every 10 s: the samples from 10 s before to 10 s after
        ld = load(iso(tr + t0 - 10), iso(tr + t1 + 10)) if tr is not None else None
        ld = ld and ld + ' in the window'
    else:
        win = wk = span = '-'
        ld = None
    rows.append('| %s | %s | %s | %s | %s / %s / %s | %s | %s | %s | %s | %s | %s |' % (
        name, fmt(c['objects'], 0), fmt(rate, 0), own_txt, fmt(c['list_p50_ms']),
        fmt(c['list_p99_ms']), fmt(c['list_max_ms']), win, wk, fmt(c['recover_s'], 1), span,
        fmt(expired, 0), ld or '%s over the run' % load(times[name]['start'], times[name]['end'])))
print('| server | objects | expired/s (mgbench) | expired/s (server counter) '
      '| LIST logs/ p50 / p99 / max ms, rule to end (mgbench) '
      '| LIST logs/ p50 / p99 / max ms (n), expiry window | LIST keep/, same window '
      '| recover s | expiry window, s after the rule | expired | load average (1 min) |')
print('|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---|')
print('\n'.join(rows))
PY
log "done: $OUT/table.md"
