# SPDX-License-Identifier: Apache-2.0
# Debian package helpers shared by deploy/run.sh (README command 1) and
# tests/run.sh (README command 2). Sourced, never executed: it installs only
# the packages that are missing, with apt-get as root or through sudo, so a
# machine that already has everything never touches the network.

# Build dependencies of metagate (CMakeLists.txt: pkg-config modules,
# RocksDB, cmocka for the unit tests).
MG_BUILD_PKGS="build-essential cmake pkg-config libh2o-dev libuv1-dev
 librocksdb-dev libraft-dev libyajl-dev libexpat1-dev libisal-dev libssl-dev
 libcmocka-dev"

# What the test suite needs on top: the stock S3 clients, curl and openssl
# for presigned URLs and TLS, wrk and gnuplot for tests/bench, libfuse3-dev
# and fuse3 (fusermount3) for tests/fault/powercut, the FUSE file system of
# the power-cut suite.
MG_TEST_PKGS="awscli s3cmd python3 python3-boto3 curl openssl ca-certificates
 gnuplot-nox wrk libfuse3-dev fuse3"

# data.backend "rados" (issue 10): librados-dev to build engine/rados.c (without
# it the build leaves the backend out and data.backend "rados" is refused), and a
# throwaway one-monitor, one-OSD Ceph for the rados tests and deploy/cluster-up
# (deploy/ceph-up): ceph-mon, ceph-osd, ceph-base (monmaptool) and ceph-common
# (ceph, rados, ceph-authtool). No mgr and no RGW: ceph-up runs neither.
MG_CLUSTER_PKGS="librados-dev ceph-mon ceph-osd ceph-base ceph-common"

# The libFuzzer stage of tests/run.sh: clang 14 (Debian 12's clang), its
# compiler-rt (libclang_rt.fuzzer*.a and the ASan/UBSan runtimes live in
# libclang-rt-14-dev, which clang-14 only recommends, so --no-install-recommends
# leaves it out) and llvm-14 for llvm-symbolizer (readable sanitizer stacks).
MG_FUZZ_PKGS="clang-14 libclang-rt-14-dev llvm-14"

# mg_missing_pkgs PKG...: prints the packages of the list that dpkg does not
# have installed (nothing when all are present).
mg_missing_pkgs() {
    local p missing=""
    for p in "$@"; do
        if ! dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null |
            grep -q '^install ok installed$'; then
            missing="$missing $p"
        fi
    done
    echo "$missing"
}

# mg_apt_install PKG...: installs the missing ones with
# apt-get install -y --no-install-recommends; returns non-zero when that is
# impossible (not root and no sudo) or apt-get fails.
mg_apt_install() {
    local missing sudo=""
    # shellcheck disable=SC2086,SC2048
    missing=$(mg_missing_pkgs $*)
    if [ -z "${missing// /}" ]; then
        return 0
    fi
    if [ "$(id -u)" != 0 ]; then
        if command -v sudo >/dev/null 2>&1; then
            sudo="sudo"
        else
            echo "metagate: missing Debian packages:$missing (run as root or install sudo)" >&2
            return 1
        fi
    fi
    echo "metagate: installing Debian packages:$missing"
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq || return 1
    # shellcheck disable=SC2086
    $sudo env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -qq --no-install-recommends $missing || return 1
}

# mg_node_pkgs: prints the Debian packages needed for node and npm, or
# nothing when both commands exist already (e.g. a NodeSource nodejs that
# bundles npm: Debian's npm package would conflict with it).
mg_node_pkgs() {
    if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then
        return 0
    fi
    if command -v node >/dev/null 2>&1; then
        echo "npm"
    else
        echo "nodejs npm"
    fi
}

# mg_build TYPE DIR: configures and builds metagate into DIR (Release, Asan
# or Debug) with two jobs, the size of the reference machine.
mg_build() {
    cmake -S . -B "$2" -DCMAKE_BUILD_TYPE="$1" &&
        cmake --build "$2" -j "${MG_JOBS:-2}"
}

# mg_fuzz_cc: prints the clang to build the libFuzzer targets with (MG_FUZZ_CC,
# else clang-14, else clang), or nothing when there is none.
mg_fuzz_cc() {
    local cc
    for cc in ${MG_FUZZ_CC:-} clang-14 clang; do
        if command -v "$cc" >/dev/null 2>&1; then
            echo "$cc"
            return 0
        fi
    done
}

# mg_build_fuzz DIR: configures DIR with clang and -DMG_FUZZ=ON (no unit
# tests) and builds target "fuzzers", every libFuzzer binary of tests/fuzz
# (listed in DIR/tests/fuzz/fuzzers.txt).
mg_build_fuzz() {
    local cc
    cc=$(mg_fuzz_cc)
    if [ -z "$cc" ]; then
        echo "metagate: no clang for the libFuzzer build (Debian: $MG_FUZZ_PKGS)" >&2
        return 1
    fi
    CC="$cc" cmake -S . -B "$1" -DCMAKE_BUILD_TYPE=Release -DMG_FUZZ=ON -DMG_TESTS=OFF &&
        cmake --build "$1" --target fuzzers -j "${MG_JOBS:-2}"
}
