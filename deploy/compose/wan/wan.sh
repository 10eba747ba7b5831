#!/bin/bash
# Entry point of a node's network holder (see Dockerfile): sends this node's TCP connections
# to nodes of other regions through wan-proxy.pl, which delays each chunk by half the
# region pair's round-trip time in each direction. The kernel of the machine this was built
# on has no netem (tc qdisc ... netem fails), so this is the jepsen harness's fallback: only
# node-to-node TCP on the listed ports is delayed, and a node in another region sees
# connections coming from this node's address as usual (the proxy runs in its namespace).
#
# Environment:
#   WAN_NODE   this node's id
#   WAN_NODES  id=region pairs, e.g. "1=eu 2=eu 3=us 4=us 5=ap"
#   WAN_RTT    region-pair round trips in ms, e.g. "eu-us=20 eu-ap=40 us-ap=60" (0 if absent)
#   WAN_NET    the network's first three octets; node N has address WAN_NET.(10+N)
#   WAN_PORTS  ports to delay (default "7400 7410 7480": API, Raft, HTTP)
#
# Connections are redirected with iptables (nat OUTPUT, REDIRECT) to a local port per
# destination, 20000 + 100 × node + (port − 7400); the proxy runs as uid 65534, whose own
# connections the rules skip.
set -euo pipefail

: "${WAN_NODE:?}" "${WAN_NODES:?}" "${WAN_NET:?}"
WAN_RTT="${WAN_RTT:-}"
WAN_PORTS="${WAN_PORTS:-7400 7410 7480}"
PROXY_UID=65534

declare -A region
for entry in $WAN_NODES; do
    region[${entry%%=*}]="${entry#*=}"
done
me="${region[$WAN_NODE]:?WAN_NODE $WAN_NODE is not in WAN_NODES}"

rtt_between() {
    local entry
    for entry in $WAN_RTT; do
        case "${entry%%=*}" in
            "$1-$2" | "$2-$1") echo "${entry#*=}"; return ;;
        esac
    done
    echo 0
}

routes=()
for id in "${!region[@]}"; do
    there="${region[$id]}"
    [[ "$there" == "$me" ]] && continue
    rtt="$(rtt_between "$me" "$there")"
    [[ "$rtt" == 0 ]] && continue
    for port in $WAN_PORTS; do
        listen=$((20000 + 100 * id + port - 7400))
        iptables -w -t nat -A OUTPUT -p tcp -d "$WAN_NET.$((10 + id))" --dport "$port" \
            -m owner ! --uid-owner "$PROXY_UID" -j REDIRECT --to-ports "$listen"
        routes+=("$listen=$WAN_NET.$((10 + id)):$port:$rtt")
    done
    echo "wan: node $WAN_NODE ($me) -> node $id ($there): +${rtt}ms round trip" >&2
done

exec setpriv --reuid="$PROXY_UID" --regid="$PROXY_UID" --clear-groups \
    perl /usr/local/bin/wan-proxy.pl "${routes[@]}"
