#!/usr/bin/env bash
# Makes the Dockerfile's build base (Debian bookworm) from Debian's packages, for a machine
# that reaches Debian's archive but no registry of container images:
#   packaging/debian-base.sh NAME [ARCH]   # e.g. docker.io/library/debian:bookworm-slim
# debootstrap lays out a minimal bookworm, which podman imports under NAME, so that the
# Dockerfile's FROM finds it and the Dockerfile stays the one that builds anywhere. ARCH, a
# Debian architecture (default: the machine's), makes another architecture's base, whose
# programs debootstrap runs under qemu (packaging/emulate.sh sets that up first).
# When this machine reaches PyPI only through a TLS proxy with its own authority, its CA
# bundle goes into this base (never into the Dockerfile), with PIP_CERT and SSL_CERT_FILE.
set -euo pipefail
name=${1:?usage: packaging/debian-base.sh IMAGE-NAME [ARCH]}
arch=${2:-}
podman=(${PODMAN:-podman --storage-driver vfs})
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
command -v debootstrap >/dev/null || { echo "debian-base: debootstrap is missing (apt-get install debootstrap)" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || { echo "debian-base: debootstrap needs root" >&2; exit 1; }
architecture=()  # debootstrap's and podman import's option, for another architecture than the machine's
if [ -n "$arch" ]; then
    "$(dirname "$0")/emulate.sh" "$arch"
    architecture=(--arch "$arch")
fi

root=$(mktemp -d "${TMPDIR:-/tmp}/clientmcp-base.XXXXXX")
chmod 755 "$root"  # it becomes the image's /, which mktemp's 0700 would close to every other user
trap 'rm -rf "$root"' EXIT
debootstrap "${architecture[@]}" --variant=minbase bookworm "$root" "$mirror" >"$root.log" 2>&1 \
    || { tail -20 "$root.log" >&2; echo "debian-base: debootstrap failed (log above)" >&2; exit 1; }
rm -f "$root.log"
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*

changes=()
bundle=${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}
if [ -f "$bundle" ]; then
    # Outside /etc/ssl/certs: installing ca-certificates in the build rewrites that folder.
    mkdir -p "$root/etc/ssl"
    cp "$bundle" "$root/etc/ssl/machine-ca-bundle.crt"
    changes+=(--change "ENV PIP_CERT=/etc/ssl/machine-ca-bundle.crt"
              --change "ENV SSL_CERT_FILE=/etc/ssl/machine-ca-bundle.crt")
fi
tar -C "$root" -c . | "${podman[@]}" import "${architecture[@]}" "${changes[@]}" - "$name" >/dev/null
echo "debian-base: made $name from Debian's packages${arch:+ for $arch}"
