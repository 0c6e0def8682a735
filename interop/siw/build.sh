#!/usr/bin/env bash
# Builds everything the siw peer needs into a cache outside the clone:
#   Debian kernel + out-of-tree siw.ko (stock and "knobs" variant), rdma-core
#   and librpma userspace, the C test program, the librpma client and example
#   servers, the guest agent and a busybox initramfs.
# Every step is keyed by the versions it depends on and published by rename,
# so an interrupted build is never mistaken for a finished one and a warm
# cache makes the whole script take seconds.
#
# Output: $LAB/current.env (shell syntax, also read by the Go package lab).
# Environment: IWARP_CACHE, XDG_CACHE_HOME, KVER (e.g. 6.1.0-57-amd64),
# KPKGVER (Debian version to pin all kernel packages to), SIW_BUILD_JOBS.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
CACHE_ROOT=${IWARP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/iwarp-go}
LAB=$CACHE_ROOT/siw-lab
DEBS=$LAB/debs
ARCH=x86_64-linux-gnu
export DEBIAN_FRONTEND=noninteractive

log() { printf '[build %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf 'build.sh: %s\n' "$*" >&2; exit 1; }

# Userspace for the guest; the -dev packages are only unpacked to compile the
# C programs against the very libraries the guest runs. Debian 12 names
# librpma 1.2.0's runtime package librpma0. e2fsprogs gives mke2fs for the
# ext4 file system on the guest's pmem device.
USER_PKGS=(ibverbs-providers libibverbs1 librdmacm1 rdmacm-utils ibverbs-utils perftest
  iproute2 tcpdump busybox-static libgcc-s1 libibverbs-dev librdmacm-dev
  librpma0 librpma-dev e2fsprogs)
# Guest binaries copied into the initramfs (with their shared-library closure).
GUEST_BINS=(ip rdma tcpdump rping ucmatose udaddy ibv_devices ibv_devinfo ibv_rc_pingpong
  ib_write_bw ib_read_bw ib_send_bw ib_write_lat ib_read_lat ib_send_lat mke2fs)
# Kernel modules whose modprobe closure goes into the initramfs. nd_e820
# turns the memmap=…!… range into a legacy pmem region, nd_pmem makes it
# /dev/pmem0, ext4 mounts it with -o dax (the DAX scenario loads them; the
# boot does not).
GUEST_MODS=(siw ib_uverbs rdma_ucm crc32c_generic crc32c_intel libcrc32c virtio_net virtio_pci
  9p 9pnet_virtio af_packet nd_e820 nd_pmem ext4)
# siw_main.c constants turned into module parameters in the "knobs" build.
KNOB_BOOLS=(mpa_crc_required mpa_crc_strict peer_to_peer try_gso siw_tcp_nagle)

hash_of() { sha256sum | cut -c1-16; }

# --- host tools -------------------------------------------------------------
ensure_host_tools() {
  local need=() cmd pkg
  for pair in qemu-system-x86_64:qemu-system-x86 cpio:cpio depmod:kmod readelf:binutils \
    strip:binutils gcc-12:gcc-12 make:make bc:bc xz:xz-utils tshark:tshark \
    apt-get:apt dpkg-deb:dpkg ldconfig:libc-bin sha256sum:coreutils; do
    cmd=${pair%%:*} pkg=${pair#*:}
    command -v "$cmd" >/dev/null 2>&1 || need+=("$pkg")
  done
  [ -e /usr/include/stdio.h ] || need+=(libc6-dev)
  if [ ${#need[@]} -gt 0 ]; then
    [ "$(id -u)" = 0 ] || die "missing host packages (${need[*]}); install them as root"
    log "installing host packages: ${need[*]}"
    echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections 2>/dev/null || true
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends $(printf '%s\n' "${need[@]}" | sort -u) >/dev/null
  fi
  command -v go >/dev/null 2>&1 || die "go is not on PATH (needed for the guest agent)"
}

# apt-cache answers from local lists; refresh them once if they know nothing yet.
ensure_apt_lists() {
  # (grep reads all of it: with pipefail, an early exit of grep -q would
  # fail the pipeline by SIGPIPE.)
  local policy
  policy=$(apt-cache policy linux-image-amd64 2>/dev/null || true)
  if ! grep -q 'Candidate: [0-9]' <<<"$policy"; then
    log "apt-get update"
    apt-get update -qq
  fi
}

candidate() { apt-cache policy "$1" 2>/dev/null | awk '/Candidate:/{print $2; exit}'; }
has_version() {
  local versions
  versions=$(apt-cache madison "$1" 2>/dev/null | awk -F'|' '{gsub(/ /,"",$2); print $2}')
  grep -qxF "$2" <<<"$versions"
}

# Downloads the named packages (name or name=version) into $DEBS unless a
# file for exactly that version is there already; prints the .deb paths.
download() {
  mkdir -p "$DEBS"
  local uris missing=() line file name
  uris=$(apt-get download --print-uris "$@" 2>/dev/null) || die "apt-get cannot resolve: $*"
  while read -r line; do
    [ -n "$line" ] || continue
    file=$(printf '%s\n' "$line" | awk '{print $2}')
    name=${file%%_*}
    [ -s "$DEBS/$file" ] || missing+=("$(printf '%s\n' "$@" | awk -v n="$name" '{split($0, a, "="); if (a[1] == n) {print; exit}}')")
  done <<<"$uris"
  if [ ${#missing[@]} -gt 0 ]; then
    log "downloading ${#missing[@]} package(s)"
    (cd "$DEBS" && apt-get download -q "${missing[@]}" 2>&1 | grep -v '^W: Download is performed unsandboxed' >&2) ||
      die "apt-get download failed for: ${missing[*]}"
  fi
  printf '%s\n' "$uris" | awk -v d="$DEBS" 'NF{print d "/" $2}'
}

# --- kernel ------------------------------------------------------------------
resolve_kernel() {
  if [ -z "${KVER:-}" ]; then
    KVER=$(apt-cache depends linux-image-amd64 2>/dev/null |
      awk '/Depends: linux-image-[0-9]/{sub("linux-image-","",$2); print $2; exit}')
    [ -n "$KVER" ] || die "cannot find the kernel that linux-image-amd64 depends on"
  fi
  local series=${KVER%%-*}          # 6.1.0
  KSERIES=${series%.*}              # 6.1
  KPKGS=("linux-image-$KVER" "linux-headers-$KVER" "linux-headers-${KVER%-amd64}-common"
    "linux-kbuild-$KSERIES" "linux-source-$KSERIES")
  local p v versions=() same=1
  if [ -n "${KPKGVER:-}" ]; then
    for p in "${KPKGS[@]}"; do
      has_version "$p" "$KPKGVER" || die "kernel packages do not share one Debian version: $p has no version $KPKGVER"
    done
  else
    for p in "${KPKGS[@]}"; do
      v=$(candidate "$p"); [ -n "$v" ] && [ "$v" != "(none)" ] || die "package $p is not in the archive"
      versions+=("$p=$v")
      [ -z "${KPKGVER:-}" ] && KPKGVER=$v
      [ "$v" = "$KPKGVER" ] || same=0
    done
    [ $same = 1 ] || die "kernel packages do not share one Debian version: ${versions[*]} (set KPKGVER=<version> to pin one that all of them have)"
  fi
  KDIR=$LAB/kernel/${KVER}_$KPKGVER
  log "kernel $KVER (Debian $KPKGVER)"
}

build_kernel() {
  local stamp=$KDIR/.done
  [ -e "$stamp" ] && return 0
  local debs img kb
  mapfile -t debs < <(download "${KPKGS[@]/%/=$KPKGVER}")
  rm -rf "$KDIR.tmp" && mkdir -p "$KDIR.tmp"/{img,kbuild,src,stock,knobs}
  local t=$KDIR.tmp
  for d in "${debs[@]}"; do
    case $(basename "$d") in
      linux-image-*) log "unpacking kernel image"; dpkg-deb -x "$d" "$t/img" ;;
      linux-headers-* | linux-kbuild-*) dpkg-deb -x "$d" "$t/kbuild" ;;
      linux-source-*)
        log "extracting drivers/infiniband/sw/siw from linux-source-$KSERIES"
        dpkg-deb --fsys-tarfile "$d" | tar -xO "./usr/src/linux-source-$KSERIES.tar.xz" | xz -dc -T2 |
          tar -x -C "$t/src" --strip-components=4 "linux-source-$KSERIES/drivers/infiniband/sw/siw" ;;
    esac
  done
  [ -e "$t/src/siw/siw_main.c" ] || die "siw sources not found in linux-source-$KSERIES"
  kb=$t/kbuild/usr/src/linux-headers-$KVER
  [ -e "$kb/Makefile" ] || die "headers not unpacked at $kb"
  # The arch headers include the common headers by absolute path.
  sed -i "s#^include /usr/src/#include $t/kbuild/usr/src/#" "$kb/Makefile"
  grep -q "^include $t/kbuild/usr/src/" "$kb/Makefile" || die "could not redirect the include line in $kb/Makefile"

  cp -a "$t/src/siw" "$t/stock/siw"
  cp -a "$t/src/siw" "$t/knobs/siw"
  knobs_patch "$t/knobs/siw"
  local jobs=${SIW_BUILD_JOBS:-$(nproc)} v
  for v in stock knobs; do
    log "building siw.ko ($v)"
    make -s -C "$kb" M="$t/$v/siw" CONFIG_RDMA_SIW=m -j"$jobs" modules >"$t/$v/build.log" 2>&1 ||
      { cat "$t/$v/build.log" >&2; die "siw.ko ($v) build failed"; }
    strip --strip-debug "$t/$v/siw/siw.ko"
    cp "$t/$v/siw/siw.ko" "$t/$v/siw.ko"
  done
  local vermagic parms
  vermagic=$(modinfo -F vermagic "$t/stock/siw.ko")
  parms=$(modinfo -F parm "$t/knobs/siw.ko")
  grep -q "^$KVER " <<<"$vermagic" || die "siw.ko vermagic ($vermagic) does not match $KVER"
  grep -q '^mpa_version:' <<<"$parms" || die "knobs siw.ko has no parameters"
  # Resolve the module closure once: siw goes into updates/ of the unpacked tree.
  mkdir -p "$t/img/lib/modules/$KVER/updates"
  cp "$t/stock/siw.ko" "$t/img/lib/modules/$KVER/updates/siw.ko"
  depmod -b "$t/img" "$KVER"
  rm -rf "$t/src" "$t/kbuild" "$t/stock/siw" "$t/knobs/siw"
  touch "$t/.done"
  rm -rf "$KDIR" && mv "$t" "$KDIR"
}

# Turns the compile-time settings of siw_main.c into read-only module
# parameters with unchanged defaults. Applied to Debian's source at build time.
knobs_patch() {
  local dir=$1 k
  for k in "${KNOB_BOOLS[@]}"; do
    sed -i -E "s/^const bool ${k}( = (true|false))?;/bool ${k}\1;\nmodule_param(${k}, bool, 0444);/" "$dir/siw_main.c"
    sed -i -E "s/^extern const bool ${k};/extern bool ${k};/" "$dir/siw.h"
    grep -q "^module_param(${k}, bool, 0444);" "$dir/siw_main.c" || die "knobs patch: $k not found in siw_main.c"
    grep -q "^extern bool ${k};" "$dir/siw.h" || die "knobs patch: $k not found in siw.h"
  done
  sed -i -E 's/^(u_char mpa_version = MPA_REVISION_2;)/\1\nmodule_param(mpa_version, byte, 0444);/' "$dir/siw_main.c"
  grep -q '^module_param(mpa_version, byte, 0444);' "$dir/siw_main.c" || die "knobs patch: mpa_version not found"
}

# --- userspace ---------------------------------------------------------------
build_userspace() {
  local names
  names=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
    --no-replaces --no-enhances "${USER_PKGS[@]}" 2>/dev/null | grep -E '^[a-z0-9]' | sort -u)
  [ -n "$names" ] || die "apt-cache depends found nothing for ${USER_PKGS[*]}"
  # The key is the exact set of .deb files (names carry versions).
  local ukey
  ukey=$(apt-get download --print-uris $names 2>/dev/null | awk '{print $2}' | sort | hash_of)
  UROOT=$LAB/user/$ukey
  [ -e "$UROOT/.done" ] && return 0
  local debs
  mapfile -t debs < <(download $names)
  log "unpacking ${#debs[@]} userspace packages"
  rm -rf "$UROOT.tmp" && mkdir -p "$UROOT.tmp"
  for d in "${debs[@]}"; do dpkg-deb -x "$d" "$UROOT.tmp"; done
  touch "$UROOT.tmp/.done"
  rm -rf "$UROOT" && mv "$UROOT.tmp" "$UROOT"
}

# Builds the C program of folder $1 (its *.c and Makefile, against the
# userspace tree) into the cache unless there; prints its path.
build_c() {
  local dir=$1 name=$2 key out
  key=$( (cat "$HERE/$dir"/*.c "$HERE/$dir/Makefile" "$HERE/cprog/sysroot.mk"; echo "$UROOT") | hash_of)
  out=$LAB/$dir/$key/$name
  if [ ! -x "$out" ]; then
    log "building $name"
    mkdir -p "$(dirname "$out")"
    make -s -C "$HERE/$dir" SYSROOT="$UROOT" OUT="$out.tmp" >&2 || die "$name build failed"
    mv "$out.tmp" "$out"
  fi
  printf '%s\n' "$out"
}

# The C test program, the librpma client and the librpma example servers.
build_cprogs() {
  CPROG=$(build_c cprog iwtest)
  RPMACLIENT=$(build_c rpmaclient rpmaclient)
  RPMASERVER=$(build_c rpmaserver rpmaserver)
}

build_agent() {
  local akey
  akey=$( (cat "$HERE"/lab/*.go "$HERE"/agent/*.go; go version) | hash_of)
  AGENT=$LAB/agent/$akey/iwlab-agent
  [ -x "$AGENT" ] && return 0
  log "building the guest agent"
  mkdir -p "$(dirname "$AGENT")"
  (cd "$REPO" && CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath -ldflags='-s -w' \
    -o "$AGENT.tmp" ./interop/siw/agent) || die "guest agent build failed"
  mv "$AGENT.tmp" "$AGENT"
}

# --- initramfs -------------------------------------------------------------
# Resolves a path inside $UROOT, following symlinks (absolute ones relative to
# the root), and prints the real file.
in_root() {
  local p=$1 n=0 target
  while [ -L "$UROOT$p" ]; do
    target=$(readlink "$UROOT$p")
    case $target in /*) p=$target ;; *) p=$(dirname "$p")/$target ;; esac
    n=$((n + 1)); [ $n -lt 20 ] || die "symlink loop at $1"
  done
  [ -e "$UROOT$p" ] && printf '%s\n' "$UROOT$p"
}

find_lib() {
  local d
  for d in /lib/$ARCH /usr/lib/$ARCH /lib /usr/lib /lib64; do
    in_root "$d/$1" >/dev/null && { printf '%s\n' "$d/$1"; return 0; }
  done
  return 1
}

# Copies a file from $UROOT (by its path inside the root) into the initramfs
# at the same path, and then the libraries it needs, recursively.
copy_elf() {
  local p=$1 real lib interp
  [ -e "$IR$p" ] && return 0
  real=$(in_root "$p") || die "$p not found in the userspace root"
  mkdir -p "$IR$(dirname "$p")"
  cp "$real" "$IR$p"
  interp=$(readelf -l "$real" 2>/dev/null | sed -n 's/.*Requesting program interpreter: \(.*\)]/\1/p')
  [ -n "$interp" ] && copy_elf "$interp"
  for lib in $(readelf -d "$real" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
    copy_elf "$(find_lib "$lib")" || die "library $lib (needed by $p) not found"
  done
}

build_initramfs() {
  local ikey
  ikey=$( (echo "$KDIR $UROOT $CPROG $RPMACLIENT $RPMASERVER"; cat "$HERE/guest/init"; printf '%s\n' "${GUEST_BINS[@]}" "${GUEST_MODS[@]}") | hash_of)
  IMG=$LAB/image/$ikey
  [ -e "$IMG/initrd.cpio" ] && return 0
  log "building the initramfs"
  rm -rf "$IMG.tmp" && mkdir -p "$IMG.tmp/root"
  IR=$IMG.tmp/root
  mkdir -p "$IR"/{bin,sbin,etc,proc,sys,dev,tmp,mnt,run,root,var/run,usr/bin,usr/sbin,lib/modules}
  # busybox first; real binaries of the same name replace its links below.
  cp "$(in_root /bin/busybox)" "$IR/bin/busybox"
  local a
  for a in $("$IR/bin/busybox" --list-full); do
    [ -e "$IR/$a" ] || ln -s /bin/busybox "$IR/$a"
  done
  local b p
  for b in "${GUEST_BINS[@]}"; do
    p=""
    for d in /usr/bin /usr/sbin /bin /sbin; do [ -e "$UROOT$d/$b" ] && { p=$d/$b; break; }; done
    [ -n "$p" ] || die "binary $b not found in the userspace packages"
    rm -f "$IR$p" "$IR/bin/$b" "$IR/sbin/$b" "$IR/usr/bin/$b" "$IR/usr/sbin/$b"
    copy_elf "$p"
  done
  mkdir -p "$IR/usr/local/bin"
  local prog
  cp "$CPROG" "$IR/usr/local/bin/iwtest"
  cp "$RPMACLIENT" "$IR/usr/local/bin/rpmaclient"
  cp "$RPMASERVER" "$IR/usr/local/bin/rpmaserver"
  for prog in "$CPROG" "$RPMACLIENT" "$RPMASERVER"; do
    for lib in $(readelf -d "$prog" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do copy_elf "$(find_lib "$lib")"; done
  done
  # mke2fs reads its defaults (4 KiB blocks, ext4's features) from here.
  cp "$(in_root /etc/mke2fs.conf)" "$IR/etc/mke2fs.conf"
  # Verbs providers are dlopen()ed: the siw one and its drivers file, plus
  # libgcc_s, which glibc dlopen()s on thread exit (rping aborts without it).
  copy_elf "/usr/lib/$ARCH/libibverbs/libsiw-rdmav34.so"
  copy_elf "$(find_lib libgcc_s.so.1)"
  mkdir -p "$IR/etc/libibverbs.d"
  cp "$(in_root /etc/libibverbs.d/siw.driver)" "$IR/etc/libibverbs.d/"
  printf '/lib/%s\n/usr/lib/%s\n/usr/lib/%s/libibverbs\n' "$ARCH" "$ARCH" "$ARCH" >"$IR/etc/ld.so.conf"
  ldconfig -r "$IR"
  printf 'root:x:0:0:root:/root:/bin/sh\ntcpdump:x:0:0:tcpdump:/tmp:/bin/false\n' >"$IR/etc/passwd"
  printf 'root:x:0:\ntcpdump:x:0:\n' >"$IR/etc/group"
  printf '127.0.0.1 localhost\n10.0.2.15 guest\n10.0.2.2 host\n' >"$IR/etc/hosts"

  # Kernel modules: the modprobe closure from the unpacked tree.
  local kimg=$KDIR/img m line
  local deps
  for m in "${GUEST_MODS[@]}"; do
    if ! deps=$(modprobe -d "$kimg" -S "$KVER" --show-depends "$m" 2>/dev/null); then
      grep -q "/$m.ko" "$kimg/lib/modules/$KVER/modules.builtin" || die "module $m is neither a module nor built in"
      continue
    fi
    for p in $(printf '%s\n' "$deps" | awk '$1 == "insmod" {print $2}'); do
      mkdir -p "$IR$(dirname "${p#"$kimg"}")"
      cp "$p" "$IR${p#"$kimg"}"
    done
  done
  cp "$kimg/lib/modules/$KVER"/modules.{builtin,builtin.modinfo,order} "$IR/lib/modules/$KVER/"
  depmod -b "$IR" "$KVER"
  mkdir -p "$IR/lib/modules/siw-knobs"
  cp "$KDIR/knobs/siw.ko" "$IR/lib/modules/siw-knobs/siw.ko"

  cp "$HERE/guest/init" "$IR/init"
  chmod 755 "$IR/init"
  (cd "$IR" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet >"$IMG.tmp/initrd.cpio")
  cp "$kimg/boot/vmlinuz-$KVER" "$IMG.tmp/vmlinuz"
  rm -rf "$IR"
  rm -rf "$IMG" && mv "$IMG.tmp" "$IMG"
  log "initramfs $(du -h "$IMG/initrd.cpio" | cut -f1)"
}

write_env() {
  local tmp=$LAB/current.env.tmp
  {
    echo "# written by interop/siw/build.sh"
    echo "SIW_KVER=$KVER"
    echo "SIW_KPKGVER=$KPKGVER"
    echo "SIW_KERNEL=$IMG/vmlinuz"
    echo "SIW_INITRD=$IMG/initrd.cpio"
    echo "SIW_AGENT=$AGENT"
    echo "SIW_IWTEST=$CPROG"
    echo "SIW_RPMACLIENT=$RPMACLIENT"
    echo "SIW_RPMASERVER=$RPMASERVER"
    echo "SIW_USERROOT=$UROOT"
    echo "SIW_KNOBS=$(IFS=,; echo "${KNOB_BOOLS[*]},mpa_version")"
  } >"$tmp"
  mv "$tmp" "$LAB/current.env"
  echo "$LAB/current.env"
}

main() {
  mkdir -p "$LAB"
  ensure_host_tools
  ensure_apt_lists
  resolve_kernel
  build_kernel
  build_userspace
  build_cprogs
  build_agent
  build_initramfs
  write_env
}

main "$@"
