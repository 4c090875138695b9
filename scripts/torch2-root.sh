#!/usr/bin/env bash
# The torch-2 lane: a Debian sid root (python3-torch / libtorch-dev 2.14, Python 3.14, g++ 16,
# Catch2 v3, cxxopts 3) made with debootstrap, and a way to run commands inside it with this
# repository bind-mounted at the same path.
#
# Usage:
#   scripts/torch2-root.sh setup              create the root if needed (idempotent), then exit
#   scripts/torch2-root.sh run CMD [ARGS...]  create if needed, then run CMD inside the root,
#                                             in the current directory (which must be inside
#                                             the repository or the root's bind mounts)
#   scripts/torch2-root.sh path               print the root's directory
#
# Environment:
#   PT2RT_TORCH2_ROOT    where the root lives (default: ${XDG_CACHE_HOME:-~/.cache}/pt2rt/torch2-sid)
#   PT2RT_DEBIAN_MIRROR  Debian mirror (default: the first URI of this machine's apt sources)
#
# The root is made once (debootstrap --variant=minbase, ~1 min; then the packages below,
# ~4 min, 2.8 GB) and reused; a stamp file records the package list, so a changed list
# installs the difference. Commands run in a private mount namespace (unshare -m): /proc,
# /dev, /sys and the repository are mounted for that command only and vanish with it.
# Needs root (or sudo) for debootstrap, chroot and mounts.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
root=${PT2RT_TORCH2_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/pt2rt/torch2-sid}
PKGS=(python3-torch libtorch-dev python3-torchvision cmake g++ ninja-build ccache
      libflatbuffers-dev flatbuffers-compiler python3-flatbuffers libzip-dev zipcmp zipmerge
      ziptool catch2 libcxxopts-dev nlohmann-json3-dev python3-pytest python3-networkx
      python3-sklearn graphviz
      libgloo-dev  # <gloo/...> headers of c10d's ProcessGroupGloo.hpp; same source version as
                    # the libgloo0 that sid's libtorch2.x links (pt2rt_distributed)
      libopenblas0-openmp)  # Debian's torch links libblas.so.3: without this, the netlib reference
                            # BLAS (libblas3), ~10x slower matmuls in export, tests and runtime

say() { echo "torch2-root: $*" >&2; }
die() { echo "torch2-root: error: $*" >&2; exit 2; }

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || die "needs root (debootstrap, chroot, mount) and sudo is missing"
  SUDO="sudo"
fi

mirror() {
  if [ -n "${PT2RT_DEBIAN_MIRROR:-}" ]; then echo "$PT2RT_DEBIAN_MIRROR"; return; fi
  local uri
  uri=$(grep -hE '^(URIs:|deb )' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null |
        grep -v security | sed -E 's/^URIs:[[:space:]]*//; s/^deb[[:space:]]+(\[[^]]*\][[:space:]]+)?//' |
        awk '{print $1}' | grep -m1 debian || true)
  echo "${uri:-http://deb.debian.org/debian}"
}

# Runs "$@" inside the root with proc/dev/sys and the repository mounted (private namespace).
in_root() {
  local cwd=$PWD
  # Variables passed through to the command: PT2RT_*, CCACHE_*, CTEST_*, CI.
  local pass=() v
  while IFS= read -r v; do pass+=("$v"); done < <(env | grep -E '^(PT2RT_[A-Z0-9_]*|CCACHE_[A-Z_]*|CTEST_[A-Z_]*|CI)=' || true)
  $SUDO unshare -m --propagation private env ROOT="$root" REPO="$repo" CWD="$cwd" PASS_DECL="$(declare -p pass | sed 's/^declare -a pass=/PASS=/')" bash -c '
    set -e
    eval "$PASS_DECL"
    mount -t proc proc "$ROOT/proc"
    mount --rbind /dev "$ROOT/dev"
    mount --rbind /sys "$ROOT/sys" 2>/dev/null || true
    # The private /tmp first, then the repository: a clone under /tmp (/tmp/x) is bound at
    # $ROOT/tmp/x on top of that tmpfs instead of being hidden by it.
    mkdir -p "$ROOT/tmp"
    mount -t tmpfs -o size=8g tmpfs "$ROOT/tmp" 2>/dev/null || true
    mkdir -p "$ROOT$REPO"
    mount --bind "$REPO" "$ROOT$REPO"
    [ -f /etc/resolv.conf ] && cp /etc/resolv.conf "$ROOT/etc/resolv.conf" 2>/dev/null || true
    case "$CWD" in "$REPO"*) dir=$CWD ;; *) dir=$REPO ;; esac
    exec chroot "$ROOT" /usr/bin/env -i HOME=/root TERM="${TERM:-dumb}" LANG=C.UTF-8 \
      PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      CCACHE_DIR=/root/.ccache "${PASS[@]}" \
      /bin/bash -c "cd \"\$0\" && exec \"\$@\"" "$dir" "${@}"
  ' bash "$@"
}

# True when the root's dpkg database lists every package of PKGS as installed.
all_installed() {
  local st
  st=$(dpkg-query --admindir="$root/var/lib/dpkg" -W -f='${Package} ${Status}\n' "${PKGS[@]}" \
       2>/dev/null) || return 1
  [ "$(grep -c ' install ok installed$' <<<"$st")" -eq "${#PKGS[@]}" ]
}

create() {
  local stamp="$root/.pt2rt-packages" want
  want=$(printf '%s\n' "${PKGS[@]}")
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then return; fi
  # A root that already has every package (made by another checkout's list) is reused as is.
  if [ -f "$stamp" ] && all_installed; then return; fi
  $SUDO mkdir -p "$(dirname "$root")" || die "cannot create $(dirname "$root")"
  exec 9>"$(dirname "$root")/.$(basename "$root").lock"
  flock 9
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then return; fi
  local m; m=$(mirror)
  if [ ! -x "$root/usr/bin/apt-get" ]; then
    if ! command -v debootstrap >/dev/null; then
      say "installing debootstrap (Debian package)"
      # scripts/install-deps.sh may hold dpkg's lock (scripts/test.sh runs both at once): wait.
      local lock=(-o DPkg::Lock::Timeout=900)
      DEBIAN_FRONTEND=noninteractive $SUDO apt-get "${lock[@]}" install -y -qq --no-install-recommends \
        debootstrap >/dev/null 2>&1 || { $SUDO apt-get "${lock[@]}" update -qq >/dev/null 2>&1 &&
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get "${lock[@]}" install -y -qq --no-install-recommends \
        debootstrap >/dev/null; } || die "debootstrap is missing and could not be installed"
    fi
    say "probing mirror $m"
    if ! curl -fsS --max-time 30 -o /dev/null "$m/dists/sid/Release" 2>/dev/null &&
       ! wget -q -T 30 -O /dev/null "$m/dists/sid/Release" 2>/dev/null; then
      die "cannot reach the Debian mirror $m (dists/sid/Release); set PT2RT_DEBIAN_MIRROR"
    fi
    say "debootstrap sid into $root (about 1 minute)"
    $SUDO rm -rf "$root.partial"
    $SUDO mkdir -p "$root.partial"
    $SUDO debootstrap --variant=minbase sid "$root.partial" "$m" > "$root.partial.log" 2>&1 ||
      die "debootstrap failed (log: $root.partial.log): $(tail -n 3 "$root.partial.log" | tr '\n' ' ')"
    $SUDO mv "$root.partial" "$root"
    echo "deb $m sid main" | $SUDO tee "$root/etc/apt/sources.list" >/dev/null
  fi
  say "installing torch 2.x and build packages inside the root (about 4 minutes)"
  local log; log=$(mktemp)
  in_root bash -c 'export DEBIAN_FRONTEND=noninteractive;
    apt-get -o Acquire::Check-Valid-Until=false update -qq >/dev/null &&
    apt-get install -y -qq --no-install-recommends "$@" >/dev/null' _ "${PKGS[@]}" 2>"$log" ||
    { local why; why=$(grep -v '^debconf' "$log" | tail -n 3 | tr '\n' ' '); rm -f "$log";
      die "installing the packages inside the root failed (mirror $m): ${why:-no message}"; }
  rm -f "$log"
  echo "$want" | $SUDO tee "$stamp" >/dev/null
  say "ready: $(in_root python3 -c 'import torch, sys; print("torch", torch.__version__, "python", sys.version.split()[0])')"
}

case "${1:-}" in
  setup) create ;;
  path) echo "$root" ;;
  run) shift; [ $# -gt 0 ] || die "run: no command given"; create; in_root "$@" ;;
  *) sed -n '2,20p' "$0" >&2; exit 2 ;;
esac
