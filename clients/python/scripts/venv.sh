#!/usr/bin/env bash
# Creates (or updates) the Python environment of clients/python: a virtual environment at
# $IDEM_VENV (default /var/cache/idem-venv) with requirements-dev.txt installed. Idempotent and
# quiet when the environment matches the requirements (a stamp holds their hash).
# Called by `scripts/bootstrap.sh --python`; needs python3 >= 3.11 with venv.
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
venv="${IDEM_VENV:-/var/cache/idem-venv}"
requirements="$here/requirements-dev.txt"
stamp="$venv/.idem-requirements.sha256"
want="$(sha256sum "$requirements" | cut -d' ' -f1)"

if [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  exit 0
fi

python="${PYTHON:-python3}"
if ! "$python" -c 'import sys; assert sys.version_info >= (3, 11)' 2>/dev/null; then
  echo "venv: $python is missing or older than 3.11" >&2
  exit 1
fi
if ! "$python" -m venv --help >/dev/null 2>&1 || ! "$python" -c 'import ensurepip' 2>/dev/null; then
  echo "venv: installing python3-venv" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
fi
echo "venv: preparing $venv" >&2
[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check -r "$requirements"
echo "$want" >"$stamp"
