#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Differential S3 conformance: sends the same request sequences
(scenarios.py) to two endpoints, A and B, and reports every difference in
HTTP status, S3 error Code (and Message where a step asks for it), the
response headers S3 defines and chosen XML fields of the response body.

  run.py --a URL --b URL           two running endpoints (same key pair)
  run.py --start-both              starts metagate (--bin) and the Ceph RGW
                                   peer itself, stops both by PID at the end

Requests are made with a raw socket and the SigV4 signer of
tests/integration/s3raw.py, so every byte on the wire is what the scenario
says. Differences listed in intended.json are reported as intended, with
their reason; any other difference makes the exit status 1. Output: a
Markdown table on stdout (or --md FILE) and every step's two answers as JSON
(--json FILE).
"""

import argparse
import datetime
import fnmatch
import hashlib
import http.client
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
sys.path.insert(0, HERE)

import s3raw  # noqa: E402
import scenarios  # noqa: E402

ACCESS_KEY = "AKIAIOSFODNN7EXAMPLE"
SECRET_KEY = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
RGW_PEER = "/work/shared/peers/ceph-rgw"

# Response headers S3 defines whose value is compared exactly.
VALUE_HEADERS = [
    "etag", "content-length", "content-range", "content-type", "content-encoding",
    "content-language", "content-disposition", "cache-control", "expires",
    "accept-ranges", "x-amz-expiration", "x-amz-tagging-count", "x-amz-mp-parts-count",
    "x-amz-checksum-crc32", "x-amz-checksum-crc32c", "x-amz-checksum-crc64nvme",
    "x-amz-checksum-sha1", "x-amz-checksum-sha256", "x-amz-checksum-type",
    "x-amz-delete-marker", "x-amz-missing-meta", "x-amz-copy-source-version-id",
    "x-amz-bucket-region", "x-amz-storage-class", "x-amz-checksum-algorithm",
]
# Headers whose presence only is compared (values are per-server).
PRESENCE_HEADERS = ["last-modified", "x-amz-version-id", "x-amz-request-id", "date"]


# ------------------------------------------------------------------ endpoints

class Endpoint:
    def __init__(self, name, url, access_key=ACCESS_KEY, secret=SECRET_KEY,
                 region="us-east-1"):
        u = urllib.parse.urlsplit(url)
        self.name = name
        self.url = url
        self.host = u.hostname
        self.port = u.port or 80
        self.hostport = u.netloc
        self.access_key = access_key
        self.secret = secret
        self.region = region
        self.held = {}          # hold name -> (socket, rest of body, method)


def subst(value, env):
    """${name} -> env[name] in a str (or in bytes, as UTF-8)."""
    if isinstance(value, bytes):
        return subst(value.decode("latin-1"), env).encode("latin-1") \
            if b"${" in value else value
    if not isinstance(value, str) or "${" not in value:
        return value
    out = value
    for k, v in env.items():
        out = out.replace("${%s}" % k, str(v))
    return out


def wire_query(query):
    """The query string as sent: (k, None) is a bare name ("?uploads")."""
    parts = []
    for k, v in query:
        if v is None:
            parts.append(s3raw.uri_encode(k, False))
        else:
            parts.append("%s=%s" % (s3raw.uri_encode(k, False), s3raw.uri_encode(v, False)))
    return "&".join(parts)


def build(ep, step, env):
    """The bytes of one request: (head bytes, body bytes, method). A step's
    keys are documented in scenarios.py."""
    method = step["method"]
    path = subst(step.get("path", "/${b}"), env)
    query = [(subst(k, env), subst(v, env) if v is not None else None)
             for k, v in step.get("query", [])]
    body = subst(step.get("body", b""), env)
    if isinstance(body, str):
        body = body.encode("utf-8")
    headers = {"Host": ep.hostport}
    for k, v in step.get("headers", {}).items():
        headers[k] = subst(v, env)
    auth = step.get("auth", "v4")
    region = step.get("region", ep.region)
    when = datetime.datetime.now(datetime.timezone.utc) + \
        datetime.timedelta(seconds=step.get("clock_offset", 0))
    chunked = step.get("aws_chunked")
    te = step.get("transfer_encoding")
    if chunked:
        mode = chunked["mode"]
        trailer = chunked.get("trailer")
        headers.setdefault("x-amz-decoded-content-length", str(len(body)))
        if trailer:
            headers["x-amz-trailer"] = trailer[0]
        probe = s3raw.aws_chunked(body, chunked.get("chunk", 65536),
                                  ("x", region, "20000101T000000Z", "0" * 64)
                                  if mode.startswith("STREAMING-AWS4") else None, trailer)
        headers["Content-Length"] = str(len(probe))
    target_query = query
    if auth == "v4":
        ph = step.get("payload_hash") or (chunked["mode"] if chunked else
                                          hashlib.sha256(body).hexdigest())
        canon_q = [(k, v if v is not None else "") for k, v in query]
        s3raw.sign_v4(method, path, canon_q, headers, ph, ep.access_key, ep.secret,
                      region, when)
    elif auth == "presign":
        canon_q = [(k, v if v is not None else "") for k, v in query]
        pre = s3raw.presign_v4(method, ep.hostport, path, ep.access_key, ep.secret,
                               expires=step.get("expires", 3600), region=region,
                               when=when, query=canon_q)
        target_query = None
        path_qs = pre
    elif auth == "bad-signature":
        ph = hashlib.sha256(body).hexdigest()
        s3raw.sign_v4(method, path, [(k, v or "") for k, v in query], headers, ph,
                      ep.access_key, "not-the-secret", region, when)
    if chunked:
        signing = None
        if chunked["mode"].startswith("STREAMING-AWS4"):
            seed = headers["Authorization"].rsplit("Signature=", 1)[1]
            signing = (ep.secret, region, headers["x-amz-date"], seed)
        body = s3raw.aws_chunked(body, chunked.get("chunk", 65536), signing,
                                 chunked.get("trailer"))
    for k, v in step.get("unsigned_headers", {}).items():
        headers[k] = subst(v, env)
    if te:
        body = b"".join(b"%x\r\n%s\r\n" % (len(body[i:i + 4096]), body[i:i + 4096])
                        for i in range(0, len(body), 4096)) + b"0\r\n\r\n"
    elif "Content-Length" not in headers and (body or method in ("PUT", "POST")):
        headers["Content-Length"] = str(len(body))
    if "content_length" in step:
        headers["Content-Length"] = str(step["content_length"])
    if target_query is not None:
        target = path + ("?" + wire_query(query) if query else "")
    else:
        target = path_qs
    if "raw_target" in step:
        target = subst(step["raw_target"], env)
    lines = ["%s %s HTTP/1.1" % (method, target)]
    lines += ["%s: %s" % (k, v) for k, v in headers.items()]
    lines += ["%s: %s" % (k, v) for k, v in step.get("extra_raw_headers", [])]
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8", "surrogateescape")
    if not step.get("send_body", True):
        body = b""
    return head, body, method


def read_response(sock, method):
    resp = http.client.HTTPResponse(sock, method=method)
    resp.begin()
    data = resp.read()
    hdrs = {}
    for k, v in resp.getheaders():
        k = k.lower()
        hdrs[k] = hdrs[k] + ", " + v if k in hdrs else v
    return resp.status, hdrs, data


def send(ep, step, env):
    """Sends one step to ep; returns a result dict."""
    if "resume" in step:
        sock, rest, method = ep.held.pop(step["resume"])
        try:
            sock.sendall(rest)
            return finish(sock, method, step)
        finally:
            sock.close()
    head, body, method = build(ep, step, env)
    sock = socket.create_connection((ep.host, ep.port), timeout=step.get("timeout", 20))
    if "hold" in step:
        half = len(body) // 2
        sock.sendall(head + body[:half])
        time.sleep(0.2)
        ep.held[step["hold"]] = (sock, body[half:], method)
        return {"held": True}
    try:
        if step.get("expect_interim"):
            return send_expecting(sock, head, body, method, step)
        try:
            sock.sendall(head + body)
        except OSError:
            pass  # the server may answer and close before reading all of it
        return finish(sock, method, step)
    finally:
        sock.close()


def send_expecting(sock, head, body, method, step):
    """Expect: 100-continue as a careful client uses it: send the head, wait
    up to 3 s for the server's first answer, send the body only after a 100.
    The result's "interim" says what came first."""
    sock.settimeout(3)
    sock.sendall(head)
    try:
        first = sock.recv(12, socket.MSG_PEEK)
    except socket.timeout:
        first = b""
    sock.settimeout(step.get("timeout", 20))
    if first.startswith(b"HTTP/1.1 100"):
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(1)
            if not chunk:
                break
            data += chunk
        interim = "100 Continue, then the body"
        sock.sendall(body)
    elif first:
        interim = "final answer before the body"
    else:
        interim = "no answer in 3 s, body sent"
        sock.sendall(body)
    res = finish(sock, method, step)
    res["interim"] = interim
    return res


def finish(sock, method, step):
    try:
        status, hdrs, data = read_response(sock, method)
    except socket.timeout:
        return {"status": None, "transport": "timeout (no answer in %ss)"
                % step.get("timeout", 20), "headers": {}, "body": ""}
    except (OSError, http.client.HTTPException) as e:
        return {"status": None, "transport": "%s: %s" % (type(e).__name__, e),
                "headers": {}, "body": ""}
    code, message = xml_error(data)
    return {"status": status, "headers": hdrs, "code": code, "message": message,
            "body": data.decode("utf-8", "replace"),
            "xml": hdrs.get("content-type", "").find("xml") >= 0 or data[:5] == b"<?xml"}


def xml_error(data):
    try:
        root = ET.fromstring(data)
    except ET.ParseError:
        return (None, None)
    if local(root.tag) != "Error":
        return (None, None)
    def text(name):
        for el in root:
            if local(el.tag) == name:
                return el.text
        return None
    return text("Code"), text("Message")


def local(tag):
    return tag.rsplit("}", 1)[-1]


def xml_values(body, name):
    """The texts of every element whose local name (or slash path of local
    names) is name, joined by '|'; None when the body is not XML."""
    try:
        root = ET.fromstring(body.encode("utf-8"))
    except ET.ParseError:
        return None
    parts = name.split("/")
    out = []
    for el in root.iter():
        if local(el.tag) != parts[-1]:
            continue
        out.append(el.text or "")
    if len(parts) > 1:
        out = []
        def walk(node, i):
            for ch in node:
                if local(ch.tag) == parts[i]:
                    if i == len(parts) - 1:
                        out.append(ch.text or "")
                    else:
                        walk(ch, i + 1)
        walk(root, 0)
    return "|".join(out)


def capture(res, spec):
    kind, _, name = spec.partition(":")
    if kind == "hdr":
        return res.get("headers", {}).get(name, "")
    if kind == "xml":
        v = xml_values(res.get("body", ""), name)
        return (v or "").split("|")[0]
    raise ValueError("bad capture " + spec)


# ------------------------------------------------------------------ comparing

def fields(res, step):
    """The comparable view of one answer: field name -> value."""
    if res.get("held"):
        return {}
    f = {}
    if res.get("status") is None:
        f["transport"] = res.get("transport")
        return f
    f["status"] = res["status"]
    if "interim" in res:
        f["interim"] = res["interim"]
    f["code"] = res.get("code")
    if res["status"] >= 400 and res.get("body") and not res.get("code"):
        f["error-format"] = "not S3 XML: %r" % res["body"][:60]
    if step.get("compare_message"):
        f["message"] = res.get("message")
    h = res["headers"]
    err = res["status"] >= 400
    for name in VALUE_HEADERS:
        if err and name in ("content-length", "content-type"):
            continue
        if name == "content-length" and res.get("xml"):
            continue  # XML documents differ in whitespace and server names
        f["hdr:" + name] = h.get(name)
    for name in PRESENCE_HEADERS:
        f["hdr:" + name] = "present" if name in h else None
    for name in h:
        if name.startswith("x-amz-meta-"):
            f["hdr:" + name] = h[name]
    for name in step.get("xml", []):
        if name.startswith("?"):
            v = xml_values(res.get("body", ""), name[1:])
            f["xml:" + name[1:]] = "present" if v else None
        else:
            f["xml:" + name] = xml_values(res.get("body", ""), name)
    for name in step.get("ignore", []):
        f.pop(name, None)
    return f


def load_intended(path):
    with open(path) as fp:
        doc = json.load(fp)
    return doc["intended"]


def intended_reason(intended, scen, rec, field, va, vb):
    """The id and reason of the first intended.json entry matching this
    difference, or None. An entry matches on scenario (glob), step (number
    or "*"), field (glob or list of globs), a / b (globs over the values),
    method (glob) and status_a / status_b (globs over the statuses)."""
    for e in intended:
        if not fnmatch.fnmatchcase(scen, e.get("scenario", "*")):
            continue
        step = e.get("step", "*")
        if step != "*" and rec["step"] not in (step if isinstance(step, list) else [step]):
            continue
        if not fnmatch.fnmatchcase(rec["method"], e.get("method", "*")):
            continue
        sa, sb = (r.get("status") for r in rec["results"])
        if not fnmatch.fnmatchcase(str(sa), str(e.get("status_a", "*"))):
            continue
        if not fnmatch.fnmatchcase(str(sb), str(e.get("status_b", "*"))):
            continue
        if not fnmatchcase_any(field, e.get("field", "*")):
            continue
        if "a" in e and not fnmatchcase_any(str(va), e["a"]):
            continue
        if "b" in e and not fnmatchcase_any(str(vb), e["b"]):
            continue
        return e["id"] + ": " + e["why"]
    return None


def fnmatchcase_any(value, patterns):
    if isinstance(patterns, str):
        patterns = [patterns]
    return any(fnmatch.fnmatchcase(value, p) for p in patterns)


# ------------------------------------------------------------------ running

def run_scenario(eps, scen, idx, runid):
    """Runs one scenario on every endpoint; returns the list of step records."""
    bucket = "cf%s-%02d" % (runid, idx)
    envs = [{"b": bucket, "runid": runid} for _ in eps]
    steps = list(scen["steps"])
    if scen.get("bucket", True):
        steps.insert(0, {"method": "PUT", "path": "/${b}", "setup": True})
    records = []
    for n, step in enumerate(steps):
        if "sleep" in step:
            time.sleep(step["sleep"])
            continue
        rec = {"step": n, "desc": describe(step), "results": [],
               "method": step.get("method", "")}
        for ep, env in zip(eps, envs):
            res = send(ep, step, env)
            for var, spec in step.get("capture", {}).items():
                env[var] = capture(res, spec)
            rec["results"].append(res)
        rec["fields"] = [fields(r, step) for r in rec["results"]]
        rec["setup"] = step.get("setup", False)
        rec["aws"] = step.get("aws")
        rec["aws_message"] = step.get("aws_message")
        rec["aws_fields"] = step.get("aws_fields")
        records.append(rec)
    return bucket, records


def describe(step):
    if "resume" in step:
        return "(finish held request %s)" % step["resume"]
    q = "&".join(k if v is None else "%s=%s" % (k, v) for k, v in step.get("query", []))
    s = "%s %s%s" % (step["method"], step.get("raw_target", step.get("path", "/${b}")),
                     "?" + q if q else "")
    extras = []
    for k, v in step.get("headers", {}).items():
        v = str(v)
        extras.append("%s: %s" % (k, v if len(v) < 40 else v[:37] + "..."))
    for k, v in step.get("unsigned_headers", {}).items():
        extras.append("%s: %s (unsigned)" % (k, v))
    if step.get("auth", "v4") != "v4":
        extras.append("auth=%s" % step["auth"])
    if "expires" in step:
        extras.append("X-Amz-Expires=%s" % step["expires"])
    if "region" in step:
        extras.append("region=%s" % step["region"])
    if step.get("transfer_encoding"):
        extras.append("Transfer-Encoding: chunked")
    if step.get("aws_chunked"):
        extras.append(step["aws_chunked"]["mode"])
    if "content_length" in step:
        extras.append("Content-Length: %s" % step["content_length"])
    if "hold" in step:
        extras.append("(held half-sent as %s)" % step["hold"])
    if "note" in step:
        extras.append(step["note"])
    return s + (" [" + "; ".join(extras) + "]" if extras else "")


def cleanup(ep, bucket):
    """Best effort: abort uploads, delete every key, delete the bucket."""
    env = {"b": bucket}
    for _ in range(5):
        r = send(ep, {"method": "GET", "query": [("uploads", None)]}, env)
        if r.get("status") != 200:
            break
        keys = xml_values(r["body"], "Upload/Key") or ""
        ids = xml_values(r["body"], "Upload/UploadId") or ""
        if not ids:
            break
        for k, u in zip(keys.split("|"), ids.split("|")):
            send(ep, {"method": "DELETE", "path": "/${b}/" + s3raw.uri_encode(k),
                      "query": [("uploadId", u)]}, env)
    for _ in range(20):
        r = send(ep, {"method": "GET", "query": [("encoding-type", "url")]}, env)
        if r.get("status") != 200:
            break
        keys = [k for k in (xml_values(r["body"], "Contents/Key") or "").split("|") if k]
        if not keys:
            break
        for k in keys:
            raw = urllib.parse.unquote_to_bytes(k)
            send(ep, {"method": "DELETE",
                      "path": "/${b}/" + urllib.parse.quote_from_bytes(raw, safe="/~")}, env)
    send(ep, {"method": "DELETE"}, env)


def free_port():
    """A port p where p and p+1 (metagate's Raft listener) are free."""
    for _ in range(50):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        p = s.getsockname()[1]
        s.close()
        t = socket.socket()
        try:
            t.bind(("127.0.0.1", p + 1))
            return p
        except OSError:
            continue
        finally:
            t.close()
    raise RuntimeError("no free port pair")


def start_metagate(binary, workdir):
    port = free_port()
    cfg = {"listen": "127.0.0.1:%d" % port, "data_dir": os.path.join(workdir, "mg-data"),
           "region": "us-east-1",
           "users": [{"name": "main", "access_key": ACCESS_KEY, "secret_key": SECRET_KEY}]}
    path = os.path.join(workdir, "metagate.json")
    with open(path, "w") as fp:
        json.dump(cfg, fp)
    log = open(os.path.join(workdir, "metagate.log"), "wb")
    proc = subprocess.Popen([binary, "serve", "--config", path], stdout=log,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    url = "http://127.0.0.1:%d" % port
    for _ in range(100):
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/health")
            if c.getresponse().status == 200:
                return proc, url
        except OSError:
            pass
        if proc.poll() is not None:
            raise RuntimeError("metagate exited; see %s/metagate.log" % workdir)
        time.sleep(0.1)
    raise RuntimeError("metagate did not answer /health")


def start_rgw(peer, workdir, port):
    d = os.path.join(workdir, "ceph")
    env = dict(os.environ, OBJECTSTORE="memstore", WITH_MGR="0", OSD_BLOCK_SIZE_GB="2",
               RGW_PORT=str(port))
    subprocess.run([os.path.join(peer, "start.sh"), d], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    return d, "http://127.0.0.1:%d" % port


def table(records_by_scen, intended):
    """Markdown table of every difference; returns (lines, counts, diffs)."""
    rows = []
    diffs = []
    for scen, recs in records_by_scen:
        for rec in recs:
            fa, fb = rec["fields"]
            names = set(fa) | set(fb)
            if fa.get("status") != fb.get("status"):
                # the headers and body of a different answer differ as a consequence
                names = [n for n in names if n in STATUS_FIELDS]
            for field in sorted(names, key=field_order):
                va, vb = fa.get(field), fb.get(field)
                if va == vb:
                    continue
                why = intended_reason(intended, scen["name"], rec, field, va, vb)
                d = {"scenario": scen["name"], "area": scen.get("area", ""),
                     "step": rec["step"], "request": rec["desc"], "field": field,
                     "a": va, "b": vb, "intended": why}
                diffs.append(d)
    lines = ["| # | scenario | step | request | field | A | B | verdict |",
             "|---|---|---|---|---|---|---|---|"]
    for i, d in enumerate(diffs, 1):
        verdict = "intended (%s)" % d["intended"].split(":")[0] if d["intended"] \
            else "**DIFF**"
        lines.append("| %d | %s | %d | %s | %s | %s | %s | %s |" % (
            i, d["scenario"], d["step"], md(d["request"]), d["field"], md(d["a"]),
            md(d["b"]), verdict))
    counts = {"differences": len(diffs),
              "intended": sum(1 for d in diffs if d["intended"]),
              "unexpected": sum(1 for d in diffs if not d["intended"])}
    return lines, counts, diffs


STATUS_FIELDS = ["transport", "interim", "status", "code", "error-format", "message"]


def aws_table(records_by_scen, names):
    """Rows for every step with a documented AWS answer that an endpoint
    does not give: (lines, rows)."""
    rows = []
    for scen, recs in records_by_scen:
        for rec in recs:
            if rec.get("aws_fields"):
                rows += aws_field_rows(scen, rec, names)
            if not rec.get("aws"):
                continue
            want = tuple(rec["aws"])
            got = [(r.get("status"), r.get("code")) for r in rec["results"]]
            bad = [n for n, g in zip(names, got) if g != want]
            msg = rec.get("aws_message")
            if msg:
                want += ("%r" % msg,)
                for i, r in enumerate(rec["results"]):
                    m = r.get("message") or ""
                    got[i] += ("%r" % m,)
                    if not m.startswith(msg.split(" that is")[0]) and names[i] not in bad:
                        bad.append(names[i])
            if bad:
                rows.append({"scenario": scen["name"], "step": rec["step"],
                             "request": rec["desc"], "aws": " ".join(map(str, want)),
                             "a": " ".join(map(str, got[0])), "b": " ".join(map(str, got[1])),
                             "differs": bad})
    lines = ["| scenario | step | request | AWS | A | B | differs from AWS |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append("| %s | %d | %s | %s | %s | %s | %s |" % (
            r["scenario"], r["step"], md(r["request"]), md(r["aws"]), md(r["a"]), md(r["b"]),
            ", ".join(r["differs"])))
    return lines, rows


def aws_field_rows(scen, rec, names):
    """Rows for the fields (header or XML values, as in fields()) whose value
    AWS documents for this step (aws_fields) and an endpoint does not give."""
    rows = []
    for field, want in rec["aws_fields"].items():
        got = [f.get(field) for f in rec["fields"]]
        bad = [n for n, g in zip(names, got) if g != want]
        if bad:
            rows.append({"scenario": scen["name"], "step": rec["step"],
                         "request": rec["desc"], "aws": "%s %s" % (field, want),
                         "a": "%s" % got[0], "b": "%s" % got[1], "differs": bad})
    return rows


def field_order(f):
    order = STATUS_FIELDS
    return (order.index(f) if f in order else len(order), f)


def md(v):
    s = "—" if v is None else str(v)
    if len(s) > 90:
        s = s[:87] + "..."
    return s.replace("|", "\\|").replace("\n", " ")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a", help="endpoint A (metagate), e.g. http://127.0.0.1:9000")
    ap.add_argument("--b", help="endpoint B (reference, Ceph RGW), e.g. http://127.0.0.1:7480")
    ap.add_argument("--a-name", default="metagate")
    ap.add_argument("--b-name", default="rgw")
    ap.add_argument("--start-both", action="store_true",
                    help="start metagate (--bin) and the RGW peer, stop them at the end")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "metagate"))
    ap.add_argument("--rgw-port", type=int, default=7480)
    ap.add_argument("--rgw-peer", default=RGW_PEER,
                    help="directory with the peer's start.sh and stop.sh")
    ap.add_argument("--access-key", default=ACCESS_KEY)
    ap.add_argument("--secret-key", default=SECRET_KEY)
    ap.add_argument("--only", action="append", default=[],
                    help="run only scenarios whose name matches this glob (repeatable)")
    ap.add_argument("--list", action="store_true", help="list the scenarios and exit")
    ap.add_argument("--intended", default=os.path.join(HERE, "intended.json"))
    ap.add_argument("--json", help="write every step's answers and the differences here")
    ap.add_argument("--md", help="write the Markdown table here (default: stdout)")
    ap.add_argument("--keep", action="store_true",
                    help="keep the test buckets (and, with --start-both, the work directory)")
    args = ap.parse_args()

    scens = [s for s in scenarios.SCENARIOS
             if not args.only or any(fnmatch.fnmatchcase(s["name"], g) for g in args.only)]
    if args.list:
        for s in scens:
            print("%-40s %s" % (s["name"], s.get("area", "")))
        return 0
    names = [s["name"] for s in scenarios.SCENARIOS]
    assert len(names) == len(set(names)), "duplicate scenario names"
    intended = load_intended(args.intended)

    procs = []
    workdir = None
    rgw_dir = None
    try:
        if args.start_both:
            workdir = tempfile.mkdtemp(prefix="mg-conformance-")
            proc, args.a = start_metagate(args.bin, workdir)
            procs.append(proc)
            rgw_dir, args.b = start_rgw(args.rgw_peer, workdir, args.rgw_port)
        if not (args.a and args.b):
            ap.error("give --a and --b, or --start-both")
        eps = [Endpoint(args.a_name, args.a, args.access_key, args.secret_key),
               Endpoint(args.b_name, args.b, args.access_key, args.secret_key)]
        runid = secrets.token_hex(3)
        results = []
        buckets = []
        t0 = time.monotonic()
        for i, scen in enumerate(scens):
            try:
                bucket, recs = run_scenario(eps, scen, names.index(scen["name"]), runid)
            except Exception as e:  # a broken scenario must not hide the others
                print("# scenario %s failed: %r" % (scen["name"], e), file=sys.stderr)
                continue
            buckets.append(bucket)
            results.append((scen, recs))
        if not args.keep:
            for ep in eps:
                for b in buckets:
                    cleanup(ep, b)
                for b in scenarios.EXTRA_BUCKETS:
                    send(ep, {"method": "DELETE", "path": "/" + b}, {})
        lines, counts, diffs = table(results, intended)
        steps = sum(len(r) for _, r in results)
        head = ["A = %s (%s), B = %s (%s); %d scenarios, %d requests each, %.1f s"
                % (args.a_name, args.a, args.b_name, args.b, len(results), steps,
                   time.monotonic() - t0),
                "%(differences)d differences: %(intended)d intended, "
                "%(unexpected)d unexpected" % counts, ""]
        alines, arows = aws_table(results, [args.a_name, args.b_name])
        text = "\n".join(head + lines) + "\n"
        text += ("\nSteps whose answer differs from the one AWS documents (%d):\n\n"
                 % len(arows)) + "\n".join(alines) + "\n"
        if args.md:
            with open(args.md, "w") as fp:
                fp.write(text)
        else:
            sys.stdout.write(text)
        if args.json:
            out = {"a": {"name": args.a_name, "url": args.a},
                   "b": {"name": args.b_name, "url": args.b}, "counts": counts,
                   "differences": diffs, "aws_mismatches": arows,
                   "scenarios": [{"name": s["name"], "area": s.get("area", ""),
                                  "steps": [{"step": r["step"], "request": r["desc"],
                                             "a": strip(r["results"][0]),
                                             "b": strip(r["results"][1])}
                                            for r in recs]}
                                 for s, recs in results]}
            with open(args.json, "w") as fp:
                json.dump(out, fp, indent=1, sort_keys=True)
        print("# %(differences)d differences, %(intended)d intended, %(unexpected)d "
              "unexpected" % counts, file=sys.stderr)
        return 1 if counts["unexpected"] else 0
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if rgw_dir:
            subprocess.run([os.path.join(args.rgw_peer, "stop.sh"), rgw_dir],
                           stdout=subprocess.DEVNULL)
        if workdir and not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
        elif workdir:
            print("# kept %s" % workdir, file=sys.stderr)


def strip(res):
    r = dict(res)
    if len(r.get("body", "")) > 2000:
        r["body"] = r["body"][:2000] + "...(%d bytes)" % len(res["body"])
    return r


if __name__ == "__main__":
    sys.exit(main())
