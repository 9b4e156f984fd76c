#!/usr/bin/env bash
# Builds two minimal Node 24 base images locally, for machines that cannot pull `node:24-bookworm-slim`
# and `gcr.io/distroless/nodejs24-debian12` (no registry reachable). The Dockerfile takes them through
# `--build-arg NODE_IMAGE=<build base> --build-arg RUNTIME_IMAGE=<runtime base>`.
#
# The runtime base is distroless-style: the Node binary (at /nodejs/bin/node, where the distroless
# image has it), the libraries it links, /etc/passwd and /etc/group, CA certificates and /tmp. No
# shell, no npm, no corepack, no coreutils.
#
# Both hold:
#   - the pinned Node binary (node_modules/.bin/node, resolved to the real file) at /nodejs/bin/node,
#     linked as /usr/local/bin/node
#   - the shared libraries it links (from `ldd`), at the paths the dynamic loader expects
#   - /etc/passwd and /etc/group with root, node (1000) and nobody, like the official image
#   - /tmp (1777), /root, CA certificates, a tiny nsswitch.conf
# The build base adds npm (from the host's global npm) plus /usr/bin/env for its shebang, so the build
# stage can run `npm ci` exactly as it does on the official image (build with `docker build --network host`).
# There is no shell: the Dockerfile uses exec-form RUN instructions so it works on both bases.
#
# Usage: scripts/make-base-image.sh [build-tag] [runtime-tag]
#        (defaults tollgate-node-base:24 and tollgate-node-runtime:24)
# Re-running is cheap: the image is rebuilt only when its inputs (node binary, npm, this script) change,
# so Docker's layer cache for the images built on top of it stays valid.
set -euo pipefail

TAG="${1:-tollgate-node-base:24}"
RUNTIME_TAG="${2:-tollgate-node-runtime:24}"
ROOT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DOCKER="${DOCKER:-docker}"

NODE_BIN="$(readlink -f "$ROOT_DIR/node_modules/.bin/node")"
if [ ! -x "$NODE_BIN" ]; then
  echo "make-base-image: no Node binary at node_modules/.bin/node (run npm ci first)" >&2
  exit 1
fi
NODE_MAJOR="$("$NODE_BIN" -p 'process.versions.node.split(".")[0]')"
if [ "$NODE_MAJOR" != "24" ]; then
  echo "make-base-image: node_modules/.bin/node is Node $NODE_MAJOR, expected 24" >&2
  exit 1
fi

# npm: the host's global installation (any npm >= 10 runs on Node 24).
NPM_DIR="${NPM_DIR:-}"
if [ -z "$NPM_DIR" ]; then
  for candidate in /usr/lib/node_modules/npm /usr/local/lib/node_modules/npm "$(dirname "$NODE_BIN")/../lib/node_modules/npm"; do
    if [ -f "$candidate/bin/npm-cli.js" ]; then NPM_DIR="$(readlink -f "$candidate")"; break; fi
  done
fi
if [ -z "$NPM_DIR" ] || [ ! -f "$NPM_DIR/bin/npm-cli.js" ]; then
  echo "make-base-image: npm not found (set NPM_DIR to an npm package directory)" >&2
  exit 1
fi
ENV_BIN="$(readlink -f /usr/bin/env)"

NPM_VERSION="$("$NODE_BIN" -p "require('$NPM_DIR/package.json').version")"
KEY="$( { sha256sum "$NODE_BIN" "$ENV_BIN" "${BASH_SOURCE[0]}" | cut -d' ' -f1; echo "$NPM_VERSION"; } | sha256sum | cut -c1-16)"

label_of() { "$DOCKER" image inspect --format '{{ index .Config.Labels "tollgate.base.key" }}' "$1" 2>/dev/null || true; }
if [ "$(label_of "$TAG")" = "$KEY" ] && [ "$(label_of "$RUNTIME_TAG")" = "$KEY" ]; then
  echo "make-base-image: $TAG and $RUNTIME_TAG are up to date ($KEY)"
  exit 0
fi

ROOTFS="$(mktemp -d "${TMPDIR:-/tmp}/tollgate-rootfs.XXXXXX")"
trap 'rm -rf "$ROOTFS"' EXIT

# Copies a binary and every library it links, each to the path ldd reports (the loader's own path is
# hard-coded in the ELF header, the others are found through the default multiarch search path).
copy_with_libs() {
  local bin="$1" dest="$2"
  install -D -m 0755 "$bin" "$ROOTFS$dest"
  ldd "$bin" | awk '/=> \// { print $3 } /^[[:space:]]*\/[^ ]+ \(/ { print $1 }' | while read -r lib; do
    if [ ! -e "$ROOTFS$lib" ]; then
      install -D -m 0755 "$(readlink -f "$lib")" "$ROOTFS$lib"
    fi
  done
}

copy_with_libs "$NODE_BIN" /nodejs/bin/node
# Also on PATH as `node`, for `docker exec <container> node ...` and for npm in the build base.
mkdir -p "$ROOTFS/usr/local/bin"
ln -s ../../../nodejs/bin/node "$ROOTFS/usr/local/bin/node"
mkdir -p "$ROOTFS/etc/ssl/certs" "$ROOTFS/root" "$ROOTFS/home/node" "$ROOTFS/tmp" "$ROOTFS/var/tmp"
chmod 1777 "$ROOTFS/tmp" "$ROOTFS/var/tmp"
chmod 0700 "$ROOTFS/root"
chown 1000:1000 "$ROOTFS/home/node"
# The host's trust store, handed to Node too: a machine behind a TLS-inspecting proxy needs its CA for
# `npm ci` in the build stage, exactly as the host's own npm does.
CA_ENV=()
if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
  cp /etc/ssl/certs/ca-certificates.crt "$ROOTFS/etc/ssl/certs/ca-certificates.crt"
  CA_ENV=(--change 'ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt')
fi
cat >"$ROOTFS/etc/passwd" <<'PASSWD'
root:x:0:0:root:/root:/usr/sbin/nologin
node:x:1000:1000::/home/node:/usr/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin
PASSWD
cat >"$ROOTFS/etc/group" <<'GROUP'
root:x:0:
node:x:1000:
nogroup:x:65534:
GROUP
printf 'passwd: files\ngroup: files\nhosts: files dns\n' >"$ROOTFS/etc/nsswitch.conf"

# Fixed mtimes keep the tarball, and so the imported layer, identical for identical inputs.
import_rootfs() {
  local tag="$1" description="$2"
  tar --sort=name --mtime='2000-01-01 00:00Z' --numeric-owner -C "$ROOTFS" -c . |
    "$DOCKER" import \
      --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      --change "ENV NODE_VERSION=$("$NODE_BIN" -p 'process.versions.node')" \
      "${CA_ENV[@]}" \
      --change "LABEL tollgate.base.key=$KEY" \
      --change "LABEL org.opencontainers.image.description=\"$description\"" \
      --change 'ENTRYPOINT ["/nodejs/bin/node"]' \
      - "$tag" >/dev/null
}

# The runtime base first: everything so far, nothing that can run a command but node.
import_rootfs "$RUNTIME_TAG" "Distroless-style Node 24 runtime base made by scripts/make-base-image.sh"

# The build base: npm, and /usr/bin/env for npm's shebang.
copy_with_libs "$ENV_BIN" /usr/bin/env
mkdir -p "$ROOTFS/usr/local/lib/node_modules"
cp -a "$NPM_DIR" "$ROOTFS/usr/local/lib/node_modules/npm"
ln -s ../lib/node_modules/npm/bin/npm-cli.js "$ROOTFS/usr/local/bin/npm"
ln -s ../lib/node_modules/npm/bin/npx-cli.js "$ROOTFS/usr/local/bin/npx"
import_rootfs "$TAG" "Minimal Node 24 build base (with npm) made by scripts/make-base-image.sh"

echo "make-base-image: built $TAG and $RUNTIME_TAG ($KEY, node $("$NODE_BIN" -v), npm $NPM_VERSION)"
