#!/usr/bin/env bash
# Builds the Debian package of the gateway with plain dpkg-deb (no cargo-deb, no debhelper):
#
#   packaging/deb/build.sh                    # the profile-guided build (loadtests/bench/pgo.sh),
#                                             # then package it
#   PGO=0 packaging/deb/build.sh              # a plain cargo build --release -p gateway instead
#   GATEWAY_BIN=path/to/gateway packaging/deb/build.sh   # package an existing binary
#
# Output: target/debian/gateway_<version>_<arch>.deb (DEB_OUT_DIR overrides the directory).
# Other overrides: VERSION (default: [workspace.package] version in Cargo.toml), ARCH (default:
# dpkg --print-architecture, else from uname -m), DEB_COMPRESSION (dpkg-deb -Z: xz by default;
# the tests use gzip, much faster than xz on a debug binary). Prints the path of the .deb on its
# last line.
#
# Contents:
#   /usr/bin/gateway
#   /lib/systemd/system/gateway.service
#   /etc/gateway/gateway.toml                 conffile, from packaging/examples/quickstart.toml
#   /etc/logrotate.d/gateway                  conffile, from packaging/deb/logrotate
#   /usr/share/doc/gateway/                   README.md, docs/*.md, README.systemd.md, copyright,
#                                             tuning.conf.example, examples/full.toml + tls/
#   DEBIAN/{control,conffiles,postinst,prerm,postrm}
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
here="$root/packaging/deb"
target_dir="${CARGO_TARGET_DIR:-$root/target}"
out_dir="${DEB_OUT_DIR:-$root/target/debian}"

die() { echo "build.sh: $*" >&2; exit 1; }
command -v dpkg-deb >/dev/null || die "dpkg-deb not found (apt-get install dpkg)"

# --- the binary ----------------------------------------------------------------------------------
if [ -n "${GATEWAY_BIN:-}" ]; then
    bin="$GATEWAY_BIN"
elif [ "${PGO:-1}" = 1 ]; then
    # What ships is the profile-guided build: about a fifth fewer instructions per request than
    # the plain one (docs/performance.md). Its training needs h2load and openssl (installed from
    # Debian as root) and llvm-profdata (rustup's llvm-tools, or Debian's llvm-<major>).
    bin="$("$root/loadtests/bench/pgo.sh" | tail -n1)"
else
    (cd "$root" && cargo build --release -p gateway)
    bin="$target_dir/release/gateway"
fi
[ -x "$bin" ] || die "no executable gateway binary at $bin"

# --- version and architecture --------------------------------------------------------------------
if [ -z "${VERSION:-}" ]; then
    VERSION="$(sed -n '/^\[workspace.package\]/,/^\[/{s/^version *= *"\([^"]*\)".*/\1/p}' "$root/Cargo.toml" | head -n1)"
fi
[ -n "$VERSION" ] || die "cannot read the version from Cargo.toml (set VERSION)"
if bin_version="$("$bin" --version 2>/dev/null)"; then
    [ "$bin_version" = "gateway $VERSION" ] || die "binary says '$bin_version', package version is $VERSION"
fi
if [ -z "${ARCH:-}" ]; then
    if command -v dpkg >/dev/null; then
        ARCH="$(dpkg --print-architecture)"
    else
        case "$(uname -m)" in
            x86_64) ARCH=amd64 ;;
            aarch64) ARCH=arm64 ;;
            *) die "unknown architecture $(uname -m) (set ARCH)" ;;
        esac
    fi
fi

# --- runtime dependencies: only what the binary links ---------------------------------------------
# The newest GLIBC_x.y symbol version the binary references is the libc6 it needs.
glibc="$(grep -ao 'GLIBC_[0-9][0-9.]*' "$bin" | sed 's/GLIBC_//' | sort -uV | tail -n1 || true)"
depends="libc6${glibc:+ (>= $glibc)}"
if command -v ldd >/dev/null && ldd "$bin" >/dev/null 2>&1; then
    while read -r lib; do
        case "$lib" in
            linux-vdso.so.* | ld-linux*.so.* | libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.*) ;;
            libgcc_s.so.*) depends="$depends, libgcc-s1" ;;
            *) die "the binary links $lib: add its package to Depends in build.sh" ;;
        esac
    done < <(ldd "$bin" | awk '{print $1}' | xargs -n1 basename)
else
    depends="$depends, libgcc-s1" # cannot inspect (cross build): Rust binaries link libgcc_s for unwinding
fi
# postinst creates the system user with adduser, or useradd (passwd) where adduser is missing.
depends="$depends, adduser | passwd"

# --- the tree ------------------------------------------------------------------------------------
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
pkg="$stage/gateway_${VERSION}_${ARCH}"
install -d -m 0755 "$pkg/DEBIAN" "$pkg/usr/bin" "$pkg/lib/systemd/system" "$pkg/etc/gateway" \
    "$pkg/etc/logrotate.d" "$pkg/usr/share/doc/gateway/examples/tls"
install -m 0755 "$bin" "$pkg/usr/bin/gateway"
# Debug info stays out of the package (the release profile keeps line tables for profiling).
if command -v strip >/dev/null; then
    strip --strip-debug "$pkg/usr/bin/gateway" 2>/dev/null || echo "build.sh: warning: cannot strip $bin" >&2
fi
install -m 0644 "$root/systemd/gateway.service" "$pkg/lib/systemd/system/gateway.service"
install -m 0644 "$root/packaging/examples/quickstart.toml" "$pkg/etc/gateway/gateway.toml"
install -m 0644 "$here/logrotate" "$pkg/etc/logrotate.d/gateway"
# Binary upgrades without downtime under systemd: the unit's RuntimeDirectory holds the socket.
sed -i 's|^\[server\]$|[server]\n# Binary upgrade handover socket (SIGUSR2; see docs/operations.md "Binary upgrade without downtime").\nupgrade_socket = "/run/gateway/upgrade.sock"|' "$pkg/etc/gateway/gateway.toml"
grep -q '^upgrade_socket = ' "$pkg/etc/gateway/gateway.toml"
doc="$pkg/usr/share/doc/gateway"
install -m 0644 "$root/README.md" "$doc/README.md"
# The README is a front page: the reference it links to is docs/*.md.
install -d -m 0755 "$doc/docs"
install -m 0644 "$root/docs/"*.md "$doc/docs/"
install -m 0644 "$root/systemd/README.md" "$doc/README.systemd.md"
install -m 0644 "$root/systemd/gateway.service.d/tuning.conf.example" "$doc/tuning.conf.example"
install -m 0644 "$here/copyright" "$doc/copyright"
install -m 0644 "$root/packaging/examples/full.toml" "$doc/examples/full.toml"
install -m 0644 "$root/packaging/examples/tls/"* "$doc/examples/tls/"

install -m 0644 "$here/conffiles" "$pkg/DEBIAN/conffiles"
for script in postinst prerm postrm; do
    sh -n "$here/$script" || die "$script: syntax error"
    install -m 0755 "$here/$script" "$pkg/DEBIAN/$script"
done
installed_size="$(du -sk --exclude=DEBIAN "$pkg" | cut -f1)"
cat > "$pkg/DEBIAN/control" <<CONTROL
Package: gateway
Version: $VERSION
Architecture: $ARCH
Maintainer: gateway maintainers <gateway@localhost>
Installed-Size: $installed_size
Depends: $depends
Section: httpd
Priority: optional
Description: thread-per-core io_uring edge HTTP gateway
 An HTTP ingress gateway for bare-metal edge hosts: one pinned io_uring event
 loop per core, strict HTTP/1.1, HTTP/2 and TLS termination, atomic config
 reload, Prometheus metrics. Runs as the systemd service gateway.service with
 its configuration in /etc/gateway/gateway.toml.
CONTROL

mkdir -p "$out_dir"
deb="$out_dir/gateway_${VERSION}_${ARCH}.deb"
dpkg-deb --root-owner-group -Z"${DEB_COMPRESSION:-xz}" --build "$pkg" "$deb" >&2
echo "$deb"
