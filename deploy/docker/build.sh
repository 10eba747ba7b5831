#!/usr/bin/env bash
# Builds the idem image (deploy/docker/Dockerfile) and tags it idem:<version> and idem:latest.
#
#   deploy/docker/build.sh [--ref REF | --worktree] [-- extra docker build arguments]
#
# Source: a commit (HEAD, or --ref REF: a tag, branch or commit), exported with `git archive`,
# so the image is exactly that commit whatever is being edited in the checkout; --worktree
# builds the working tree as it is (tracked and untracked files that git does not ignore).
# The recipe (this directory: Dockerfile, healthcheck.sh) always comes from this checkout,
# so an older commit (a previous release, for an upgrade test) builds with today's recipe.
#
# Bases: RUST_IMAGE (builder, default rust:1.95-slim-bookworm) and BASE_IMAGE (runtime,
# default debian:bookworm-slim). When the default of one is not in the local engine and no
# registry is reachable, the script makes a local equivalent with mmdebstrap and
# `docker import` (installing mmdebstrap from Debian when missing):
#   idem-base/debian:bookworm-slim   Debian bookworm, the apt variant, with ca-certificates
#   idem-base/rust:1.95-bookworm     the same plus the build packages (g++, pkg-config,
#                                    librocksdb-dev, libclang-dev) and this machine's Rust
#                                    toolchain (`rustc --print sysroot`, without its docs)
# Crates: when cargo is on this machine, `cargo vendor` puts the locked crates into the
# context and the build reads them from there (no crates.io access during `docker build`,
# whose containers may not trust this machine's certificate authorities); IDEM_VENDOR=0
# lets the builder fetch them itself.
# Set RUST_IMAGE / BASE_IMAGE to use other bases (e.g. the public images where they can be
# pulled). The compile runs at nice 19 (BUILD_NICE to change it).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
SECURITY="${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}"
LOCAL_BASE=idem-base/debian:bookworm-slim
LOCAL_RUST=idem-base/rust:1.95-bookworm

worktree=0
ref=HEAD
extra=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --worktree) worktree=1 ;;
        --ref) ref="${2:?--ref needs a commit}"; shift ;;
        --) shift; extra=("$@"); break ;;
        -h | --help) sed -n '2,27p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "build.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done

say() { echo "build.sh: $*" >&2; }

have_image() { docker image inspect "$1" >/dev/null 2>&1; }

# Pulls $1 if a registry answers; true when the image is then present.
try_pull() {
    timeout 60 docker pull -q "$1" >/dev/null 2>&1 && have_image "$1"
}

need_mmdebstrap() {
    command -v mmdebstrap >/dev/null && return
    say "installing mmdebstrap (Debian package)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq --no-install-recommends mmdebstrap >/dev/null
}

# mmdebstrap bookworm (variant apt: Essential + apt, what the slim images hold) into
# `docker import`, with the mirror, updates and security suites as sources.
debootstrap_import() {
    local tag="$1" include="$2"; shift 2
    need_mmdebstrap
    say "making $tag with mmdebstrap (a few minutes)"
    nice -n 19 mmdebstrap --quiet --variant=apt --include="$include" \
        --aptopt='APT::Install-Recommends "false"' \
        --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin' \
        "$@" bookworm - \
        "deb $MIRROR bookworm main" \
        "deb $MIRROR bookworm-updates main" \
        "deb $SECURITY bookworm-security main" |
        docker import --change 'CMD ["/bin/bash"]' \
            --change 'ENV PATH=/usr/local/rust/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
            - "$tag" >/dev/null
}

base_image() {
    if [[ -n "${BASE_IMAGE:-}" ]]; then echo "$BASE_IMAGE"; return; fi
    if have_image debian:bookworm-slim || try_pull debian:bookworm-slim; then
        echo debian:bookworm-slim
        return
    fi
    have_image "$LOCAL_BASE" || debootstrap_import "$LOCAL_BASE" ca-certificates
    echo "$LOCAL_BASE"
}

rust_image() {
    if [[ -n "${RUST_IMAGE:-}" ]]; then echo "$RUST_IMAGE"; return; fi
    if have_image rust:1.95-slim-bookworm || try_pull rust:1.95-slim-bookworm; then
        echo rust:1.95-slim-bookworm
        return
    fi
    if ! have_image "$LOCAL_RUST"; then
        local sysroot
        sysroot="$(rustc --print sysroot)"
        [[ "$(rustc --version)" == "rustc 1.95."* ]] || {
            say "the local builder base needs this machine's Rust 1.95 (found $(rustc --version))"
            exit 1
        }
        debootstrap_import "$LOCAL_RUST" \
            ca-certificates,g++,make,pkg-config,binutils,librocksdb-dev,libclang-dev \
            --customize-hook="mkdir -p \"\$1/usr/local/rust\" && cp -a $sysroot/bin $sysroot/lib $sysroot/libexec \"\$1/usr/local/rust/\""
    fi
    echo "$LOCAL_RUST"
}

version="$(git -C "$ROOT" show "$ref:Cargo.toml" | sed -n 's/^version = "\(.*\)"/\1/p' | head -1)"
[[ -n "$version" ]] || { say "no version in Cargo.toml"; exit 1; }

base="$(base_image)"
rust="$(rust_image)"

context="$(mktemp -d)"
trap 'rm -rf "$context"' EXIT
if [[ "$worktree" == 1 ]]; then
    say "context: the working tree"
    git -C "$ROOT" ls-files -z --cached --others --exclude-standard |
        (cd "$ROOT" && xargs -0 tar --ignore-failed-read -cf - 2>/dev/null) | tar -xf - -C "$context"
else
    say "context: $ref ($(git -C "$ROOT" rev-parse --short "$ref^{commit}"))"
    git -C "$ROOT" archive --format=tar "$ref" | tar -xf - -C "$context"
    rm -rf "$context/deploy/docker"
    mkdir -p "$context/deploy"
    cp -r "$ROOT/deploy/docker" "$context/deploy/docker"
fi

if [[ "${IDEM_VENDOR:-1}" == 1 ]] && command -v cargo >/dev/null; then
    say "vendoring the locked crates"
    mkdir -p "$context/.cargo"
    (cd "$context" && cargo vendor --locked --quiet vendor >/dev/null)
    printf '\n[source.crates-io]\nreplace-with = "vendored-sources"\n\n[source.vendored-sources]\ndirectory = "vendor"\n' \
        >>"$context/.cargo/config.toml"
fi

say "building idem:$version (builder $rust, runtime $base)"
start=$SECONDS
docker build \
    --build-arg "RUST_IMAGE=$rust" \
    --build-arg "BASE_IMAGE=$base" \
    --build-arg "BUILD_NICE=${BUILD_NICE:-19}" \
    --build-arg "VERSION=$version" \
    -f "$context/deploy/docker/Dockerfile" \
    -t "idem:$version" -t idem:latest \
    "${extra[@]}" "$context"
say "built idem:$version in $((SECONDS - start))s: $(docker image inspect -f '{{.Size}}' "idem:$version" | awk '{printf "%.0f MB", $1/1e6}')"
