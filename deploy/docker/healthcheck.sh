#!/bin/bash
# The image's HEALTHCHECK: GET /healthz on the node's HTTP address (IDEM_HTTP_ADDR, default
# 0.0.0.0:7480, asked over loopback when it is a wildcard); healthy on "HTTP/1.x 200". Plain
# bash (/dev/tcp), so the image needs no HTTP client.
set -eu
addr="${IDEM_HTTP_ADDR:-0.0.0.0:7480}"
host="${addr%:*}"
port="${addr##*:}"
case "$host" in
    0.0.0.0 | "" | "[::]") host=127.0.0.1 ;;
esac
exec 3<>"/dev/tcp/${host}/${port}"
printf 'GET /healthz HTTP/1.0\r\nHost: localhost\r\n\r\n' >&3
IFS= read -r -t 2 status <&3
case "$status" in
    "HTTP/1."?" 200"*) exit 0 ;;
    *) echo "healthz: ${status:-no answer}"; exit 1 ;;
esac
