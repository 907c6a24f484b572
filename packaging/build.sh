#!/usr/bin/env bash
# `make image` and `make binary`: the Dockerfile built with whichever builder is here, a Docker
# engine or podman.
#   packaging/build.sh image [TAG]    # the image (default tag: clientmcp)
#   packaging/build.sh binary [DIR]   # DIR/clientmcp, the single static file (default: dist)
# With podman, the build base is pulled, or made from Debian's packages when no registry of
# images answers (packaging/debian-base.sh). PODMAN names the podman command line (default
# `podman --storage-driver vfs`, which works wherever podman does).
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

if docker info >/dev/null 2>&1; then
    docker build "${arguments[@]}" .
    [ "$what" != image ] || docker build --target build -t "$tag-build" .
    exit
fi
podman=(${PODMAN:-podman --storage-driver vfs})
command -v "${podman[0]}" >/dev/null || {
    echo "make $what: no Docker engine answers and podman is missing: install one (apt-get install podman)" >&2
    exit 1
}
if ! "${podman[@]}" image exists "$base"; then
    timeout 60 "${podman[@]}" pull -q "$base" >/dev/null 2>&1 || packaging/debian-base.sh "$base"
fi
# --isolation chroot: RUN steps need no cgroups or namespaces of their own (a nested sandbox has
# none). --format docker: the OCI format has no HEALTHCHECK, and podman would drop it.
build=("${podman[@]}" build --isolation chroot --format docker)
"${build[@]}" "${arguments[@]}" .
[ "$what" != image ] || "${build[@]}" --target build -t "$tag-build" . >/dev/null
