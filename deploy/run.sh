#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# README command 1: installs the Debian packages metagate needs, builds it
# (Release, build/), and runs it in the foreground on 127.0.0.1:9000 with its
# data in ./data. The first start writes ./data/metagate.json with a fresh
# key pair; later starts reuse it. Ctrl-C stops the server.
#
# Overrides: METAGATE_LISTEN=HOST:PORT, METAGATE_DATA=DIR,
# METAGATE_SKIP_BUILD=1 (use the existing build/metagate), METAGATE_BIN=PATH
# (run that binary, no build; the integration suite's deploy test uses it).
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=deploy/deps.sh
. deploy/deps.sh

listen="${METAGATE_LISTEN:-127.0.0.1:9000}"
data="${METAGATE_DATA:-./data}"
bin="${METAGATE_BIN:-build/metagate}"

if [ -z "${METAGATE_BIN:-}" ]; then
    # shellcheck disable=SC2086
    mg_apt_install $MG_BUILD_PKGS
    if [ "${METAGATE_SKIP_BUILD:-0}" != 1 ] || [ ! -x build/metagate ]; then
        mg_build Release build
    fi
fi

mkdir -p "$data"
data="$(cd "$data" && pwd)"
config="$data/metagate.json"
if [ ! -f "$config" ]; then
    # 20-character access key and 40-character secret, as AWS shapes them
    # (|| true: tr ends on SIGPIPE once head has enough, and pipefail is on).
    ak="MG$(LC_ALL=C tr -dc 'A-Z0-9' </dev/urandom | head -c 18 || true)"
    sk="$(LC_ALL=C tr -dc 'A-Za-z0-9' </dev/urandom | head -c 40 || true)"
    umask 077
    cat >"$config" <<JSON
{
  "listen": "$listen",
  "data_dir": "$data",
  "region": "us-east-1",
  "users": [{"name": "main", "access_key": "$ak", "secret_key": "$sk"}]
}
JSON
fi
ak=$(sed -n 's/.*"access_key": *"\([^"]*\)".*/\1/p' "$config" | head -n 1)
sk=$(sed -n 's/.*"secret_key": *"\([^"]*\)".*/\1/p' "$config" | head -n 1)
region=$(sed -n 's/.*"region": *"\([^"]*\)".*/\1/p' "$config" | head -n 1)

cat <<EOT
metagate
  endpoint:   http://$listen
  access key: $ak
  secret key: $sk
  region:     ${region:-us-east-1}
  data:       $data   (config: $config)
try it (path-style addressing):
  AWS_ACCESS_KEY_ID=$ak AWS_SECRET_ACCESS_KEY=$sk AWS_DEFAULT_REGION=${region:-us-east-1} \\
    aws --endpoint-url http://$listen s3 mb s3://demo
EOT

exec "$bin" serve --config "$config" --listen "$listen" --data "$data"
