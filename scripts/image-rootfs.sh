#!/usr/bin/env bash
# Assembles the runtime file system of the turnstile image in DEST: the binary, exactly the shared
# libraries `ldd` lists for it (with the dynamic loader), CA certificates, /etc/passwd and
# /etc/group entries for the fixed non-root user, a minimal nsswitch.conf, /tmp, and the example
# configuration as a default, and what scanners read: the dpkg entries of the Debian packages those
# files come from (/var/lib/dpkg/status.d/, as distroless images have them), /etc/os-release and a
# CycloneDX SBOM (/usr/share/turnstile/sbom/turnstile.cdx.json). No shell, no package manager.
#
# Used twice, so that what is checked is what ships:
#   - by the Containerfile's builder stage (`scripts/image-rootfs.sh target/release/turnstile /rootfs`),
#     whose result the runtime stage copies onto its base image (default: scratch);
#   - by scripts/check-image.sh, on the host-built release binary, to prove the runtime stage here.
#
# Usage: scripts/image-rootfs.sh BINARY DEST [REPO_ROOT]
set -euo pipefail

binary=${1:?usage: image-rootfs.sh BINARY DEST [REPO_ROOT]}
dest=${2:?usage: image-rootfs.sh BINARY DEST [REPO_ROOT]}
repo=${3:-$(cd "$(dirname "$0")/.." && pwd)}
uid=${TURNSTILE_UID:-10001}

die() { echo "image-rootfs: $*" >&2; exit 1; }
[[ -x "$binary" ]] || die "$binary is not an executable file"
command -v ldd >/dev/null || die "ldd not found (it comes with libc-bin)"
[[ -f /etc/ssl/certs/ca-certificates.crt ]] \
  || die "/etc/ssl/certs/ca-certificates.crt not found (install ca-certificates)"

rm -rf "$dest"
mkdir -p "$dest"
dest=$(cd "$dest" && pwd)

# Merged /usr, like Debian 12 itself: /lib and /lib64 are links into /usr.
mkdir -p "$dest/usr/lib" "$dest/usr/lib64" "$dest/usr/local/bin"
ln -s usr/lib "$dest/lib"
ln -s usr/lib64 "$dest/lib64"

# The binary; debug info is dropped (symbols stay, so panics still name functions).
install -m 0755 "$binary" "$dest/usr/local/bin/turnstile"
if command -v strip >/dev/null; then
  strip --strip-debug "$dest/usr/local/bin/turnstile"
fi

# Every shared library the dynamic loader resolves for it, and the loader itself, each at the
# canonical (merged-/usr) directory of the path ldd printed, under the name ldd printed (the
# soname), with the content of the file it points to.
copy_lib() {
  local path=$1 dir
  [[ -e "$path" ]] || die "ldd names $path, which does not exist"
  dir=$(realpath "$(dirname "$path")")
  mkdir -p "$dest$dir"
  cp -L "$path" "$dest$dir/$(basename "$path")"
  echo "$dir/$(basename "$path")"
}
ldd_out=$(ldd "$binary") || die "ldd failed on $binary (is it a dynamic executable?)"
if grep -q 'not found' <<<"$ldd_out"; then
  die "libraries missing on this system: $(grep 'not found' <<<"$ldd_out" | tr -s ' \t' ' ')"
fi
libs=()
while read -r line; do
  case "$line" in
    *'=>'*/*) libs+=("$(awk '{print $3}' <<<"$line")") ;;  # libssl.so.3 => /lib/... (0x...)
    /*) libs+=("$(awk '{print $1}' <<<"$line")") ;;         # /lib64/ld-linux-x86-64.so.2 (0x...)
    *) ;;                                                    # linux-vdso.so.1: in the kernel
  esac
done <<<"$ldd_out"
[[ ${#libs[@]} -gt 0 ]] || die "ldd listed no libraries for $binary"
mkdir -p "$dest/usr/share/turnstile"
for lib in "${libs[@]}"; do
  copy_lib "$lib"
done >"$dest/usr/share/turnstile/libraries.txt"  # what was copied, for the record

# The loader's cache, so the libraries are found the way the build system found them.
if command -v ldconfig >/dev/null; then
  mkdir -p "$dest/etc"
  printf '%s\n' /usr/local/lib /usr/lib/x86_64-linux-gnu /usr/lib/aarch64-linux-gnu \
    >"$dest/etc/ld.so.conf"
  ldconfig -r "$dest" 2>/dev/null || true
fi

# CA certificates at Debian's paths; OpenSSL's compiled-in defaults (/usr/lib/ssl/cert.pem,
# /usr/lib/ssl/certs) point there, and the image also sets SSL_CERT_FILE.
mkdir -p "$dest/etc/ssl/certs" "$dest/usr/lib/ssl"
cp -L /etc/ssl/certs/ca-certificates.crt "$dest/etc/ssl/certs/ca-certificates.crt"
ln -s /etc/ssl/certs/ca-certificates.crt "$dest/usr/lib/ssl/cert.pem"
ln -s /etc/ssl/certs "$dest/usr/lib/ssl/certs"

# The package database scanners read (Trivy, Grype/Syft), as distroless images carry it: for each
# Debian package a shipped file comes from, its dpkg status entry in
# /var/lib/dpkg/status.d/<package> (with the md5sums of the files shipped from it in
# <package>.md5sums), its copyright file, and the OS identification (/etc/os-release,
# /etc/debian_version) without which scanners do not look up OS packages at all. The entries come
# from the dpkg database of the system the libraries were copied from, so they name exactly the
# versions copied (libssl3 for libssl.so.3 / libcrypto.so.3: OpenSSL).
command -v dpkg-query >/dev/null \
  || die "dpkg-query not found: the libraries must come from a Debian-based build stage (rust:*-bookworm) so that their packages can be recorded"
owner_of() {  # the package:arch that installed PATH (dpkg records /lib/... or /usr/lib/... paths)
  local path=$1 cand out
  for cand in "$path" "$(realpath -s "$path")" "$(realpath "$(dirname "$path")")/$(basename "$path")" \
    "${path/#\/usr\/lib\//\/lib\/}" "${path/#\/lib\//\/usr\/lib\/}" \
    "${path/#\/usr\/lib64\//\/lib64\/}" "${path/#\/lib64\//\/usr\/lib64\/}"; do
    if out=$(dpkg-query -S "$cand" 2>/dev/null); then
      sed -n 's/^\([^ ,:]*\(:[^ ,:]*\)\{0,1\}\): .*/\1/p' <<<"$out" | head -1
      echo "$cand"
      return 0
    fi
  done
  return 1
}
declare -A pkg_files=()
for lib in "${libs[@]}"; do
  found=$(owner_of "$lib") || die "no Debian package owns $lib (dpkg-query -S): install the library from a Debian package in the build stage, or scanners cannot see it"
  pkg=$(head -1 <<<"$found")
  [[ -n "$pkg" ]] || die "cannot parse dpkg-query -S output for $lib"
  pkg_files[$pkg]+="$(tail -1 <<<"$found") "
done
# The CA bundle is generated from the ca-certificates package by update-ca-certificates.
if ca_pkg=$(dpkg-query -W -f='${Package}\n' ca-certificates 2>/dev/null) && [[ -n "$ca_pkg" ]]; then
  pkg_files[$ca_pkg]+=""
else
  die "the ca-certificates package is not installed (apt-get install ca-certificates)"
fi
mkdir -p "$dest/var/lib/dpkg/status.d"
for pkg in "${!pkg_files[@]}"; do
  name=${pkg%%:*}
  dpkg-query -s "$pkg" >"$dest/var/lib/dpkg/status.d/$name" || die "dpkg-query -s $pkg failed"
  grep -q '^Status: install ok installed$' "$dest/var/lib/dpkg/status.d/$name" \
    || die "$pkg is not fully installed (dpkg status: $(grep '^Status:' "$dest/var/lib/dpkg/status.d/$name"))"
  sums=""
  for f in /var/lib/dpkg/info/"$pkg".md5sums /var/lib/dpkg/info/"$name".md5sums; do
    [[ -f "$f" ]] && { sums=$f; break; }
  done
  if [[ -n "$sums" && -n "${pkg_files[$pkg]}" ]]; then
    for f in ${pkg_files[$pkg]}; do
      grep -F "  ${f#/}" "$sums" | awk -v p="${f#/}" '$2 == p' || true
    done >"$dest/var/lib/dpkg/status.d/$name.md5sums"
    [[ -s "$dest/var/lib/dpkg/status.d/$name.md5sums" ]] || rm -f "$dest/var/lib/dpkg/status.d/$name.md5sums"
  fi
  if [[ -f "/usr/share/doc/$name/copyright" ]]; then
    mkdir -p "$dest/usr/share/doc/$name"
    cp -L "/usr/share/doc/$name/copyright" "$dest/usr/share/doc/$name/copyright"
  fi
done
os_release=/usr/lib/os-release
[[ -f $os_release ]] || os_release=/etc/os-release
[[ -f $os_release ]] || die "no /etc/os-release on the build system: scanners need it to identify the distribution"
mkdir -p "$dest/etc" "$dest/usr/lib"
cp -L "$os_release" "$dest/usr/lib/os-release"
ln -s ../usr/lib/os-release "$dest/etc/os-release"
if [[ -f /etc/debian_version ]]; then cp -L /etc/debian_version "$dest/etc/debian_version"; fi
for pkg in "${!pkg_files[@]}"; do echo "${pkg%%:*} $(dpkg-query -W -f='${Version}' "$pkg")"; done | sort \
  >"$dest/usr/share/turnstile/packages.txt"  # what the package database holds, for the record

# Users: root and the fixed non-root user the image runs as (no login shell exists).
mkdir -p "$dest/etc"
cat >"$dest/etc/passwd" <<EOF
root:x:0:0:root:/root:/usr/sbin/nologin
turnstile:x:$uid:$uid:turnstile:/nonexistent:/usr/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin
EOF
cat >"$dest/etc/group" <<EOF
root:x:0:
turnstile:x:$uid:
nogroup:x:65534:
EOF
cat >"$dest/etc/nsswitch.conf" <<'EOF'
passwd: files
group: files
hosts: files dns
EOF

# Writable places: /tmp, and the embeddings cache (Kubernetes mounts emptyDirs over both).
mkdir -p "$dest/tmp" "$dest/var/cache/turnstile"
chmod 1777 "$dest/tmp"

# The example configuration, as a default only (mount your own over /etc/turnstile or point
# TURNSTILE_CONFIG / TURNSTILE_PROFILES elsewhere). The working directory of the image is
# /usr/share/turnstile, so the CLI's relative defaults (config/agents.example.yaml,
# config/profiles.example.yaml) resolve here.
mkdir -p "$dest/usr/share/turnstile/config"
for f in agents.example.yaml profiles.example.yaml profiles.embeddings.yaml; do
  install -m 0644 "$repo/config/$f" "$dest/usr/share/turnstile/config/$f"
done

# The image's SBOM (CycloneDX 1.5): the Debian packages of the package database above, the crates
# compiled into the binary and the librdkafka it bundles (scripts/sbom.py image; it reads
# `cargo metadata --locked` of REPO_ROOT). Trivy and Syft also read *.cdx.json files in an image.
command -v python3 >/dev/null || die "python3 not found: scripts/sbom.py writes the image's SBOM (rust:*-bookworm has it)"
python3 "$repo/scripts/sbom.py" --manifest-path "$repo/Cargo.toml" image --rootfs "$dest" \
  --output "$dest/usr/share/turnstile/sbom/turnstile.cdx.json" >&2 \
  || die "scripts/sbom.py image failed (above)"

echo "image-rootfs: $dest ($(du -sh "$dest" | cut -f1)): turnstile + ${#libs[@]} libraries from $(wc -l <"$dest/usr/share/turnstile/packages.txt") Debian packages ($(tr '\n' ' ' <"$dest/usr/share/turnstile/packages.txt"| sed 's/ $//'))"
