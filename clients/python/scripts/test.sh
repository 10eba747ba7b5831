#!/usr/bin/env bash
# Builds and installs the package into the virtual environment (stubs generated from proto/ by
# the build), checks format and lint (ruff) and types (mypy --strict), then runs the pytest
# suite against real idemd processes.
#   IDEM_VENV   the environment (default /var/cache/idem-venv; scripts/venv.sh makes it)
#   IDEMD       the idemd binary (default $CARGO_TARGET_DIR/release/idemd)
# Extra arguments go to pytest. Exits with pytest's status (no test collected is a failure).
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
venv="${IDEM_VENV:-/var/cache/idem-venv}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/cache/idem-target}"

"$venv/bin/pip" install -q --disable-pip-version-check --no-deps --no-build-isolation --force-reinstall "$here" \
  >"$here/build.log" 2>&1 || { cat "$here/build.log" >&2; exit 1; }
cd "$here"
"$venv/bin/ruff" format --check --quiet .
"$venv/bin/ruff" check --quiet .
"$venv/bin/python" -m mypy --config-file pyproject.toml -p idem_client
exec "$venv/bin/python" -m pytest -q -p no:cacheprovider "$@"
