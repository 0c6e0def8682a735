#!/usr/bin/env bash
# Builds the iwarp-go/siw-peer Docker image (make siw-image) from the interop
# suite's guest build: one recipe, interop/siw/build.sh, whose cached
# artefacts (current.env) are copied into the image with the siw-peer entry
# point (interop/siw/entrypoint, a static Go binary).
#
# The image is tagged $IMAGE:latest and $IMAGE:<hash of its inputs>. When
# that hash tag exists already, nothing is built; older hash tags are
# removed. No registry is used: when debian:bookworm-slim is not present,
# the base is Debian bookworm from debootstrap, imported once as
# iwarp-go/bookworm-base. Legacy builder (the Debian engine has no buildx),
# --network host (a daemon without a bridge gives build containers no other
# network).
#
# Prints the image's hash tag as its last line. Environment: IWARP_SIW_IMAGE
# (repository, default iwarp-go/siw-peer), DEBIAN_MIRROR (for debootstrap),
# IWARP_CACHE.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
export PATH="/usr/local/go/bin:$HOME/go/bin:$PATH"
IMAGE=${IWARP_SIW_IMAGE:-iwarp-go/siw-peer}
BASE_TAG=iwarp-go/bookworm-base
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
CACHE_ROOT=${IWARP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/iwarp-go}
WORK=$CACHE_ROOT/siw-image
export DOCKER_BUILDKIT=0

# The variables of build.sh's current.env whose files the image holds. The
# guest programs are inside the initramfs, so a new one needs no line here.
IMAGE_FILES=(SIW_KERNEL SIW_INITRD SIW_AGENT)
# Where they go in the image.
DEST=/opt/siw-peer

log() { printf '[siw-image %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf 'image.sh: %s\n' "$*" >&2; exit 1; }
hash_of() { sha256sum | cut -c1-16; }
have_image() { docker image inspect "$1" >/dev/null 2>&1; }

# bootstrap_base imports a minimal Debian bookworm as $BASE_TAG.
bootstrap_base() {
  [ "$(id -u)" = 0 ] || die "debian:bookworm-slim is not present and debootstrap needs root"
  if ! command -v debootstrap >/dev/null 2>&1; then
    log "installing debootstrap"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
  fi
  local root=$WORK/bootstrap.tmp
  rm -rf "$root" && mkdir -p "$root"
  log "debootstrap bookworm (minbase) from $MIRROR"
  debootstrap --variant=minbase bookworm "$root" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 ||
    { tail -n 20 "$WORK/debootstrap.log" >&2; die "debootstrap failed (log: $WORK/debootstrap.log)"; }
  cat >"$root/etc/apt/sources.list" <<SOURCES
deb $MIRROR bookworm main
deb $MIRROR bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
SOURCES
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* \
    "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/locale/*
  log "importing it as $BASE_TAG"
  tar -C "$root" --numeric-owner -c . | docker import --change 'CMD ["/bin/bash"]' - "$BASE_TAG" >/dev/null
  rm -rf "$root"
}

base_image() {
  if have_image debian:bookworm-slim; then
    echo debian:bookworm-slim
    return
  fi
  have_image "$BASE_TAG" || bootstrap_base
  echo "$BASE_TAG"
}

# stage CTX lays out the build context: the Dockerfile, and under $DEST the
# image files, lab.env describing them at their new paths, and siw-peer.
stage() {
  local ctx=$1 env_file=$2 line k v
  mkdir -p "$ctx$DEST"
  cp "$HERE/Dockerfile" "$ctx/Dockerfile"
  : >"$ctx$DEST/lab.env.tmp"
  echo "# written by interop/siw/docker/image.sh from $env_file" >>"$ctx$DEST/lab.env.tmp"
  while IFS= read -r line; do
    case $line in '#'* | '') continue ;; esac
    k=${line%%=*} v=${line#*=}
    if printf '%s\n' "${IMAGE_FILES[@]}" | grep -qx "$k"; then
      [ -f "$v" ] || die "$k=$v: no such file (run interop/siw/build.sh)"
      cp "$v" "$ctx$DEST/$(basename "$v")"
      v=$DEST/$(basename "$v")
    elif [ -e "$v" ]; then
      continue # other cache paths (the userspace tree, iwtest) are not in the image
    fi
    echo "$k=$v" >>"$ctx$DEST/lab.env.tmp"
  done <"$env_file"
  mv "$ctx$DEST/lab.env.tmp" "$ctx$DEST/lab.env"
  (cd "$REPO" && CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath -buildvcs=false -ldflags='-s -w' \
    -o "$ctx$DEST/siw-peer" ./interop/siw/entrypoint) || die "building the siw-peer entry point failed"
}

# prune removes the hash tags of $IMAGE other than $1.
prune() {
  local keep=$1 t
  for t in $(docker image ls --format '{{.Tag}}' "$IMAGE"); do
    [ "$t" = latest ] || [ "$t" = "$keep" ] || [ "$t" = '<none>' ] && continue
    log "removing the old tag $IMAGE:$t"
    docker rmi "$IMAGE:$t" >/dev/null || log "could not remove $IMAGE:$t (a container may still use it)"
  done
}

main() {
  local start
  start=$(date +%s)
  "$HERE/engine.sh"
  local env_file
  env_file=$("$REPO/interop/siw/build.sh" | tail -n1)
  [ -f "$env_file" ] || die "build.sh did not name its current.env"
  mkdir -p "$WORK"
  CTX=$(mktemp -d "$WORK/ctx.XXXXXX")
  trap 'rm -rf "$CTX"' EXIT
  stage "$CTX" "$env_file"
  local base base_id qemu tag
  base=$(base_image)
  base_id=$(docker image inspect -f '{{.Id}}' "$base")
  # The QEMU the image would install, as far as this host's apt lists know.
  qemu=$(apt-cache policy qemu-system-x86 2>/dev/null | awk '/Candidate:/{print $2; exit}' || true)
  tag=$( (cd "$CTX" && find . -type f | LC_ALL=C sort | xargs sha256sum; echo "$base_id" "$qemu") | hash_of)
  if have_image "$IMAGE:$tag"; then
    log "$IMAGE:$tag is present; nothing to build"
    docker tag "$IMAGE:$tag" "$IMAGE:latest"
  else
    log "building $IMAGE:$tag from $base"
    docker build --network host --force-rm --build-arg "BASE=$base" -t "$IMAGE:$tag" -t "$IMAGE:latest" "$CTX" >"$WORK/build.log" 2>&1 ||
      { tail -n 30 "$WORK/build.log" >&2; die "docker build failed (log: $WORK/build.log)"; }
    local size
    size=$(docker image inspect -f '{{.Size}}' "$IMAGE:$tag")
    log "built $IMAGE:$tag ($((size / 1000000)) MB) in $(($(date +%s) - start)) s"
  fi
  prune "$tag"
  echo "$IMAGE:$tag"
}

main "$@"
