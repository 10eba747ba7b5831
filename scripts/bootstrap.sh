#!/usr/bin/env bash
# Installs the system packages idem needs to build and test, when they are missing.
#
#   librocksdb-dev   RocksDB, linked instead of compiling its C++ (see .cargo/config.toml)
#   libclang-dev     bindgen, for the RocksDB binding
#   iproute2 iptables libfaketime   the jepsen harness (namespaces, partitions, clock skew)
#   fonts-dejavu-core               labels in the jepsen plots
#   fuse3            fusermount3, for idem-faultfs (FUSE without libfuse headers; /dev/fuse too)
#   etcd-server etcd-client postgresql   only with --bench: the stores `make bench` compares
#                                        against (3-member etcd, a single PostgreSQL server)
#   --python                        the Python client's virtual environment (clients/python/scripts/venv.sh)
#   --deploy         mmdebstrap docker-compose systemd python3-venv openssl prometheus: the image's
#                    local bases, the compose test and the offline checks of deploy/ (make image,
#                    compose-test, deploy-check: promtool for the alert rules; kubectl comes
#                    with the machine)
#
# Idempotent and quiet when everything is present. Needs root (or sudo) to install.
set -euo pipefail

if [[ "${1:-}" == --python ]]; then
  # The Python client (clients/python): the system packages, then its virtual environment.
  "$0"
  exec "$(dirname "$0")/../clients/python/scripts/venv.sh"
fi

packages=(librocksdb-dev libclang-dev iproute2 iptables libfaketime fonts-dejavu-core fuse3)
if [[ "${1:-}" == --bench ]]; then
  packages+=(etcd-server etcd-client postgresql)
fi
if [[ "${1:-}" == --deploy ]]; then
  packages=(mmdebstrap docker-compose systemd python3-venv openssl prometheus)
fi

missing=()
for pkg in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "bootstrap: installing ${missing[*]}" >&2
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null; then
    sudo="sudo"
  else
    echo "bootstrap: missing packages (${missing[*]}); run this script as root" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
