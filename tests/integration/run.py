#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Integration runner: every suite against a fresh metagate.

A suite is a file tests/integration/test_NAME.{py,sh,mjs}. Its first lines
may carry one directive comment (`# mg:` or `// mg:`):

    # mg: server=default,tls python=both timeout=900

- server: the server kinds to run it against, once each: `default` (HTTP,
  path style), `tls` (HTTPS, self-signed certificate, domain s3.local),
  `domain` (HTTP with "domain": "s3.local"), `none` (the suite starts its own
  servers with tests/lib/mgserver.py).
- python (.py suites): `system` (/usr/bin/python3, Debian's boto3 1.26) or
  `both` (also `python3` on PATH when it has boto3 >= 1.36; otherwise that
  variant is reported as skipped).
- timeout: seconds before the suite is killed (default 600).

With --cluster N (issue 10), a suite of server kind `default` runs against a
fresh N-node cluster (deploy/cluster-up, tests/lib/mgcluster.py) instead of a
single server, through a node that leads no shard when the suite starts, so
every write is forwarded and every read fenced; other kinds are skipped. The
cluster's object bytes go to the Ceph that MG_TEST_DATA_RADOS's
data.rados.json names (deploy/ceph-up), each cluster in its own RADOS
namespace.

Each run gets a temporary directory (config, data, log, scratch), a free
127.0.0.1 port and two users; the server is stopped by PID afterwards. The
suite reads its endpoint and keys from MG_* variables (mgserver.Server.env)
and prints one line per test case, `ok - NAME`, `not ok - NAME` or
`ok - NAME # SKIP reason`. The runner counts them and ends with
`integration: N passed, N failed, N skipped`; the exit code is 1 when
anything failed. Suite names on the command line select suites (a file's
NAME, or a variant label such as `boto3[py-system]`); a name that matches no
suite is a failure.
"""

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))

import mgcluster  # noqa: E402
import mgserver  # noqa: E402

# Every server is on this machine: never send its traffic through a proxy
# that the environment may name (curl, urllib and botocore all honour these).
for _name in ("NO_PROXY", "no_proxy"):
    os.environ[_name] = "127.0.0.1,localhost,s3.local,.s3.local" + (
        "," + os.environ[_name] if os.environ.get(_name) else "")

SYSTEM_PYTHON = "/usr/bin/python3"
DOMAIN = "s3.local"
LINE_RE = re.compile(r"^(ok|not ok) - (.*?)(?:\s+# SKIP\b\s*(.*))?$")
DIRECTIVE_RE = re.compile(r"^\s*(?:#|//)\s*mg:\s*(.*)$")


def modern_python():
    """`python3` on PATH when it is not /usr/bin/python3 and its boto3 is
    1.36 or later (the CRC32 / trailer generation); else None."""
    exe = shutil.which("python3")
    if not exe:
        return None
    try:
        real = os.path.realpath(exe)
        if real == os.path.realpath(SYSTEM_PYTHON):
            return None
        out = subprocess.run(
            [exe, "-c", "import boto3; print(boto3.__version__)"],
            capture_output=True, text=True, timeout=60).stdout.strip()
        major, minor = (int(x) for x in out.split(".")[:2])
        return (exe, out) if (major, minor) >= (1, 36) else None
    except Exception:
        return None


def read_directives(path):
    d = {"server": "default", "python": "system", "timeout": "600"}
    with open(path, encoding="utf-8") as f:
        for _, line in zip(range(15), f):
            m = DIRECTIVE_RE.match(line)
            if m:
                for item in m.group(1).split():
                    k, _, v = item.partition("=")
                    d[k] = v
    return d


class Variant:
    """One run of one suite: a file, a server kind and an interpreter."""

    def __init__(self, path, server, interp, label, skip=None, timeout=600):
        self.path = path
        self.server = server
        self.interp = interp
        self.label = label
        self.skip = skip
        self.timeout = timeout

    @property
    def base(self):
        return os.path.basename(self.path).split(".")[0][len("test_"):]


def discover(modern):
    variants = []
    files = sorted(glob.glob(os.path.join(HERE, "test_*.py")) +
                   glob.glob(os.path.join(HERE, "test_*.sh")) +
                   glob.glob(os.path.join(HERE, "test_*.mjs")))
    for path in files:
        d = read_directives(path)
        base = os.path.basename(path).split(".")[0][len("test_"):]
        servers = d["server"].split(",")
        ext = path.rsplit(".", 1)[1]
        interps = []
        if ext == "py":
            interps.append((SYSTEM_PYTHON, "py-system", None))
            if d["python"] == "both":
                if modern:
                    interps.append((modern[0], "py-boto3-" + modern[1], None))
                else:
                    interps.append((None, "py-modern",
                                    "no python3 with boto3 >= 1.36 on PATH"))
        elif ext == "sh":
            interps.append(("bash", None, None))
        else:
            interps.append(("node", None, None))
        for server in servers:
            for interp, tag, skip in interps:
                tags = [t for t in (server if len(servers) > 1 else None,
                                    tag if len(interps) > 1 else None) if t]
                label = base + ("[%s]" % ",".join(tags) if tags else "")
                variants.append(Variant(path, server, interp, label, skip,
                                        int(d["timeout"])))
    return variants


class Counts:
    def __init__(self):
        self.passed = self.failed = self.skipped = 0
        self.failures = []

    def line(self, label, text):
        m = LINE_RE.match(text)
        if not m:
            return
        name = "%s: %s" % (label, m.group(2))
        if m.group(3) is not None:
            self.skipped += 1
        elif m.group(1) == "ok":
            self.passed += 1
        else:
            self.failed += 1
            self.failures.append(name)

    def fail(self, name):
        self.failed += 1
        self.failures.append(name)


def run_suite(v, args, counts):
    print("\n--- %s (%s)" % (v.label, os.path.relpath(v.path, ROOT)), flush=True)
    if v.skip:
        print("ok - %s # SKIP %s" % (v.label, v.skip), flush=True)
        print("*** SKIPPED %s: %s" % (v.label, v.skip), flush=True)
        counts.skipped += 1
        return
    workdir = tempfile.mkdtemp(prefix="mg-it-%s-" % v.base)
    scratch = os.path.join(workdir, "scratch")
    os.makedirs(scratch)
    server = None
    env = dict(os.environ)
    env.update({
        "MG_ROOT": ROOT,
        "MG_BIN": args.bin,
        "MG_TMP": scratch,
        "MG_SUITE": v.label,
        "TMPDIR": scratch,
        "PYTHONPATH": os.pathsep.join([os.path.join(ROOT, "tests", "lib"), HERE]),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
    })
    t0 = time.monotonic()
    before = (counts.passed, counts.failed)
    cluster = None
    try:
        if args.cluster and v.server != "none":
            users = [mgserver.make_user("main"), mgserver.make_user("other")]
            try:
                cluster, node = start_cluster(args, workdir, users)
            except mgcluster.ClusterError as e:
                print(str(e), flush=True)
                counts.fail("%s: cluster start" % v.label)
                return
            env.update(cluster_env(cluster, node, users))
        elif v.server != "none":
            users = [mgserver.make_user("main"), mgserver.make_user("other")]
            server = mgserver.Server(
                args.bin, workdir, users=users, tls=(v.server == "tls"),
                domain=DOMAIN if v.server in ("tls", "domain") else None)
            try:
                server.start()
            except mgserver.ServerError as e:
                print(str(e), flush=True)
                counts.fail("%s: server start" % v.label)
                return
            env.update(server.env())
        if v.interp == "node":
            env["NODE_NO_WARNINGS"] = "1"   # the SDK's "node >= 22 from 2027" notice
        cmd = [v.interp, v.path]
        proc = subprocess.Popen(cmd, cwd=scratch, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                start_new_session=True)
        timer = threading.Timer(v.timeout, lambda: _kill_group(proc))
        timer.start()
        cases = 0
        for raw in proc.stdout:
            text = raw.decode("utf-8", "replace").rstrip("\n")
            print("  " + text, flush=True)
            if LINE_RE.match(text):
                cases += 1
                counts.line(v.label, text)
        rc = proc.wait()
        timer.cancel()
        if rc < 0 or (rc != 0 and counts.failed == before[1]):
            what = "timed out after %d s" % v.timeout if rc < 0 else "exited %d" % rc
            print("*** %s %s" % (v.label, what), flush=True)
            counts.fail("%s: suite %s" % (v.label, what))
        elif cases == 0:
            counts.fail("%s: suite ran no test case" % v.label)
        if cluster is not None:
            dead = [k for k in range(1, cluster.n + 1) if not cluster.alive(k)]
            if dead:
                print("*** %s: cluster nodes %s died during the suite" % (v.label, dead),
                      flush=True)
                counts.fail("%s: cluster node crashed" % v.label)
        if server is not None and v.server != "none" and not server.alive():
            print("*** %s: metagate died during the suite (exit %s)"
                  % (v.label, server.proc.returncode), flush=True)
            counts.fail("%s: server crashed" % v.label)
    finally:
        if cluster is not None:
            if counts.failed != before[1]:
                print(cluster.logs(30), flush=True)
            cluster.stop()
        if server is not None and server.alive():
            rc = server.stop()
            if rc != 0:
                print("*** %s: metagate exited %s on SIGTERM" % (v.label, rc), flush=True)
                counts.fail("%s: unclean server stop (exit %s)" % (v.label, rc))
        strays = reap_strays(workdir)
        if strays:
            print("*** %s left processes running: killed %s" % (v.label, strays), flush=True)
        for mnt in mounts_under(workdir):
            print("*** %s left %s mounted: unmounting" % (v.label, mnt), flush=True)
            subprocess.run(["umount", "-l", mnt])
        if counts.failed != before[1]:
            # The runner's server, or those a server=none suite started.
            for log in sorted(glob.glob(os.path.join(workdir, "**", "server.log"),
                                        recursive=True)):
                print("  server log tail (%s):" % log)
                with open(log, "rb") as f:
                    tail = f.read().decode("utf-8", "replace").splitlines()[-30:]
                for line in tail:
                    print("    | " + line)
        dt = time.monotonic() - t0
        print("--- %s: %d passed, %d failed in %.1f s" % (
            v.label, counts.passed - before[0], counts.failed - before[1], dt),
            flush=True)
        if args.keep:
            print("    kept %s" % workdir)
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def start_cluster(args, workdir, users):
    """A fresh args.cluster-node cluster under workdir/cluster on the Ceph of
    MG_TEST_DATA_RADOS (its own RADOS namespace, so no other store's orphan
    collector sees its blobs); returns it and the node that leads no shard
    (the last one if every node leads something)."""
    rj = os.environ.get("MG_TEST_DATA_RADOS")
    if not rj or not os.path.exists(rj):
        raise mgcluster.ClusterError(
            "--cluster needs MG_TEST_DATA_RADOS (a deploy/ceph-up data.rados.json)")
    with open(rj) as f:
        rados = json.load(f)
    rados = dict(rados, namespace="it-%s" % os.path.basename(workdir))
    base = {"users": users, "data": {"backend": "rados", "rados": rados}}
    c = mgcluster.Cluster(args.bin, os.path.join(workdir, "cluster"), n=args.cluster,
                          base=base)
    c.start()
    led = c.wait_led(timeout=60)
    leaders = set(led.values())
    idle = [k for k in range(1, c.n + 1) if k not in leaders]
    node = idle[0] if idle else c.n
    print("cluster of %d nodes, shard leaders %s; the suite talks to node %d (%s)"
          % (c.n, dict(sorted(led.items())), node, c.endpoints[node - 1]), flush=True)
    return c, node


def cluster_env(c, k, users):
    """The MG_* variables of mgserver.Server.env for node k of cluster c."""
    url = c.endpoints[k - 1]
    hostport = url.split("://", 1)[1].rstrip("/")
    d = c.node_dir(k)
    e = {"MG_ENDPOINT": url, "MG_HOST": hostport.rsplit(":", 1)[0],
         "MG_PORT": hostport.rsplit(":", 1)[1], "MG_SCHEME": "http",
         "MG_REGION": "us-east-1", "MG_PID": str(c.pid(k)),
         "MG_DATA_DIR": os.path.join(d, "data"), "MG_CONFIG": os.path.join(d, "config.json"),
         "MG_SERVER_LOG": os.path.join(d, "log"),
         "MG_ACCESS_KEY": users[0]["access_key"], "MG_SECRET_KEY": users[0]["secret_key"],
         "MG_ACCESS_KEY2": users[1]["access_key"], "MG_SECRET_KEY2": users[1]["secret_key"],
         "MG_CLUSTER_ENDPOINTS": " ".join(c.endpoints)}
    return e


def reap_strays(workdir):
    """SIGKILLs, by PID, any process still running from this suite's
    directory (a server a killed suite started in its own session);
    returns their PIDs."""
    strays = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % entry, "rb") as f:
                cmd = f.read().decode("utf-8", "replace")
        except OSError:
            continue
        if workdir + os.sep in cmd and int(entry) != os.getpid():
            try:
                os.kill(int(entry), 9)
                strays.append(int(entry))
            except OSError:
                pass
    return strays


def mounts_under(workdir):
    """Mount points below workdir (the disk-full suite mounts a tmpfs)."""
    try:
        with open("/proc/mounts") as f:
            points = [line.split()[1] for line in f]
    except OSError:
        return []
    return [p for p in points if p.startswith(workdir + os.sep)]


def _kill_group(proc):
    try:
        os.killpg(proc.pid, 9)
    except OSError:
        pass


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "metagate"))
    ap.add_argument("--keep", action="store_true", help="keep temp dirs")
    ap.add_argument("--list", action="store_true", help="list suites")
    ap.add_argument("--cluster", type=int, default=int(os.environ.get("MG_TEST_CLUSTER", "0")),
                    help="run server=default suites against an N-node cluster (env "
                    "MG_TEST_CLUSTER; needs MG_TEST_DATA_RADOS)")
    ap.add_argument("suites", nargs="*", help="suite names (default: all)")
    args = ap.parse_args()
    args.bin = os.path.abspath(args.bin)

    modern = modern_python()
    variants = discover(modern)
    if args.list:
        for v in variants:
            print(v.label)
        return 0
    counts = Counts()
    if args.suites:
        # A name that matches no suite is a failure: a typo must not pass as "0 failed".
        for name in args.suites:
            if not any(v.base == name or v.label == name for v in variants):
                print("no integration suite named %r (run.py --list)" % name, flush=True)
                counts.fail("%s: no such suite" % name)
        variants = [v for v in variants
                    if v.base in args.suites or v.label in args.suites]
    if args.cluster:
        for v in variants:
            if v.server != "default" and not v.skip:
                v.skip = "server=%s is not run against a cluster" % v.server
    t0 = time.monotonic()
    if not os.access(args.bin, os.X_OK):
        print("no executable %s" % args.bin)
        counts.fail("metagate binary missing")
    else:
        for v in variants:
            run_suite(v, args, counts)
    if counts.failures:
        print("\nFailed:")
        for name in counts.failures:
            print("  " + name)
    print("\nintegration suites took %.0f s" % (time.monotonic() - t0))
    print("integration: %d passed, %d failed, %d skipped"
          % (counts.passed, counts.failed, counts.skipped))
    return 1 if counts.failed else 0


if __name__ == "__main__":
    sys.exit(main())
