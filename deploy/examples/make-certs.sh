#!/bin/sh
# make-certs.sh DIR NAME... — a private CA and one certificate per NAME, for a test pair or a
# small installation (docs/operations.md, "Certificates"). Each certificate has CN = NAME and
# subjectAltName DNS:NAME, is valid for both TLS server and client use, and is signed by the CA
# in DIR (ca.crt, ca.key), which is made first if DIR has none: run it again with more names to
# add certificates under the same CA, or with another DIR for an unrelated CA.
#   deploy/examples/make-certs.sh /etc/vgpu-ha/tls host-a host-b
# writes ca.crt, ca.key, host-a.crt, host-a.key, host-b.crt, host-b.key. Keys are mode 0600.
# Environment: DAYS (validity, default 825), KEY (openssl genpkey algorithm: EC, the default,
# for P-256; RSA for 3072-bit RSA).
set -eu

if [ "$#" -lt 2 ]; then
  echo "usage: $0 DIR NAME..." >&2
  exit 2
fi
dir=$1
shift
days=${DAYS:-825}
umask 077
mkdir -p "$dir"

genkey() {
  case "${KEY:-EC}" in
    EC) openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null ;;
    RSA) openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:3072 -out "$1" 2>/dev/null ;;
    *) echo "$0: KEY must be EC or RSA" >&2; exit 2 ;;
  esac
}

for name in "$@"; do
  case "$name" in
    *[!A-Za-z0-9.-]* | "" | ca) echo "$0: bad name '$name' (A-Z a-z 0-9 . - only, not 'ca')" >&2; exit 2 ;;
  esac
done

if [ ! -f "$dir/ca.crt" ] || [ ! -f "$dir/ca.key" ]; then
  genkey "$dir/ca.key"
  openssl req -x509 -new -key "$dir/ca.key" -sha256 -days "$days" \
    -subj "/CN=vgpu-ha test CA $(date +%Y%m%d%H%M%S)-$$" \
    -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -out "$dir/ca.crt"
fi

for name in "$@"; do
  ext=$(mktemp)
  csr=$(mktemp)
  printf '%s\n' \
    "basicConstraints=critical,CA:FALSE" \
    "keyUsage=critical,digitalSignature,keyEncipherment" \
    "extendedKeyUsage=serverAuth,clientAuth" \
    "subjectAltName=DNS:$name" >"$ext"
  genkey "$dir/$name.key"
  openssl req -new -key "$dir/$name.key" -subj "/CN=$name" -out "$csr"
  openssl x509 -req -in "$csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial \
    -days "$days" -sha256 -extfile "$ext" -out "$dir/$name.crt" 2>/dev/null
  rm -f "$ext" "$csr"
done
chmod 0644 "$dir/ca.crt"
for name in "$@"; do chmod 0644 "$dir/$name.crt"; done
echo "$dir: ca.crt$(for n in "$@"; do printf ' %s.crt %s.key' "$n" "$n"; done)"
