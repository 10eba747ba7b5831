#!/usr/bin/env bash
# Certificates for the compose cluster's TLS (deploy/compose/docker-compose.yml), made with
# openssl and checked with it:
#
#   deploy/compose/certs.sh [DIR]       default deploy/compose/certs (ignored by git)
#
#   DIR/ca.crt, ca.key                   the cluster CA (EC P-256, 10 years)
#   DIR/nN/node.crt, node.key, ca.crt    node N: SAN IP WAN_NET.1N (IDEM_COMPOSE_NET, default
#                                        172.29.87) and DNS nN; serverAuth and clientAuth, for
#                                        the API port and the Raft port, where peers present it
#                                        as their client certificate (1 year)
#   DIR/operator/client.crt, client.key, ca.crt
#                                        a client certificate for idemctl (SAN DNS operator)
#   DIR/auth/credentials.toml            the credentials file of every node: the certificate
#                                        name "operator" is an administrator of every tenant;
#                                        add worker tokens with `idemctl auth token create
#                                        --credentials DIR/auth/credentials.toml ...`
#
# Each node mounts DIR/nN at /certs and DIR/auth at /auth (docker-compose.yml). Keys and the
# credentials file belong to uid 10001, the image's user, when run as root (mode 0600);
# otherwise they are made readable (0644) so the container can read them: keep such a
# directory private. An existing CA is reused, so node certificates can be renewed without
# touching the clients, and an existing credentials file is kept with its tokens.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
DIR="${1:-$HERE/certs}"
NET="${IDEM_COMPOSE_NET:-172.29.87}"
NODES=(1 2 3 4 5)
command -v openssl >/dev/null || { echo "certs.sh: openssl is missing" >&2; exit 2; }
mkdir -p "$DIR"
[[ -e "$DIR/.gitignore" ]] || echo '*' >"$DIR/.gitignore"

key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

if [[ ! -s "$DIR/ca.crt" || ! -s "$DIR/ca.key" ]]; then
    key "$DIR/ca.key"
    openssl req -x509 -new -key "$DIR/ca.key" -days 3650 -subj "/CN=idem compose CA" \
        -addext "basicConstraints=critical,CA:TRUE" \
        -addext "keyUsage=critical,keyCertSign,cRLSign" -out "$DIR/ca.crt"
fi

# issue DIR NAME SAN EKU: a key and a certificate signed by the CA.
issue() {
    local out="$1" name="$2" san="$3" eku="$4"
    mkdir -p "$out"
    key "$out/$name.key"
    openssl req -new -key "$out/$name.key" -subj "/CN=${san##*:}" -out "$out/$name.csr"
    openssl x509 -req -in "$out/$name.csr" -CA "$DIR/ca.crt" -CAkey "$DIR/ca.key" \
        -CAcreateserial -days 365 -out "$out/$name.crt" -extfile <(printf '%s\n' \
            "basicConstraints=critical,CA:FALSE" \
            "keyUsage=critical,digitalSignature" \
            "extendedKeyUsage=$eku" \
            "subjectAltName=$san") 2>/dev/null
    rm -f "$out/$name.csr"
    cp "$DIR/ca.crt" "$out/ca.crt"
    if [[ "$(id -u)" == 0 ]]; then
        chown 10001:10001 "$out/$name.key"
        chmod 0600 "$out/$name.key"
    else
        chmod 0644 "$out/$name.key"
    fi
}

for n in "${NODES[@]}"; do
    issue "$DIR/n$n" node "IP:$NET.$((10 + n)),DNS:n$n" serverAuth,clientAuth
done
issue "$DIR/operator" client "DNS:operator" clientAuth

# The credentials file, once: later runs keep the tokens added to it.
credentials="$DIR/auth/credentials.toml"
mkdir -p "$DIR/auth"
if [[ ! -s "$credentials" ]]; then
    printf '[[certificate]]\nname = "operator"\nrole = "admin"\ntenants = ["*"]\n' >"$credentials"
fi
if [[ "$(id -u)" == 0 ]]; then
    chown 10001:10001 "$credentials"
    chmod 0600 "$credentials"
else
    chmod 0644 "$credentials"
fi

# Check what was written: each certificate chains to the CA and names what it must.
check() {
    openssl verify -CAfile "$DIR/ca.crt" -purpose "$3" "$1" >/dev/null ||
        { echo "certs.sh: $1 does not verify as $3" >&2; exit 1; }
    openssl x509 -in "$1" -noout -ext subjectAltName | grep -q "$2" ||
        { echo "certs.sh: $1 lacks $2" >&2; exit 1; }
}
for n in "${NODES[@]}"; do
    check "$DIR/n$n/node.crt" "IP Address:$NET.$((10 + n))" sslserver
    check "$DIR/n$n/node.crt" "DNS:n$n" sslclient
done
check "$DIR/operator/client.crt" "DNS:operator" sslclient
grep -q '^name = "operator"' "$credentials" ||
    { echo "certs.sh: $credentials does not name the operator certificate" >&2; exit 1; }
echo "certs.sh: CA, ${#NODES[@]} node certificates, an operator certificate and the credentials file in $DIR (checked)"
