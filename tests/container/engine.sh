#!/usr/bin/env bash
# A Docker Engine new enough for inspect_ai's docker sandbox (>= 24.0.6) and a `docker compose`
# v2 plugin, for the container test. Debian 12's docker.io is 20.10, which inspect refuses, so
# where the host's engine is older this unpacks Debian 13's engine (docker.io, docker-cli,
# containerd, docker-compose) into a cache folder, without installing anything: the packages are
# fetched with the host's own apt sources, their suite renamed, into a private apt state. The
# host's runc is kept (Debian 13's needs a newer glibc than Debian 12 has).
#
# Prints shell `export` lines (PATH, DOCKER_CONFIG for the compose plugin) to eval; prints
# nothing when the host's engine and compose plugin already do. Exits non-zero with the reason
# on stderr when neither works.
#
#   eval "$(tests/container/engine.sh [CACHE_DIR])"
set -euo pipefail
MIN=24.0.6
SUITE=trixie
C=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/evalgate/docker-engine-$SUITE}

new_enough() {  # VERSION -> true when >= MIN
  [ "$(printf '%s\n%s\n' "$MIN" "$1" | sort -V | head -1)" = "$MIN" ]
}
engine_version() {  # DOCKERD -> its version, e.g. 26.1.5
  "$1" --version 2>/dev/null | sed -nE 's/^Docker version ([0-9]+\.[0-9]+\.[0-9]+).*/\1/p'
}

if command -v dockerd >/dev/null 2>&1 && new_enough "$(engine_version dockerd)" \
  && docker compose version >/dev/null 2>&1; then
  exit 0
fi

R="$C/root"
if [ ! -x "$R/usr/sbin/dockerd" ]; then
  command -v apt-get >/dev/null && command -v dpkg >/dev/null \
    || { echo "engine.sh: needs apt-get and dpkg (a Debian host)" >&2; exit 1; }
  mkdir -p "$C/lists/partial" "$C/debs"
  # The host's first deb822 source stanza (its main archive), suite renamed: no mirror is named
  # here, the host's configuration decides where packages come from.
  src=$(ls /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1 || true)
  [ -n "$src" ] || { echo "engine.sh: no deb822 apt sources on this host" >&2; exit 1; }
  awk 'BEGIN { RS = ""; ORS = "\n\n" } NR == 1' "$src" \
    | sed -E "s/^Suites:.*/Suites: $SUITE/" >"$C/apt.sources"
  apt_opts=(-o "Dir::Etc::SourceList=$C/apt.sources" -o "Dir::Etc::SourceParts=/dev/null"
    -o "Dir::State::Lists=$C/lists" -o "Dir::Cache=$C/cache" -o "APT::Sandbox::User=root")
  mkdir -p "$C/cache/archives/partial"
  apt-get -qq "${apt_opts[@]}" update >&2
  (cd "$C/debs" && apt-get -qq "${apt_opts[@]}" download docker.io docker-cli containerd docker-compose >&2)
  rm -rf "$R.tmp" && mkdir -p "$R.tmp"
  for deb in "$C"/debs/*.deb; do dpkg -x "$deb" "$R.tmp"; done
  mv "$R.tmp" "$R"
fi

v=$(engine_version "$R/usr/sbin/dockerd")
new_enough "$v" || { echo "engine.sh: unpacked dockerd is ${v:-unusable}, need >= $MIN" >&2; exit 1; }
command -v runc >/dev/null || { echo "engine.sh: no runc on the host (apt-get install runc)" >&2; exit 1; }
mkdir -p "$C/config/cli-plugins"
ln -sf "$R/usr/libexec/docker/cli-plugins/docker-compose" "$C/config/cli-plugins/docker-compose"
echo "export PATH=\"$R/usr/bin:$R/usr/sbin:\$PATH\""
# The CLI finds plugins under its config folder; the compose plugin is linked there.
echo "export DOCKER_CONFIG=\"$C/config\""
