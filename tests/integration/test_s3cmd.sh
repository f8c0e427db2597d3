#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# mg: server=default timeout=900
# s3cmd 2.3 (Debian) against metagate, path-style (host_bucket without
# %(bucket)s), once with SigV4 and once with SigV2 header auth: mb, put (1 KiB
# and 20 MiB = two 15 MiB-chunk multipart parts), ls, get, sync up and down,
# del and rb. Sizes, names and bytes are compared exactly.
set -u
. "$(dirname "$0")/mgtest.sh"

if ! command -v s3cmd >/dev/null; then
    skip s3cmd "no s3cmd (Debian s3cmd)"
    exit 0
fi

T=$MG_TMP
rand_file "$T/small.bin" 1024
rand_file "$T/big.bin" $((20 * 1024 * 1024 + 7))

new_tree() {
    rm -rf "$T/tree" && mkdir -p "$T/tree/sub/deeper"
    rand_file "$T/tree/a.txt" 100
    rand_file "$T/tree/sub/b.txt" 2000
    rand_file "$T/tree/sub/deeper/c.bin" 300000
}

write_cfg() { # FILE V2(True|False)
    cat >"$1" <<CFG
[default]
access_key = $MG_ACCESS_KEY
secret_key = $MG_SECRET_KEY
host_base = $MG_HOST:$MG_PORT
host_bucket = $MG_HOST:$MG_PORT
bucket_location = $MG_REGION
use_https = False
signature_v2 = $2
check_ssl_certificate = False
enable_multipart = True
multipart_chunk_size_mb = 15
progress_meter = False
CFG
}

# ls_rows URL [-r]: "SIZE URL" per object line of s3cmd ls, DIR lines as "DIR URL".
ls_rows() {
    s3c ls "$@" | awk '$1 == "DIR" {print "DIR", $2; next} NF >= 4 {print $3, $4}'
}

s3c() { s3cmd --config "$CFG" "$@"; }

t_mb() {
    s3c mb "s3://$B" && s3c ls | grep -q " s3://$B\$"
}
t_put() {
    s3c put "$T/small.bin" "s3://$B/dir/small.bin" &&
        s3c put "$T/big.bin" "s3://$B/big.bin" &&
        expect_eq "ls" "$(printf '%s\n' "DIR s3://$B/dir/" "20971527 s3://$B/big.bin" | sort)" \
            "$(ls_rows "s3://$B/" | sort)" &&
        expect_eq "ls dir" "1024 s3://$B/dir/small.bin" "$(ls_rows "s3://$B/dir/")"
}
t_get() {
    rm -f "$T/small.out" "$T/big.out"
    s3c get "s3://$B/dir/small.bin" "$T/small.out" &&
        s3c get "s3://$B/big.bin" "$T/big.out" &&
        cmp "$T/small.bin" "$T/small.out" && cmp "$T/big.bin" "$T/big.out"
}
t_sync() {
    rm -rf "$T/down"
    s3c sync "$T/tree/" "s3://$B/tree/" &&
        expect_eq "ls -r" "$(printf '%s\n' "100 s3://$B/tree/a.txt" "2000 s3://$B/tree/sub/b.txt" \
            "300000 s3://$B/tree/sub/deeper/c.bin")" "$(ls_rows -r "s3://$B/tree/")" &&
        rand_file "$T/tree/a.txt" 150 &&
        s3c sync "$T/tree/" "s3://$B/tree/" &&
        expect_eq "size after re-sync" "150 s3://$B/tree/a.txt" \
            "$(ls_rows "s3://$B/tree/a.txt")" &&
        mkdir -p "$T/down" && s3c sync "s3://$B/tree/" "$T/down/" &&
        diff -r "$T/tree" "$T/down"
}
t_del() {
    s3c del "s3://$B/dir/small.bin" &&
        expect_eq "ls after del" "" "$(ls_rows "s3://$B/dir/")" &&
        s3c del --recursive --force "s3://$B/" &&
        expect_eq "ls after del -r" "" "$(ls_rows -r "s3://$B/")" &&
        s3c rb "s3://$B" &&
        ! s3c ls | grep -q " s3://$B\$"
}

for sig in V4 V2; do
    CFG="$T/s3cfg-$sig"
    B="s3cmd-$(echo "$sig" | tr 'A-Z' 'a-z')-$(head -c 6 /dev/urandom | od -An -tx1 | tr -d ' \n')"
    new_tree
    if [ "$sig" = V2 ]; then write_cfg "$CFG" True; else write_cfg "$CFG" False; fi
    check "s3cmd[$sig] mb" t_mb
    check "s3cmd[$sig] put 1 KiB + 20 MiB multipart, ls" t_put
    check "s3cmd[$sig] get" t_get
    check "s3cmd[$sig] sync up, re-sync, sync down" t_sync
    check "s3cmd[$sig] del, del --recursive, rb" t_del
done
finish
