# SPDX-License-Identifier: Apache-2.0
"""Cluster fixture for the integration suites (issue 10): N metagate nodes on
127.0.0.1 started with deploy/cluster-up (which brings up a throwaway Ceph for
data.backend "rados" when the base config names none) and stopped with
deploy/cluster-down, both by PID. Nodes are killed with SIGKILL (or frozen
with SIGSTOP) and restarted by re-running their recorded command line in
their own directory, as an operator would.

Stdlib only."""

import json
import os
import re
import signal
import socket
import subprocess
import time
import unittest
import urllib.request
import xml.etree.ElementTree as ET

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class ClusterError(Exception):
    pass


def rados_data(namespace):
    """The base config's "data" of a suite on a deploy/ceph-up Ceph (MG_TEST_DATA_RADOS
    names its data.rados.json), in a namespace of its own; unittest.SkipTest without it."""
    rj = os.environ.get("MG_TEST_DATA_RADOS")
    if not rj or not os.path.exists(rj):
        raise unittest.SkipTest("no Ceph: MG_TEST_DATA_RADOS (deploy/ceph-up) not set")
    with open(rj) as f:
        return {"backend": "rados", "rados": dict(json.load(f), namespace=namespace)}


def list_keys(client, bucket):
    """Every key of bucket through client (an s3raw.Client), ListObjectsV2 page by page;
    None if a page fails."""
    keys, token = [], None
    while True:
        q = [("list-type", "2"), ("max-keys", "1000")]
        if token:
            q.append(("continuation-token", token))
        try:
            r = client.request("GET", "/" + bucket, query=q)
        except Exception:
            return None
        if r.status != 200:
            return None
        root = ET.fromstring(r.body)
        keys += [e.text for e in root.iter() if e.tag.endswith("}Key")]
        nxt = [e.text for e in root.iter() if e.tag.endswith("}NextContinuationToken")]
        if not nxt:
            return keys
        token = nxt[0]


class Cluster:
    def __init__(self, binary, workdir, n=3, base=None):
        """base: the config every node starts from (users, switches, data.rados; without a
        data.rados, cluster-up brings up a Ceph of its own under workdir/ceph)."""
        self.binary = os.path.abspath(binary)
        self.workdir = workdir
        self.n = n
        self.base = dict(base or {})
        self.endpoints = []
        self.users = []

    # ------------------------------------------------------------ lifecycle
    def start(self, wait_s=90):
        os.makedirs(self.workdir, exist_ok=True)
        base = dict(self.base)
        path = os.path.join(self.workdir, "base.json")
        with open(path, "w") as f:
            json.dump(base, f)
        env = dict(os.environ, METAGATE_BIN=self.binary, MG_CLUSTER_WAIT_S=str(wait_s))
        r = subprocess.run([os.path.join(ROOT, "deploy", "cluster-up"), str(self.n),
                            self.workdir, path], env=env, capture_output=True, text=True,
                           timeout=wait_s + 120)
        if r.returncode != 0:
            raise ClusterError("cluster-up failed: %s\n%s" % (r.stderr[-3000:], self.logs()))
        self.endpoints = open(os.path.join(self.workdir, "endpoints")).read().split()
        cred = os.path.join(self.workdir, "credentials.json")
        self.users = base.get("users") or json.load(open(cred))
        return self

    def stop(self):
        subprocess.run([os.path.join(ROOT, "deploy", "cluster-down"), self.workdir],
                       capture_output=True, timeout=120)

    def logs(self, tail=40):
        out = []
        for k in range(1, self.n + 1):
            p = os.path.join(self.workdir, "node%d" % k, "log")
            if os.path.exists(p):
                lines = open(p, errors="replace").read().splitlines()[-tail:]
                out.append("--- node%d log\n%s" % (k, "\n".join(lines)))
        return "\n".join(out)

    def env(self):
        u = self.users[0]
        return {"MG_ENDPOINT": self.endpoints[0], "MG_ACCESS_KEY": u["access_key"],
                "MG_SECRET_KEY": u["secret_key"], "MG_REGION": "us-east-1"}

    # ---------------------------------------------------------------- nodes
    def node_dir(self, k):
        return os.path.join(self.workdir, "node%d" % k)

    def pid(self, k):
        try:
            return int(open(os.path.join(self.node_dir(k), "pid")).read().strip())
        except (OSError, ValueError):
            return 0

    def alive(self, k):
        """Whether any thread of node k's process still runs. The thread group leader turns
        zombie (Z) as soon as it has exited, while the other threads may still be tearing
        down (one in an fsync under load), holding the listening sockets: a restart then
        fails with 'Address already in use'. So every task must be a zombie or gone."""
        pid = self.pid(k)
        if pid <= 0:
            return False
        for p in getattr(self, "_procs", []):  # our own children: reap them once dead
            if p.pid == pid and p.poll() is not None:
                return False
        try:
            tasks = os.listdir("/proc/%d/task" % pid)
        except OSError:
            return False
        for t in tasks:
            try:
                with open("/proc/%d/task/%s/stat" % (pid, t)) as f:
                    if f.read().split(")")[-1].split()[0] not in ("Z", "X"):
                        return True
            except OSError:
                continue
        return False

    def ports(self, k):
        """(host, port) of node k's S3, raft and rpc listeners, from its config."""
        cfg = json.load(open(os.path.join(self.node_dir(k), "config.json")))
        out = []
        for nd in cfg.get("cluster", {}).get("nodes", []):
            if nd.get("id") == k:
                for key in ("s3", "raft", "rpc"):
                    if nd.get(key):
                        host, port = nd[key].rsplit(":", 1)
                        out.append((host, int(port)))
        return out

    def wait_ports_free(self, k, timeout=20):
        """Until nothing listens on node k's ports (a bind with SO_REUSEADDR succeeds, as
        metagate's own check does); False if one is still taken after timeout."""
        deadline = time.monotonic() + timeout
        while True:
            busy = []
            for host, port in self.ports(k):
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    s.bind((host, port))
                except OSError:
                    busy.append(port)
                finally:
                    s.close()
            if not busy:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)

    def kill(self, k, sig=signal.SIGKILL):
        pid = self.pid(k)
        if pid > 0:
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        if sig == signal.SIGKILL:
            deadline = time.monotonic() + 30
            while self.alive(k) and time.monotonic() < deadline:
                time.sleep(0.02)
            if self.alive(k):
                raise ClusterError("node %d (pid %d) still runs 30 s after SIGKILL" % (k, pid))

    def restart(self, k):
        """Re-run node k's recorded command line (/proc/PID/cmdline at its start) in its
        own directory."""
        d = self.node_dir(k)
        if not self.wait_ports_free(k):
            raise ClusterError("node %d: its ports %s are still taken 20 s after it died" % (
                k, self.ports(k)))
        argv = [a for a in open(os.path.join(d, "cmdline"), "rb").read().split(b"\0") if a]
        log = open(os.path.join(d, "log"), "ab")
        p = subprocess.Popen([a.decode() for a in argv], cwd=d, stdout=log, stderr=log,
                             stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()
        with open(os.path.join(d, "pid"), "w") as f:
            f.write("%d\n" % p.pid)
        self._procs = getattr(self, "_procs", [])
        self._procs.append(p)  # reaped by Popen's own bookkeeping
        return p.pid

    def add_node(self, k):
        """Start node k, new to the running cluster: its config is node 1's with k added
        to cluster.nodes (fresh ports) and node_id k; the running nodes' configs are left
        as they are (they learn k when it joins). Returns its pid."""
        with open(os.path.join(self.node_dir(1), "config.json")) as f:
            cfg = json.load(f)
        ports = []
        socks = []
        for _ in range(3):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
            ports.append(s.getsockname()[1])
        for s in socks:
            s.close()
        me = {"id": k, "s3": "127.0.0.1:%d" % ports[0], "raft": "127.0.0.1:%d" % ports[1],
              "rpc": "127.0.0.1:%d" % ports[2]}
        d = self.node_dir(k)
        os.makedirs(os.path.join(d, "data"), exist_ok=True)
        cfg["listen"] = me["s3"]
        cfg["data_dir"] = os.path.join(d, "data")
        cfg["cluster"] = dict(cfg["cluster"], node_id=k, nodes=cfg["cluster"]["nodes"] + [me])
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cfg, f, indent=2)
        argv = [self.binary, "serve", "--config", os.path.join(d, "config.json")]
        with open(os.path.join(d, "cmdline"), "wb") as f:
            f.write(b"\0".join(a.encode() for a in argv) + b"\0")
        log = open(os.path.join(d, "log"), "ab")
        p = subprocess.Popen(argv, cwd=d, stdout=log, stderr=log, stdin=subprocess.DEVNULL,
                             start_new_session=True)
        log.close()
        with open(os.path.join(d, "pid"), "w") as f:
            f.write("%d\n" % p.pid)
        self._procs = getattr(self, "_procs", [])
        self._procs.append(p)
        self.n = max(self.n, k)
        self.endpoints.append("http://" + me["s3"])
        return p.pid

    # -------------------------------------------------------------- figures
    def metrics(self, k, timeout=2):
        try:
            return urllib.request.urlopen(self.endpoints[k - 1] + "/metrics",
                                          timeout=timeout).read().decode()
        except Exception:
            return ""

    def shard_leaders(self):
        """{shard id: node id} of the ready leaders the live nodes report."""
        led = {}
        for k in range(1, self.n + 1):
            if not self.alive(k):
                continue
            for m in re.finditer(r'^metagate_raft_leader\{shard="(\d+)"\} 1', self.metrics(k),
                                 re.M):
                led[int(m.group(1))] = k
        return led

    def shards(self):
        body = ""
        for k in range(1, self.n + 1):
            if self.alive(k):
                body = self.metrics(k)
                if body:
                    break
        return sorted(int(s) for s in re.findall(r'^metagate_raft_leader\{shard="(\d+)"\}',
                                                 body, re.M))

    def wait_led(self, timeout=60):
        """Until every shard has a ready leader on a live node; returns the map."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            want = self.shards()
            led = self.shard_leaders()
            if want and all(s in led for s in want):
                return led
            time.sleep(0.2)
        raise ClusterError("not every shard got a leader within %d s\n%s" % (timeout,
                                                                              self.logs()))
