// SPDX-License-Identifier: Apache-2.0
// mg: server=default,domain,tls
// @aws-sdk/client-s3 (AWS SDK for JavaScript v3) against metagate:
// PutObject with its default CRC32 (a header for a Buffer body, the
// STREAMING-UNSIGNED-PAYLOAD-TRAILER aws-chunked mode for a stream body),
// GetObject (whole, ranged, with checksum mode), ListObjectsV2 with a
// delimiter and continuation, DeleteObjects, and a multipart upload.
// Path style (forcePathStyle) on the default and TLS servers; the SDK's
// default virtual-host style on the server with a domain.
import fs from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';
import {
  CreateBucketCommand, DeleteBucketCommand, PutObjectCommand, GetObjectCommand,
  HeadObjectCommand, ListObjectsV2Command, DeleteObjectsCommand,
  CreateMultipartUploadCommand, UploadPartCommand, CompleteMultipartUploadCommand,
} from '@aws-sdk/client-s3';
import { env, client, crc32Base64, bucketName, expectEqual, test, run } from './mgtest.mjs';

const virtualHost = Boolean(env.domain) && env.scheme === 'http';
const s3 = client({ virtualHost });
const bucket = bucketName('js');
const small = crypto.randomBytes(1024);

// Which payload modes went over the wire: x-amz-content-sha256 per request.
const seen = [];
s3.middlewareStack.add((next) => async (args) => {
  const h = args.request.headers || {};
  seen.push({ hostname: args.request.hostname, path: args.request.path,
              sha: h['x-amz-content-sha256'], trailer: h['x-amz-trailer'] });
  return next(args);
}, { step: 'finalizeRequest', priority: 'low', name: 'mgRecord' });

test(`CreateBucket (${virtualHost ? 'virtual-host' : 'path'} style)`, async () => {
  await s3.send(new CreateBucketCommand({ Bucket: bucket }));
  if (virtualHost) {
    const last = seen[seen.length - 1];
    expectEqual(last.hostname, `${bucket}.${env.domain}`, 'Host of a virtual-host request');
  }
});

test('PutObject Buffer body (CRC32 header), GetObject bytes and checksum', async () => {
  const put = await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'dir/small.bin', Body: small }));
  expectEqual(put.ETag, `"${crypto.createHash('md5').update(small).digest('hex')}"`, 'ETag');
  const got = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'dir/small.bin',
    ChecksumMode: 'ENABLED' }));
  const body = Buffer.from(await got.Body.transformToByteArray());
  expectEqual(body.equals(small), true, 'bytes equal');
  expectEqual(got.ChecksumCRC32, crc32Base64(small), 'ChecksumCRC32');
});

test('PutObject stream body (STREAMING-UNSIGNED-PAYLOAD-TRAILER, CRC32 trailer)', async () => {
  const data = crypto.randomBytes(300 * 1024 + 17);
  const file = path.join(env.tmp, 'stream.bin');
  fs.writeFileSync(file, data);
  const before = seen.length;
  await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'dir/stream.bin',
    Body: fs.createReadStream(file) }));
  const req = seen.slice(before).find((r) => r.path.includes('stream.bin'));
  expectEqual(req && req.sha, 'STREAMING-UNSIGNED-PAYLOAD-TRAILER', 'payload mode');
  const got = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'dir/stream.bin',
    ChecksumMode: 'ENABLED' }));
  const body = Buffer.from(await got.Body.transformToByteArray());
  expectEqual(body.length, data.length, 'length');
  expectEqual(body.equals(data), true, 'bytes equal');
  expectEqual(got.ChecksumCRC32, crc32Base64(data), 'ChecksumCRC32 from the trailer');
});

test('GetObject Range and HeadObject', async () => {
  const got = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'dir/small.bin',
    Range: 'bytes=10-19' }));
  const body = Buffer.from(await got.Body.transformToByteArray());
  expectEqual(body.equals(small.subarray(10, 20)), true, 'range bytes');
  expectEqual(got.ContentRange, 'bytes 10-19/1024', 'ContentRange');
  const head = await s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'dir/small.bin' }));
  expectEqual(head.ContentLength, 1024, 'ContentLength');
});

test('ListObjectsV2 with delimiter and continuation', async () => {
  const keys = ['dir/a', 'dir/b', 'dir/sub/c', 'dir/sub/d', 'e', 'f/g'];
  for (const k of keys) {
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: k, Body: Buffer.from(k) }));
  }
  const top = await s3.send(new ListObjectsV2Command({ Bucket: bucket, Delimiter: '/' }));
  expectEqual((top.Contents || []).map((o) => o.Key), ['e'], 'top-level keys');
  expectEqual((top.CommonPrefixes || []).map((p) => p.Prefix), ['dir/', 'f/'], 'top-level prefixes');
  const dir = await s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: 'dir/', Delimiter: '/' }));
  expectEqual((dir.Contents || []).map((o) => o.Key),
    ['dir/a', 'dir/b', 'dir/small.bin', 'dir/stream.bin'], 'dir/ keys');
  expectEqual((dir.CommonPrefixes || []).map((p) => p.Prefix), ['dir/sub/'], 'dir/ prefixes');
  const all = [];
  let token;
  let pages = 0;
  do {
    const page = await s3.send(new ListObjectsV2Command({ Bucket: bucket, MaxKeys: 3,
      ContinuationToken: token }));
    all.push(...(page.Contents || []).map((o) => o.Key));
    token = page.IsTruncated ? page.NextContinuationToken : undefined;
    pages++;
  } while (token && pages < 20);
  expectEqual(all, [...keys, 'dir/small.bin', 'dir/stream.bin'].sort(), 'all keys in pages of 3');
  expectEqual(pages, 3, 'pages');
});

test('multipart upload with CRC32 parts', async () => {
  const part1 = crypto.randomBytes(5 * 1024 * 1024);
  const part2 = crypto.randomBytes(1024 * 1024 + 3);
  const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket: bucket,
    Key: 'mp.bin', ChecksumAlgorithm: 'CRC32' }));
  const parts = [];
  for (const [n, body] of [[1, part1], [2, part2]]) {
    const r = await s3.send(new UploadPartCommand({ Bucket: bucket, Key: 'mp.bin', UploadId,
      PartNumber: n, Body: body, ChecksumAlgorithm: 'CRC32' }));
    parts.push({ PartNumber: n, ETag: r.ETag, ChecksumCRC32: r.ChecksumCRC32 });
  }
  await s3.send(new CompleteMultipartUploadCommand({ Bucket: bucket, Key: 'mp.bin', UploadId,
    MultipartUpload: { Parts: parts } }));
  const got = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'mp.bin' }));
  const body = Buffer.from(await got.Body.transformToByteArray());
  expectEqual(body.equals(Buffer.concat([part1, part2])), true, 'bytes equal');
  const md5s = crypto.createHash('md5').update(Buffer.concat([
    crypto.createHash('md5').update(part1).digest(),
    crypto.createHash('md5').update(part2).digest()])).digest('hex');
  expectEqual(got.ETag, `"${md5s}-2"`, 'multipart ETag');
});

test('DeleteObjects, then DeleteBucket', async () => {
  const list = await s3.send(new ListObjectsV2Command({ Bucket: bucket }));
  const keys = list.Contents.map((o) => o.Key);
  const r = await s3.send(new DeleteObjectsCommand({ Bucket: bucket,
    Delete: { Objects: keys.map((Key) => ({ Key })) } }));
  expectEqual((r.Deleted || []).map((d) => d.Key).sort(), [...keys].sort(), 'Deleted');
  expectEqual(r.Errors || [], [], 'Errors');
  const after = await s3.send(new ListObjectsV2Command({ Bucket: bucket }));
  expectEqual(after.KeyCount, 0, 'KeyCount after delete');
  await s3.send(new DeleteBucketCommand({ Bucket: bucket }));
});

await run();
