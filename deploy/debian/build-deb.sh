#!/usr/bin/env bash
# npm run package [-- --out DIR] [--fast]: builds the Debian package vgpu-ha_<version>_<arch>.deb
# from this checkout (default DIR: dist-deb/). Contents (docs/operations.md, "The package"):
#   /usr/bin/vgpud, /usr/bin/vgpuctl          sh wrappers running the bundled Node.js
#   /usr/lib/vgpu-ha/                         the built packages (dist, no tests), their
#                                             production node_modules (npm ci --omit=dev from
#                                             package-lock.json), node/ (the runtime)
#   /usr/lib/systemd/system/vgpud.service     deploy/systemd/vgpud.service
#   /usr/lib/sysusers.d/vgpu-ha.conf          the static user vgpu
#   /etc/vgpu-ha/examples/                    deploy/examples/*.yaml (conffiles)
#   /usr/share/vgpu-ha/make-certs.sh, /usr/share/man/man8/{vgpud,vgpuctl}.8.gz,
#   /usr/share/bash-completion/completions/{vgpud,vgpuctl}, /usr/share/doc/vgpu-ha/
# Reproducible: the runtime is pinned with its integrity (node-runtime.json), the dependencies
# by package-lock.json, and every timestamp is SOURCE_DATE_EPOCH (the last commit's time).
# --fast compresses with gzip -1 instead of xz (the same files; for the test).
# --version V stamps V (a Debian version, e.g. 0.1.0+site1) into the package and into every
# package.json in it, so `vgpud --version` prints it: a site build, or a test of an upgrade.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$ROOT"
OUT="$ROOT/dist-deb"
COMPRESS=(-Zxz -z6)
STAMP=""
while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUT="$(mkdir -p "$2" && cd "$2" && pwd)"; shift 2 ;;
    --fast) COMPRESS=(-Zgzip -z1); shift ;;
    --version) STAMP="$2"; shift 2 ;;
    *) echo "usage: npm run package [-- --out DIR] [--fast] [--version V]" >&2; exit 2 ;;
  esac
done
for tool in dpkg-deb dpkg gzip; do
  command -v "$tool" >/dev/null || { echo "package: '$tool' not found (Debian package dpkg)" >&2; exit 1; }
done

json() { node -p "JSON.parse(require('fs').readFileSync('$1','utf8'))$2"; }
VERSION="$(json package.json .version)"
for p in packages/*/package.json; do
  [ "$(json "$p" .version)" = "$VERSION" ] || { echo "package: $p is not version $VERSION" >&2; exit 1; }
done
if [ -n "$STAMP" ]; then
  [[ "$STAMP" =~ ^[0-9][A-Za-z0-9.+~-]*$ ]] || { echo "package: --version $STAMP is not a Debian version" >&2; exit 2; }
  VERSION="$STAMP"
fi
ARCH="$(dpkg --print-architecture)"
case "$ARCH" in
  amd64) NODE_ARCH=x64 ;;
  arm64) NODE_ARCH=arm64 ;;
  *) echo "package: no Node.js runtime pinned for $ARCH" >&2; exit 1 ;;
esac
NODE_VERSION="$(json deploy/debian/node-runtime.json .version)"
NODE_INTEGRITY="$(json deploy/debian/node-runtime.json ".integrity['$NODE_ARCH']")"
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}"

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
STAGE="$WORK/root"
LIB="$STAGE/usr/lib/vgpu-ha"
echo "== build"
npm run build --silent

echo "== /usr/lib/vgpu-ha: the packages and their production dependencies"
mkdir -p "$LIB"
cp package.json package-lock.json "$LIB/"
for p in packages/*/; do
  mkdir -p "$LIB/$p"
  cp "$p/package.json" "$LIB/$p/"
  cp -r "$p/dist" "$LIB/$p/dist"
done
find "$LIB/packages" \( -name '*.test.js' -o -name '*.test.d.ts' -o -name '*.d.ts' -o -name '*.map' \
  -o -name '.tsbuildinfo' \) -delete
(cd "$LIB" && npm ci --omit=dev --ignore-scripts --prefer-offline --no-audit --no-fund \
  --loglevel=error >/dev/null)
rm -f "$LIB/package-lock.json" "$LIB/node_modules/.package-lock.json"
# --version: the version every program reports, stamped after npm ci (which checks the
# package.json files against the lock file).
if [ -n "$STAMP" ]; then
  for p in "$LIB/package.json" "$LIB"/packages/*/package.json; do
    node -e 'const fs = require("fs"); const [f, v] = process.argv.slice(1);
      const j = JSON.parse(fs.readFileSync(f, "utf8")); j.version = v;
      fs.writeFileSync(f, `${JSON.stringify(j, null, 2)}\n`);' "$p" "$VERSION"
  done
fi

echo "== the Node.js runtime: node-linux-$NODE_ARCH@$NODE_VERSION"
(cd "$WORK" && npm pack "node-linux-$NODE_ARCH@$NODE_VERSION" --prefer-offline --silent >/dev/null)
TARBALL="$WORK/node-linux-$NODE_ARCH-$NODE_VERSION.tgz"
GOT="sha512-$(openssl dgst -sha512 -binary "$TARBALL" | base64 -w0)"
[ "$GOT" = "$NODE_INTEGRITY" ] || { echo "package: $TARBALL integrity $GOT, pinned $NODE_INTEGRITY" >&2; exit 1; }
mkdir -p "$WORK/node" "$LIB/node/bin"
tar -xzf "$TARBALL" -C "$WORK/node"
install -m 0755 "$WORK/node/package/bin/node" "$LIB/node/bin/node"
install -m 0644 "$WORK/node/package/LICENSE" "$LIB/node/LICENSE"
[ "$("$LIB/node/bin/node" --version)" = "v$NODE_VERSION" ]

echo "== programs, unit, user, examples, man pages, completion, docs"
mkdir -p "$STAGE/usr/bin"
wrapper() {
  sed -e "s|@NAME@|$1|" -e "s|@SCRIPT@|$2|" deploy/debian/wrapper.in > "$STAGE/usr/bin/$1"
  chmod 0755 "$STAGE/usr/bin/$1"
}
wrapper vgpud packages/daemon/dist/bin/vgpud.js
wrapper vgpuctl packages/client/dist/vgpuctl/main.js
install -D -m 0644 deploy/systemd/vgpud.service "$STAGE/usr/lib/systemd/system/vgpud.service"
install -D -m 0644 deploy/debian/sysusers.conf "$STAGE/usr/lib/sysusers.d/vgpu-ha.conf"
install -d -m 0755 "$STAGE/etc/vgpu-ha/examples"
install -m 0644 deploy/examples/*.yaml "$STAGE/etc/vgpu-ha/examples/"
install -D -m 0755 deploy/examples/make-certs.sh "$STAGE/usr/share/vgpu-ha/make-certs.sh"
for page in deploy/man/*.8; do
  install -D -m 0644 "$page" "$STAGE/usr/share/man/man8/$(basename "$page")"
  gzip -9n "$STAGE/usr/share/man/man8/$(basename "$page")"
done
for c in vgpud vgpuctl; do
  install -D -m 0644 "deploy/bash-completion/$c" "$STAGE/usr/share/bash-completion/completions/$c"
done
DOC="$STAGE/usr/share/doc/vgpu-ha"
install -D -m 0644 deploy/debian/copyright "$DOC/copyright"
install -m 0644 README.md docs/operations.md docs/configuration.md docs/failure-model.md \
  docs/security.md "$DOC/"

echo "== DEBIAN/"
mkdir -p "$STAGE/DEBIAN"
SIZE="$(du -sk --exclude=DEBIAN "$STAGE" | cut -f1)"
sed -e "s|@VERSION@|$VERSION|" -e "s|@ARCH@|$ARCH|" -e "s|@SIZE@|$SIZE|" \
  -e "s|@NODE_VERSION@|Node.js $NODE_VERSION|" deploy/debian/control.in > "$STAGE/DEBIAN/control"
(cd "$STAGE" && find etc -type f | sort | sed 's|^|/|') > "$STAGE/DEBIAN/conffiles"
for script in postinst prerm postrm; do
  install -m 0755 "deploy/debian/$script" "$STAGE/DEBIAN/$script"
done

echo "== dpkg-deb"
find "$STAGE" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
chmod -R go-w "$STAGE"
mkdir -p "$OUT"
DEB="$OUT/vgpu-ha_${VERSION}_${ARCH}.deb"
dpkg-deb --root-owner-group "${COMPRESS[@]}" --build "$STAGE" "$DEB" >/dev/null
echo "$DEB"
