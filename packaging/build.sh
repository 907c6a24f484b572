#!/usr/bin/env bash
# `make image` and `make binary`: the Dockerfile built with whichever builder is here, a Docker
# engine or podman.
#   packaging/build.sh image [TAG]    # the image (default tag: clientmcp)
#   packaging/build.sh binary [DIR]   # DIR/clientmcp, the single static file (default: dist)
# With podman, the build base is pulled, or made from Debian's packages when no registry of
# images answers (packaging/debian-base.sh). PODMAN names the podman command line (default
# `podman --storage-driver vfs`, which works wherever podman does).
# PLATFORM (`make image PLATFORM=linux/arm64`) builds for another platform than the machine's,
# its programs run under qemu (packaging/emulate.sh); podman builds it on a base of that
# platform's own, named localhost/debian:bookworm-slim-ARCH, pulled or made as above.
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:?usage: packaging/build.sh image [TAG] | binary [DIR]}
# The image's build stage is tagged TAG-build too: bench/frozen.py runs the same bridge from its
# virtualenv, on the same Python as the frozen builds, to tell packaging from interpreter.
tag=${2:-clientmcp}
case $what in
    image) arguments=(-t "$tag") ;;
    binary) arguments=(--target binary --output "type=local,dest=${2:-dist}") ;;
    *) echo "usage: packaging/build.sh image [TAG] | binary [DIR]" >&2; exit 2 ;;
esac
base=$(sed -n 's/^FROM \([^ ]*\) AS build$/\1/p' Dockerfile)

platform=${PLATFORM:-}
foreign=""  # the architecture of PLATFORM when it is not the machine's (Debian's name: arm64)
if [ -n "$platform" ]; then
    arguments+=(--platform "$platform")
    arch=${platform#*/}
    arch=${arch%%/*}
    case $(uname -m) in x86_64) own=amd64 ;; aarch64) own=arm64 ;; *) own=$(uname -m) ;; esac
    if [ "$arch" != "$own" ]; then
        foreign=$arch
        if [ "$what" = binary ]; then
            echo "make binary: for this machine's own platform only, not $platform: staticx, which makes the single file, publishes a wheel for x86-64 alone (docs/deployment.md, The arm64 image)" >&2
            exit 2
        fi
        packaging/emulate.sh "$foreign"
    fi
fi
# bench/frozen.py runs the machine's own build stage only: another platform's is not tagged.
tag_build_stage() { [ "$what" = image ] && [ -z "$foreign" ]; }

if docker info >/dev/null 2>&1; then
    docker build "${arguments[@]}" .
    ! tag_build_stage || docker build --target build -t "$tag-build" .
    exit
fi
podman=(${PODMAN:-podman --storage-driver vfs})
command -v "${podman[0]}" >/dev/null || {
    echo "make $what: no Docker engine answers and podman is missing: install one (apt-get install podman)" >&2
    exit 1
}
if [ -z "$foreign" ]; then
    if ! "${podman[@]}" image exists "$base"; then
        timeout 60 "${podman[@]}" pull -q "$base" >/dev/null 2>&1 || packaging/debian-base.sh "$base"
    fi
else
    # One name holds one platform's image: the foreign base gets its own, and the build is
    # told to use it (--from replaces the first FROM, the build stage's).
    own_base="localhost/debian:bookworm-slim-$foreign"
    if ! "${podman[@]}" image exists "$own_base"; then
        native=$("${podman[@]}" image inspect --format '{{.Id}}' "$base" 2>/dev/null || true)
        if pulled=$(timeout 60 "${podman[@]}" pull -q --platform "$platform" "$base" 2>/dev/null); then
            "${podman[@]}" tag "$pulled" "$own_base"
            # The pull took the name from the machine's own base: it is given back.
            [ -z "$native" ] || "${podman[@]}" tag "$native" "$base"
        else
            packaging/debian-base.sh "$own_base" "$foreign"
        fi
    fi
    arguments+=(--from "$own_base")
fi
# --isolation chroot: RUN steps need no cgroups or namespaces of their own (a nested sandbox has
# none). --format docker: the OCI format has no HEALTHCHECK, and podman would drop it.
build=("${podman[@]}" build --isolation chroot --format docker)
"${build[@]}" "${arguments[@]}" .
! tag_build_stage || "${build[@]}" --target build -t "$tag-build" . >/dev/null
