# SPDX-License-Identifier: Apache-2.0
"""Server fixture for the integration suites: one metagate process on a free
127.0.0.1 port with its own data directory, started from a generated JSON
config, waited for through GET /health, and stopped by PID (SIGTERM, then
SIGKILL). Suites that restart or kill the server (durability) use it
directly; tests/integration/run.py uses it for everything else.

Stdlib only: it runs under /usr/bin/python3 and the pyenv python3 alike.
"""

import json
import os
import secrets
import signal
import socket
import ssl
import string
import subprocess
import time
import urllib.request

HEALTH_TIMEOUT_S = 30
STOP_TIMEOUT_S = 10

# data.backend "rados" for every server (issue 10): MG_TEST_DATA_RADOS names a
# data.rados.json written by deploy/ceph-up; each server then gets its own RADOS
# namespace (MG_RADOS_NAMESPACE), so servers sharing the pool never see each
# other's blobs (the orphan collector and fsck walk the whole namespace).
RADOS_JSON = os.environ.get("MG_TEST_DATA_RADOS")


def rados_opts():
    """The data.rados object of the rados test mode, or None."""
    if not RADOS_JSON:
        return None
    with open(RADOS_JSON) as f:
        return json.load(f)


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on right now (bind 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_user(name):
    """A user entry with a random 20-character access key and 40-character
    secret, shaped like AWS's."""
    alnum = string.ascii_uppercase + string.digits
    ak = "MG" + "".join(secrets.choice(alnum) for _ in range(18))
    sk = "".join(secrets.choice(string.ascii_letters + string.digits + "/+")
                 for _ in range(40))
    return {"name": name, "access_key": ak, "secret_key": sk}


def make_cert(directory, domain=None):
    """Writes a self-signed certificate for 127.0.0.1/localhost (and the
    domain with its wildcard) with openssl; returns (cert_file, key_file)."""
    cert = os.path.join(directory, "cert.pem")
    key = os.path.join(directory, "key.pem")
    san = "IP:127.0.0.1,DNS:localhost"
    if domain:
        san += ",DNS:%s,DNS:*.%s" % (domain, domain)
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
         "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=" + san],
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return cert, key


class ServerError(Exception):
    pass


class Server:
    """One metagate process.

    workdir: a directory this fixture owns; the config, the log and (unless
    data_dir is given) the data directory go inside it. users: list of user
    entries (make_user); an empty list leaves "users" out of the config, so
    the server generates a key pair. tls: serve HTTPS with a fresh self-signed
    certificate. domain: enable virtual-host addressing.
    """

    def __init__(self, binary, workdir, users=None, tls=False, domain=None,
                 data_dir=None, extra_config=None):
        self.binary = binary
        self.workdir = workdir
        self.users = users if users is not None else [make_user("main")]
        self.tls = tls
        self.domain = domain
        self.data_dir = data_dir or os.path.join(workdir, "data")
        self.extra_config = extra_config or {}
        self.config_file = os.path.join(workdir, "metagate.json")
        self.log_file = os.path.join(workdir, "server.log")
        self.cert_file = self.key_file = None
        self.port = None
        self.proc = None
        self.starts = 0
        if tls:
            self.cert_file, self.key_file = make_cert(workdir, domain)
        self.rados = rados_opts()
        self.rados_ns = "t" + secrets.token_hex(8) if self.rados else None

    # -- addresses ---------------------------------------------------------
    @property
    def scheme(self):
        return "https" if self.tls else "http"

    @property
    def endpoint(self):
        return "%s://127.0.0.1:%d" % (self.scheme, self.port)

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def env(self):
        """Environment variables handed to a suite (see run.py)."""
        e = {
            "MG_ENDPOINT": self.endpoint,
            "MG_HOST": "127.0.0.1",
            "MG_PORT": str(self.port),
            "MG_SCHEME": self.scheme,
            "MG_REGION": "us-east-1",
            "MG_PID": str(self.pid),
            "MG_DATA_DIR": self.data_dir,
            "MG_CONFIG": self.config_file,
            "MG_SERVER_LOG": self.log_file,
        }
        if self.users:
            e["MG_ACCESS_KEY"] = self.users[0]["access_key"]
            e["MG_SECRET_KEY"] = self.users[0]["secret_key"]
        if len(self.users) > 1:
            e["MG_ACCESS_KEY2"] = self.users[1]["access_key"]
            e["MG_SECRET_KEY2"] = self.users[1]["secret_key"]
        if self.tls:
            e["MG_CA_FILE"] = self.cert_file
        if self.domain:
            e["MG_DOMAIN"] = self.domain
        if self.rados:
            e["MG_RADOS_NAMESPACE"] = self.rados_ns
        return e

    def fsck_args(self):
        """What `metagate admin fsck --data DIR` needs on top for this server's
        data backend (and rados_env() its namespace)."""
        if not self.rados:
            return []
        return ["--rados-conf", self.rados["conf"], "--rados-pool", self.rados["pool"],
                "--rados-user", self.rados["user"]]

    def rados_cmd(self, *args, **kw):
        """Runs the rados CLI on this server's pool and namespace (rados mode);
        keyword arguments go to subprocess.run (check=True unless given)."""
        r = self.rados
        kw.setdefault("check", True)
        kw.setdefault("timeout", 60)
        return subprocess.run(["rados", "-c", r["conf"], "--id", r["user"], "-p", r["pool"],
                               "-N", self.rados_ns] + list(args), **kw)

    def rados_stripes(self):
        """The names of this server's blob stripe objects (rados mode)."""
        out = self.rados_cmd("ls", capture_output=True, text=True).stdout.split()
        return sorted(n for n in out if n.startswith("mg.") and n != "mg.instances")

    def rados_bytes(self):
        """Data bytes stored in this server's stripe objects (rados mode)."""
        total = 0
        for name in self.rados_stripes():
            r = self.rados_cmd("stat", name, capture_output=True, text=True, check=False)
            if r.returncode == 0:  # removed meanwhile: counts as gone
                total += int(r.stdout.rsplit("size ", 1)[1].split()[0])
        return total

    def rados_env(self):
        """os.environ plus this server's RADOS namespace (rados mode)."""
        e = dict(os.environ)
        if self.rados:
            e["MG_RADOS_NAMESPACE"] = self.rados_ns
        return e

    # -- lifecycle -----------------------------------------------------------
    def write_config(self):
        cfg = {
            "listen": "127.0.0.1:%d" % self.port,
            "data_dir": self.data_dir,
            "region": "us-east-1",
        }
        if self.users:
            cfg["users"] = self.users
        if self.tls:
            cfg["tls"] = {"cert_file": self.cert_file, "key_file": self.key_file}
        if self.domain:
            cfg["domain"] = self.domain
        if self.rados:
            cfg["data"] = {"backend": "rados", "rados": self.rados}
        cfg.update(self.extra_config)
        # The raft host's port (default: the S3 port + 1, which a busy machine's client
        # sockets often hold) is chosen free on every start; a single voter never dials
        # its own address, so it may change between restarts.
        meta = dict(cfg.get("meta", {}))
        meta.setdefault("raft_listen", "127.0.0.1:%d" % free_port())
        cfg["meta"] = meta
        with open(self.config_file, "w") as f:
            json.dump(cfg, f, indent=2)

    def start(self, same_port=False):
        """Starts the server and waits until /health answers 200. A new port
        is chosen unless same_port (a restart keeps its clients' endpoint);
        a start that loses the race for a free port is retried."""
        os.makedirs(self.data_dir, exist_ok=True)
        attempts = 1 if same_port else 3
        last = None
        for _ in range(attempts):
            if not same_port or self.port is None:
                self.port = free_port()
            self.write_config()
            try:
                self._spawn()
                return self
            except ServerError as e:
                last = e
        raise last

    def _spawn(self):
        self.starts += 1
        log = open(self.log_file, "ab")
        log.write(("\n--- start %d on port %d ---\n" % (self.starts, self.port)).encode())
        log.flush()
        self.proc = subprocess.Popen(
            [self.binary, "serve", "--config", self.config_file,
             "--listen", "127.0.0.1:%d" % self.port, "--data", self.data_dir],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True, env=self.rados_env())
        log.close()
        deadline = time.monotonic() + HEALTH_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ServerError("metagate exited with %s during start:\n%s"
                                  % (self.proc.returncode, self.log_tail()))
            if self.healthy():
                return
            time.sleep(0.05)
        self.kill9()
        raise ServerError("metagate did not answer GET /health within %d s:\n%s"
                          % (HEALTH_TIMEOUT_S, self.log_tail()))

    def healthy(self):
        ctx = None
        if self.tls:
            ctx = ssl.create_default_context(cafile=self.cert_file)
        try:
            with urllib.request.urlopen(self.endpoint + "/health", timeout=2,
                                        context=ctx) as r:
                return r.status == 200
        except Exception:
            return False

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self):
        """SIGTERM by PID, SIGKILL after STOP_TIMEOUT_S; returns the exit
        status (negative: killed by that signal)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        return self.proc.returncode

    def kill9(self):
        """SIGKILL by PID, no chance to flush anything."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def restart(self, kill=False):
        """Stops (or kill -9s) and starts again on the same port and data."""
        if kill:
            self.kill9()
        else:
            self.stop()
        return self.start(same_port=True)

    def log_tail(self, lines=40):
        try:
            with open(self.log_file, "rb") as f:
                data = f.read().decode("utf-8", "replace").splitlines()
        except OSError:
            return "(no server log)"
        return "\n".join(data[-lines:])
