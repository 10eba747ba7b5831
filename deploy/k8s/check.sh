#!/usr/bin/env bash
# Offline checks of the Kubernetes manifests (part of make deploy-check). No cluster is
# reachable here: the manifests are rendered and validated, not run.
#
#   1. renders each overlay (three, five, multi-region) with `kubectl kustomize` (kustomize
#      built into kubectl);
#   2. validates every rendered object against the Kubernetes OpenAPI schemas, strictly
#      (unknown fields are errors), for Kubernetes 1.31 (the first with StatefulSet
#      `ordinals` GA, used by multi-region) and 1.37, with kubernetes-validate (PyPI, in a
#      virtual environment under $IDEM_DEPLOY_VENV, default /var/cache/idem-deploy-venv);
#   3. check.py: per-pod Services, unique node ids, one bootstrapper, regions, PDB, script.
#
# Prints "N passed, M failed" at the end; exits 1 if anything failed.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="${IDEM_DEPLOY_VENV:-$([[ -w /var/cache ]] && echo /var/cache/idem-deploy-venv || echo "$HERE/../../target/deploy-venv")}"
VERSIONS=(1.31.0 1.37.0)
# overlay  voters  regions
OVERLAYS=("three 3 local:3" "five 5 local:5" "multi-region 5 eu:2,us:2,ap:1")

command -v kubectl >/dev/null || { echo "k8s: kubectl (for kubectl kustomize) is missing" >&2; exit 2; }
if [[ ! -x "$VENV/bin/kubernetes-validate" ]]; then
    echo "k8s: installing kubernetes-validate into $VENV" >&2
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q 'kubernetes-validate==1.37.0' 'PyYAML>=6'
fi

out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
passed=0 failed=0
result() {
    if [[ "$1" == 0 ]]; then
        passed=$((passed + 1)); echo "k8s: ok: $2"
    else
        failed=$((failed + 1)); echo "k8s: FAILED: $2"
    fi
}

for entry in "${OVERLAYS[@]}"; do
    read -r overlay voters regions <<<"$entry"
    rendered="$out/$overlay.yaml"
    if ! kubectl kustomize "$HERE/overlays/$overlay" >"$rendered" 2>"$out/err"; then
        cat "$out/err"
        result 1 "$overlay: kubectl kustomize"
        continue
    fi
    objects="$(grep -c '^kind:' "$rendered")"
    for version in "${VERSIONS[@]}"; do
        status=0
        "$VENV/bin/kubernetes-validate" --strict --quiet -k "$version" "$rendered" || status=$?
        result "$status" "$overlay: $objects objects valid against the Kubernetes $version schemas (strict)"
    done
    status=0
    "$VENV/bin/python" "$HERE/check.py" "$rendered" "$voters" "$regions" || status=$?
    result "$status" "$overlay: $voters nodes ($regions), per-pod Services, ids, PDB, start script"
done
echo "$passed passed, $failed failed"
[[ "$failed" == 0 ]]
