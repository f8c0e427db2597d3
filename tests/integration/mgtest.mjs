// SPDX-License-Identifier: Apache-2.0
// Helpers for the node integration suites: the server's address and keys
// from the MG_* environment (run.py), an S3Client factory for path-style,
// virtual-host style (every *.<domain> name resolved to 127.0.0.1 inside
// the process, as a DNS wildcard would) and TLS, a CRC32, and a tiny runner
// that prints `ok - NAME` / `not ok - NAME` lines for run.py to count.
import http from 'node:http';
import https from 'node:https';
import fs from 'node:fs';
import { S3Client } from '@aws-sdk/client-s3';
import { NodeHttpHandler } from '@smithy/node-http-handler';

export const env = {
  endpoint: process.env.MG_ENDPOINT,
  scheme: process.env.MG_SCHEME || 'http',
  port: process.env.MG_PORT,
  region: process.env.MG_REGION || 'us-east-1',
  accessKey: process.env.MG_ACCESS_KEY,
  secretKey: process.env.MG_SECRET_KEY,
  caFile: process.env.MG_CA_FILE,
  domain: process.env.MG_DOMAIN,
  tmp: process.env.MG_TMP || '/tmp',
};

function lookupLocal(hostname, options, cb) {
  if (options && options.all) return cb(null, [{ address: '127.0.0.1', family: 4 }]);
  return cb(null, '127.0.0.1', 4);
}

// client({virtualHost}): path style against MG_ENDPOINT, or the SDK's
// default virtual-host style against <scheme>://<domain>:<port>.
export function client({ virtualHost = false } = {}) {
  const agentOpts = { keepAlive: true, lookup: lookupLocal };
  if (env.caFile) agentOpts.ca = fs.readFileSync(env.caFile);
  const endpoint = virtualHost ? `${env.scheme}://${env.domain}:${env.port}` : env.endpoint;
  return new S3Client({
    region: env.region,
    endpoint,
    forcePathStyle: !virtualHost,
    credentials: { accessKeyId: env.accessKey, secretAccessKey: env.secretKey },
    maxAttempts: 1,
    requestHandler: new NodeHttpHandler({
      httpAgent: new http.Agent(agentOpts),
      httpsAgent: new https.Agent(agentOpts),
    }),
  });
}

const CRC_TABLE = (() => {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
})();

// crc32Base64(buf): the x-amz-checksum-crc32 value of buf.
export function crc32Base64(buf) {
  let c = 0xffffffff;
  for (const b of buf) c = CRC_TABLE[(c ^ b) & 0xff] ^ (c >>> 8);
  const out = Buffer.alloc(4);
  out.writeUInt32BE((c ^ 0xffffffff) >>> 0);
  return out.toString('base64');
}

export function bucketName(prefix) {
  return `${prefix}-${Math.random().toString(16).slice(2, 10)}${Date.now().toString(16).slice(-6)}`;
}

export function expectEqual(actual, expected, what = 'value') {
  const a = JSON.stringify(actual);
  const e = JSON.stringify(expected);
  if (a !== e) throw new Error(`${what}: expected ${e}, got ${a}`);
}

const tests = [];
export function test(name, fn) {
  tests.push({ name, fn });
}

// run(): runs the tests in order; exits 1 when any failed.
export async function run() {
  let failed = 0;
  console.log(`# node ${process.version}, endpoint ${env.endpoint}`);
  for (const t of tests) {
    try {
      await t.fn();
      console.log(`ok - ${t.name}`);
    } catch (e) {
      failed++;
      console.log(`not ok - ${t.name}`);
      const meta = e && e.$metadata ? ` (HTTP ${e.$metadata.httpStatusCode}, ${e.name})` : '';
      for (const line of String((e && e.stack) || e).split('\n').slice(0, 12)) {
        console.log(`#   ${line}${meta}`);
      }
    }
  }
  process.exit(failed ? 1 : 0);
}
