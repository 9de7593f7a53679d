#!/usr/bin/env bash
# Start a private Docker daemon for the container test (CI machines without one running).
# Prints the DOCKER_HOST to use; exits non-zero with the reason when no daemon can start.
# No iptables and no bridge: the test runs every container with --network host (or none).
#
#   tests/container/dockerd.sh STATE_DIR
set -euo pipefail
S=${1:?state dir}
sock="unix://$S/docker.sock"
if DOCKER_HOST=$sock docker info >/dev/null 2>&1; then echo "$sock"; exit 0; fi
[ "$(id -u)" = 0 ] || { echo "dockerd needs root (uid $(id -u))" >&2; exit 1; }
command -v dockerd >/dev/null || { echo "dockerd is not installed (apt-get install docker.io)" >&2; exit 1; }
mkdir -p "$S"
# setsid: the daemon outlives this script (and the CI step's process group) by design;
# it is stopped by its pid file.
setsid dockerd --iptables=false --ip6tables=false --bridge=none \
  --data-root "$S/data" --exec-root "$S/exec" --pidfile "$S/dockerd.pid" \
  --host "$sock" >"$S/dockerd.log" 2>&1 </dev/null &
for _ in $(seq 1 120); do
  if DOCKER_HOST=$sock docker info >/dev/null 2>&1; then echo "$sock"; exit 0; fi
  kill -0 $! 2>/dev/null || break
  sleep 0.5
done
echo "dockerd did not start: $(tail -3 "$S/dockerd.log" | tr '\n' ' ')" >&2
exit 1
