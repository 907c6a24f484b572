#!/usr/bin/env bash
# Lets this machine run another architecture's programs, for `make image PLATFORM=linux/arm64`
# and `make test-arm64`:
#   packaging/emulate.sh ARCH   # a Debian architecture name: arm64, amd64, armhf, ppc64el, s390x, riscv64
# Nothing to do when ARCH is the machine's own. Otherwise three things, each said in one line
# when it is done: Debian's qemu-user-static installed (as root where apt-get is; otherwise
# the command that installs it, and exit 1), binfmt_misc mounted, and the kernel told to
# run ARCH's programs with qemu. The registration is the line qemu-user-static ships for
# systemd-binfmt, written to the kernel directly: neither systemd nor binfmt-support runs
# here. Its F flag makes the kernel open qemu at once, so qemu need not be inside the
# chroots that run ARCH's programs (the build's RUN steps, tests/container/test_arm64.py).
set -euo pipefail
arch=${1:?usage: packaging/emulate.sh ARCH}
case $arch in
    arm64) qemu=aarch64 ;;
    amd64) qemu=x86_64 ;;
    armhf | armel) qemu=arm ;;
    ppc64el) qemu=ppc64le ;;
    i386 | s390x | riscv64) qemu=$arch ;;
    *) echo "emulate: no qemu for the architecture $arch (arm64, amd64, armhf, ppc64el, s390x, riscv64)" >&2; exit 2 ;;
esac
[ "$qemu" != "$(uname -m)" ] || exit 0

binfmt=/proc/sys/fs/binfmt_misc
entry=$binfmt/qemu-$qemu
if [ -e "$entry" ]; then
    grep -qx enabled "$entry" || { echo "emulate: $entry is registered but disabled (echo 1 > $entry)" >&2; exit 1; }
    # Without F, the kernel looks for qemu inside each chroot, where there is none.
    grep -q '^flags:.*F' "$entry" || { echo "emulate: $entry is registered without the F flag: remove it (echo -1 > $entry) and run this again" >&2; exit 1; }
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "emulate: $arch programs cannot run here yet, and only root can set that up: run as root, or: sudo packaging/emulate.sh $arch" >&2
    exit 1
fi
conf=/usr/lib/binfmt.d/qemu-$qemu.conf
if [ ! -f "$conf" ]; then
    command -v apt-get >/dev/null || { echo "emulate: qemu-user-static is missing: install it (it ships $conf)" >&2; exit 1; }
    echo "emulate: installing qemu-user-static for $arch: the image's build and its tests run $arch programs under qemu"
    apt-get update -qq || true  # stale lists may still hold the package; the check after says if not
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends qemu-user-static >/dev/null
    [ -f "$conf" ] || { echo "emulate: qemu-user-static was installed but has no $conf" >&2; exit 1; }
fi
if [ ! -e "$binfmt/register" ]; then
    echo "emulate: mounting binfmt_misc on $binfmt: the kernel's table of interpreters by file type"
    mount -t binfmt_misc binfmt_misc "$binfmt"
fi
echo "emulate: registering qemu-$qemu with the kernel for $arch programs ($conf)"
grep -v '^[#;]' "$conf" | grep . >"$binfmt/register"
grep -qx enabled "$entry"
