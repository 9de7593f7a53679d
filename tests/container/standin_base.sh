#!/usr/bin/env bash
# Offline fallback only: build a local stand-in for the Dockerfile's base image (python:3.11-slim)
# from Debian packages, for machines that run Docker but cannot reach an image registry.
# A machine that can pull images never runs this (.ci/run calls it only when the pull fails).
#
#   DOCKER_HOST=unix:///path/docker.sock tests/container/standin_base.sh [TAG] [ROOTFS_DIR]
#
# The stand-in is `debootstrap --variant=minbase bookworm` + Debian's python3 (3.11), pip and venv,
# with /usr/local/bin/python{,3} and pip{,3} links as the official image has, and the PEP 668
# marker removed. It inherits the host's package configuration (apt sources, pip configuration,
# CA bundle) so that apt-get and pip inside `docker build` reach the mirrors the host reaches.
# Needs root, debootstrap and a running dockerd; a few minutes (debootstrap fetches ~100 MB).
set -euo pipefail
TAG=${1:-python:3.11-slim}
R=${2:-${TMPDIR:-/tmp}/evalgate-standin-rootfs}
# The host's Debian mirror, as its apt sources name it (deb822 or one-line format).
MIRROR=$(grep -hoE '^URIs: *[^ ]+' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' | head -1 || true)
[ -n "$MIRROR" ] || MIRROR=$(grep -hoE '^deb +[^ ]+' /etc/apt/sources.list 2>/dev/null | awk '{print $2}' | head -1 || true)
[ -n "$MIRROR" ] || { echo "standin_base: no Debian mirror in the host's apt sources" >&2; exit 2; }

[ -x "$R/usr/bin/apt-get" ] || debootstrap --variant=minbase bookworm "$R" "$MIRROR"

rm -f "$R/etc/apt/sources.list"
mkdir -p "$R/etc/apt/sources.list.d" "$R/etc/apt/apt.conf.d" "$R/usr/local/share/ca-certificates"
cp /etc/apt/sources.list.d/*.sources "$R/etc/apt/sources.list.d/" 2>/dev/null || true
[ ! -f /etc/apt/sources.list ] || cp /etc/apt/sources.list "$R/etc/apt/sources.list"
cp /etc/apt/apt.conf.d/* "$R/etc/apt/apt.conf.d/" 2>/dev/null || true
[ ! -f /etc/pip.conf ] || cp /etc/pip.conf "$R/etc/pip.conf"
cp /usr/local/share/ca-certificates/*.crt "$R/usr/local/share/ca-certificates/" 2>/dev/null || true
cp /etc/resolv.conf "$R/etc/resolv.conf"

mount --bind /proc "$R/proc"
trap 'umount "$R/proc" 2>/dev/null || true' EXIT
chroot "$R" /bin/sh -ec '
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends python3 python3-pip python3-venv ca-certificates >/dev/null
  update-ca-certificates >/dev/null
  rm -f /usr/lib/python3*/EXTERNALLY-MANAGED
  for t in python python3; do ln -sf /usr/bin/python3 /usr/local/bin/$t; done
  for t in pip pip3; do ln -sf /usr/bin/pip3 /usr/local/bin/$t; done
  apt-get clean; rm -rf /var/lib/apt/lists/*
'
umount "$R/proc"; trap - EXIT
: > "$R/etc/resolv.conf"   # docker provides its own

# pip settings the host takes from its environment (mirror, CA), carried as image ENV.
envs=()
for v in $(env | grep -oE '^PIP_[A-Z_]+' || true); do envs+=(-c "ENV $v=${!v}"); done
tar -C "$R" -c . | docker import \
  -c 'ENV PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin' -c 'ENV LANG=C.UTF-8' \
  -c 'ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt' \
  "${envs[@]}" -c 'CMD ["python3"]' - "$TAG" >/dev/null
docker image inspect "$TAG" --format "stand-in $TAG: {{.Id}} {{.Size}} bytes"
