#!/usr/bin/env bash
# Proves the runtime stage of the Containerfile on this machine, where no registry image can be
# pulled (so the builder stage, FROM rust:1.85-bookworm, cannot run here):
#
#  1. assembles the image's file system from the host-built release binary with the same script
#     the Containerfile's builder stage runs (scripts/image-rootfs.sh: the binary, the libraries
#     ldd lists, CA certificates, passwd/group for UID 10001, the example configuration);
#  2. runs the binary inside that file system alone (chroot, as UID 10001, empty environment):
#     --help, check-config on both example profile files, migrate against a closed port (exit 69:
#     the async runtime and the CQL driver start) — this proves the library set is complete;
#  3. with buildah installed: builds the Containerfile's real runtime stage on `scratch`, with
#     the builder stage replaced by that file system (`--build-context builder=DIR`), checks the
#     image config (USER 10001:10001, ENTRYPOINT, CMD, WORKDIR), then runs the image with
#     `buildah run --isolation chroot` (no OCI runtime needed: crun refuses this sandbox's hybrid
#     cgroups): --help, check-config with the image's own relative defaults, and `turnstile run`
#     long enough to see /healthz 200, /readyz 503 (no store), /metrics, and the process's UID
#     10001 with no capabilities. Without buildah this step is skipped with a message.
#  Between 2 and 3: TLS trust — an HTTPS model call (turnstile classify) to a local server whose
#  certificate comes from a throw-away CA fails verification, and succeeds once that CA is in the
#  image's /etc/ssl/certs/ca-certificates.crt.
#
# With --with-services, also runs the image against the local Kafka and Cassandra
# (scripts/services.sh) on topics, keyspace and group of its own: migrate, /readyz 200, one turn
# in and its reply out, SIGTERM and exit 0.
#
# Needs root (chroot, buildah's storage). Caches under .cache/image/ (git-ignored); buildah's
# storage is kept there too, not in the system's /var/lib/containers. Takes a few seconds when
# the release binary exists; builds it (cargo build --release --locked --bin turnstile) if not.
# Not run by CI (.ci/run): it needs root and buildah, and proves the image, not the code.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
cache="$repo/.cache/image"
context="$cache/context"
rootfs="$context/rootfs"
binary="$repo/target/release/turnstile"
uid=10001
tag=localhost/turnstile:check-image

step() { echo "== $*"; }
fail() { echo "check-image: FAIL: $*" >&2; exit 1; }
ok() { echo "   ok: $*"; }

[[ $(id -u) -eq 0 ]] || fail "needs root (chroot and buildah storage); run it as root"
chroot_bin=$(command -v chroot || echo /usr/sbin/chroot)
[[ -x "$chroot_bin" ]] || fail "chroot not found (coreutils)"

bah() { buildah --root "$cache/storage" --runroot "$cache/run" --storage-driver vfs "$@"; }
ctr=""
run_pid=""
tls_pid=""
cleanup() {
  local pid
  for pid in "$run_pid" "$tls_pid"; do
    if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then kill "$pid" 2>/dev/null || true; fi
  done
  if [[ -n "$ctr" ]]; then bah rm "$ctr" >/dev/null 2>&1 || true; fi
  if command -v buildah >/dev/null; then bah rmi -f "$tag" >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT

step "release binary"
if [[ ! -x "$binary" ]]; then
  cargo build --release --locked --bin turnstile
fi
ok "$binary"

step "runtime file system (scripts/image-rootfs.sh)"
mkdir -p "$context"
bash scripts/image-rootfs.sh "$binary" "$rootfs" "$repo"
sed 's/^/   lib: /' "$rootfs/usr/share/turnstile/libraries.txt"

# Runs the image's binary inside the rootfs as the image user, with nothing from the host.
in_rootfs() { env -i "$chroot_bin" --userspec=$uid:$uid "$rootfs" /usr/local/bin/turnstile "$@"; }

step "what scanners read: package database, os-release, SBOM"
check_scanner_view() {  # ROOTFS: independent of how image-rootfs.sh wrote them
  local root=$1 lib path pkg name want got status sums md5 n=0 ssl_pkg="" ssl_ver=""
  grep -q '^ID=debian$' "$root/etc/os-release" 2>/dev/null \
    || fail "$root/etc/os-release is missing or not Debian's (scanners cannot identify the OS)"
  [[ -s "$root/etc/debian_version" ]] || fail "$root/etc/debian_version is missing"
  while read -r lib; do
    # The package the host's dpkg says owns the library's ldd path (under /lib or /usr/lib).
    pkg=""
    for path in "$lib" "${lib/#\/usr\/lib\//\/lib\/}" "${lib/#\/lib\//\/usr\/lib\/}" \
      "${lib/#\/usr\/lib64\//\/lib64\/}"; do
      pkg=$(dpkg-query -S "$path" 2>/dev/null | head -1 | sed 's/: .*//') && [[ -n "$pkg" ]] && break
    done
    [[ -n "$pkg" ]] || fail "no Debian package owns $lib on this system (dpkg-query -S)"
    name=${pkg%%:*}
    want=$(dpkg-query -W -f='${Version}' "$pkg")
    status="$root/var/lib/dpkg/status.d/$name"
    [[ -f "$status" ]] || fail "$lib comes from $pkg $want, but $status is missing: scanners cannot see it"
    got=$(sed -n 's/^Version: //p' "$status")
    [[ "$got" == "$want" ]] || fail "$status says version '$got', the copied $lib is from $pkg $want"
    grep -q '^Status: install ok installed$' "$status" || fail "$status is not 'install ok installed'"
    # The bytes shipped are that package's: its md5sums entry matches the copied file.
    sums=/var/lib/dpkg/info/$pkg.md5sums
    [[ -f "$sums" ]] || sums=/var/lib/dpkg/info/$name.md5sums
    md5=$(grep -E "  ${path#/}\$" "$sums" 2>/dev/null | awk '{print $1}' | head -1 || true)
    if [[ -n "$md5" ]]; then
      [[ "$(md5sum <"$root$lib" | awk '{print $1}')" == "$md5" ]] \
        || fail "$root$lib differs from $pkg $want's file (md5sums): the recorded version is not what ships"
    fi
    if [[ "$(basename "$lib")" == libssl.so.3 ]]; then ssl_pkg=$name ssl_ver=$want; fi
    n=$((n + 1))
  done <"$root/usr/share/turnstile/libraries.txt"
  [[ -f "$root/var/lib/dpkg/status.d/ca-certificates" ]] || fail "no dpkg entry for ca-certificates"
  # OpenSSL by name: libssl3, built from the openssl source package, at the version copied.
  [[ -n "$ssl_pkg" ]] || fail "libssl.so.3 is not among the copied libraries"
  grep -q '^Source: openssl$' "$root/var/lib/dpkg/status.d/$ssl_pkg" \
    || fail "status.d/$ssl_pkg does not name the openssl source package"
  python3 - "$root/usr/share/turnstile/sbom/turnstile.cdx.json" "$ssl_pkg" "$ssl_ver" <<'EOF' || fail "the image SBOM does not name OpenSSL ($ssl_pkg $ssl_ver)"
import json, sys
doc = json.load(open(sys.argv[1]))
name, version = sys.argv[2], sys.argv[3]
hits = [c for c in doc["components"] if c["name"] == name and c["version"] == version
        and c["purl"].startswith(f"pkg:deb/debian/{name}@")
        and {"name": "turnstile:deb:source", "value": "openssl"} in c.get("properties", [])]
sys.exit(0 if hits else f"no {name} {version} (source openssl) component in {sys.argv[1]}")
EOF
  python3 scripts/sbom.py check-image "$root/usr/share/turnstile/sbom/turnstile.cdx.json" --rootfs "$root" >/dev/null \
    || fail "the image SBOM does not match the package database (scripts/sbom.py check-image)"
  bash scripts/sbom.sh --validate "$root/usr/share/turnstile/sbom/turnstile.cdx.json" >/dev/null \
    || fail "the image SBOM is not valid CycloneDX 1.5 (bash scripts/sbom.sh --validate)"
  echo "   ok: $n libraries each recorded in /var/lib/dpkg/status.d at the version and bytes copied; OpenSSL = $ssl_pkg $ssl_ver (source openssl) in status.d and the SBOM; os-release $(sed -n 's/^PRETTY_NAME=//p' "$root/etc/os-release"); SBOM valid CycloneDX 1.5"
}
check_scanner_view "$rootfs"

step "chroot: the binary runs with only those libraries, as UID $uid"
in_rootfs --help >"$cache/help.txt" || fail "turnstile --help failed in the rootfs"
grep -q '^Usage: turnstile' "$cache/help.txt" || fail "unexpected --help output: $(head -3 "$cache/help.txt")"
ok "turnstile --help"
for profiles in profiles.example.yaml profiles.embeddings.yaml; do
  out=$(in_rootfs check-config --config /usr/share/turnstile/config/agents.example.yaml \
    --profiles /usr/share/turnstile/config/$profiles 2>&1) || fail "check-config ($profiles): $out"
  ok "check-config --profiles $profiles: $out"
done
set +e
out=$(in_rootfs migrate --contact 127.0.0.1:1 2>&1)
rc=$?
set -e
[[ $rc -eq 69 ]] || fail "migrate against a closed port: exit $rc, expected 69: $out"
ok "migrate --contact 127.0.0.1:1 exits 69 (runtime and CQL driver start, store unreachable)"

# TLS trust: the image's OpenSSL must read the CA bundle it carries. A local HTTPS model endpoint
# with a certificate from a throw-away CA: refused by the image as built (verification is on),
# accepted by a copy whose bundle also holds that CA (so the bundle path is the one in use).
if command -v openssl >/dev/null; then
  tls="$cache/tls"
  rm -rf "$tls" && mkdir -p "$tls"
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$tls/ca.key" -out "$tls/ca.crt" -days 1 \
    -subj "/CN=turnstile check-image CA" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -keyout "$tls/srv.key" -out "$tls/srv.csr" -subj "/CN=localhost" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1\n' >"$tls/ext"
  openssl x509 -req -in "$tls/srv.csr" -CA "$tls/ca.crt" -CAkey "$tls/ca.key" -CAcreateserial \
    -out "$tls/srv.crt" -days 1 -extfile "$tls/ext" 2>/dev/null
  tls_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  python3 - "$tls" "$tls_port" <<'EOF_PY' &
import http.server, json, ssl, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        answer = json.dumps({"decision": "CONTINUE", "confidence": 0.99})
        body = json.dumps({"id": "c", "object": "chat.completion", "choices": [{"index": 0,
            "message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}]}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
server = http.server.HTTPServer(("127.0.0.1", int(sys.argv[2])), H)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(f"{sys.argv[1]}/srv.crt", f"{sys.argv[1]}/srv.key")
server.socket = ctx.wrap_socket(server.socket, server_side=True)
server.serve_forever()
EOF_PY
  tls_pid=$!
  sleep 0.5
  classify() {
    env -i "$chroot_bin" --userspec=$uid:$uid "$1" /usr/local/bin/turnstile classify \
      --profiles /usr/share/turnstile/config/profiles.example.yaml \
      --config /usr/share/turnstile/config/agents.example.yaml \
      --base-url "https://127.0.0.1:$tls_port/v1" "hello" 2>&1
  }
  set +e
  refused=$(classify "$rootfs"); refused_rc=$?
  cp -a "$rootfs" "$tls/rootfs"
  cat "$tls/ca.crt" >>"$tls/rootfs/etc/ssl/certs/ca-certificates.crt"
  accepted=$(classify "$tls/rootfs"); accepted_rc=$?
  set -e
  kill "$tls_pid" 2>/dev/null || true
  wait "$tls_pid" 2>/dev/null || true
  tls_pid=""
  rm -rf "$tls/rootfs"
  [[ $refused_rc -eq 3 ]] && grep -q 'certificate verify failed' <<<"$refused" \
    || fail "an unknown CA was not refused (exit $refused_rc): $refused"
  ok "TLS: a certificate from an unknown CA is refused (certificate verify failed)"
  [[ $accepted_rc -eq 0 ]] && grep -q '"fallback":"none"' <<<"$accepted" \
    || fail "with the CA in /etc/ssl/certs/ca-certificates.crt, TLS still failed (exit $accepted_rc): $accepted"
  ok "TLS: with that CA in /etc/ssl/certs/ca-certificates.crt the HTTPS model call succeeds"
else
  echo "   skip: TLS trust check (no openssl command)"
fi

if ! command -v buildah >/dev/null; then
  echo "check-image: SKIP the image build and run: buildah is not installed" \
    "(apt-get install buildah); the rootfs checks above passed"
  exit 0
fi


step "buildah $(buildah --version | awk '{print $3}'): the Containerfile's runtime stage on scratch"
# The OCI labels as scripts/build-image.sh computes them (IMAGE_SOURCE defaults to a placeholder
# here: this clone may have no https origin remote).
mapfile -t label_args < <(IMAGE_SOURCE=${IMAGE_SOURCE:-https://example.invalid/turnstile} \
  bash scripts/build-image.sh --print-build-args) || fail "scripts/build-image.sh --print-build-args"
bah build --quiet --target runtime --build-context "builder=$context" "${label_args[@]}" \
  -f Containerfile -t "$tag" . >"$cache/build.log" 2>&1 \
  || { cat "$cache/build.log" >&2; fail "buildah build of the runtime stage"; }
bah inspect --type image "$tag" >"$cache/image.json"
python3 - "$uid" "$cache/image.json" "${label_args[@]}" <<'EOF' || fail "image config"
import json, re, sys
uid = sys.argv[1]
c = json.load(open(sys.argv[2]))["OCIv1"]["config"]
args = dict(a.split("=", 1) for a in sys.argv[3:] if a != "--build-arg")
labels = c.get("Labels") or {}
oci = "org.opencontainers.image."
want_labels = {oci + "licenses": "Apache-2.0", oci + "version": args["IMAGE_VERSION"],
               oci + "revision": args["IMAGE_REVISION"], oci + "created": args["IMAGE_CREATED"],
               oci + "source": args["IMAGE_SOURCE"]}
bad = {k: (labels.get(k), v) for k, v in want_labels.items() if labels.get(k) != v or not v}
if bad:
    sys.exit(f"OCI labels differ (got, want): {bad}")
if not re.fullmatch(r"[0-9a-f]{40}(-dirty)?", labels[oci + "revision"]):
    sys.exit(f"revision label is not a git commit: {labels[oci + 'revision']}")
print("   ok: OCI labels " + ", ".join(f"{k[len(oci):]}={v}" for k, v in sorted(want_labels.items())))
want = {
    "User": f"{uid}:{uid}",
    "Entrypoint": ["/usr/local/bin/turnstile"],
    "Cmd": ["run"],
    "WorkingDir": "/usr/share/turnstile",
}
bad = {k: (c.get(k), v) for k, v in want.items() if c.get(k) != v}
if bad:
    sys.exit(f"image config differs (got, want): {bad}")
print(f"   ok: image config User={c['User']} Entrypoint={c['Entrypoint']} Cmd={c['Cmd']} "
      f"WorkingDir={c['WorkingDir']} ExposedPorts={sorted(c.get('ExposedPorts', {}))}")
EOF
size=$(bah images --format '{{.Size}}' "$tag" | head -1)
ok "image built: $tag ($size)"

ctr=$(bah from --quiet "$tag")
# The image's own file system (not the context directory) carries what scanners read.
mnt=$(bah mount "$ctr") || fail "buildah mount"
check_scanner_view "$mnt"
bah umount "$ctr" >/dev/null
brun() { bah run --isolation chroot "$@"; }
out=$(brun "$ctr" -- /usr/local/bin/turnstile --help 2>&1) || fail "buildah run turnstile --help: $out"
grep -q '^Usage: turnstile' <<<"$out" || fail "unexpected --help output in the image"
ok "buildah run: turnstile --help"
out=$(brun "$ctr" -- /usr/local/bin/turnstile check-config 2>&1) || fail "check-config in the image: $out"
ok "buildah run: turnstile check-config (WORKDIR defaults): $out"
out=$(brun "$ctr" -- /usr/local/bin/turnstile check-config --profiles config/profiles.embeddings.yaml 2>&1) \
  || fail "check-config --profiles config/profiles.embeddings.yaml in the image: $out"
ok "buildah run: turnstile check-config --profiles config/profiles.embeddings.yaml"

# `turnstile run` binds the operations listener before it connects to the store: with the store
# on a closed port it serves /healthz (200) and /readyz (503) while it retries.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
brun --env "TURNSTILE_LISTEN=127.0.0.1:$port" --env TURNSTILE_CQL_CONTACT=127.0.0.1:1 \
  --env TURNSTILE_MODEL_BASE_URL=http://127.0.0.1:9/v1 \
  "$ctr" -- /usr/local/bin/turnstile run >"$cache/run.log" 2>&1 &
run_pid=$!
code=""
for _ in $(seq 1 50); do
  code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/healthz" || true)
  [[ "$code" == 200 ]] && break
  sleep 0.2
done
[[ "$code" == 200 ]] || { cat "$cache/run.log" >&2; fail "/healthz did not answer 200 (got '$code')"; }
ok "buildah run: turnstile run: /healthz 200"
ready_code=$(curl -s -o "$cache/readyz.json" -w '%{http_code}' "http://127.0.0.1:$port/readyz" || true)
[[ "$ready_code" == 503 ]] || fail "/readyz answered $ready_code without a store, expected 503"
ok "/readyz 503 without a store: $(cat "$cache/readyz.json")"
curl -sf "http://127.0.0.1:$port/metrics" | grep -q '^turnstile_ready 0' || fail "/metrics lacks turnstile_ready 0"
ok "/metrics: turnstile_ready 0"
worker_pid=$(ss -Hltnp "sport = :$port" | grep -o 'pid=[0-9]*' | head -1 | cut -d= -f2)
[[ -n "$worker_pid" ]] || fail "cannot find the process listening on $port"
status=$(grep -E '^(Uid|Gid|CapEff):' "/proc/$worker_pid/status" | tr -s '\t ' ' ')
grep -q "^Uid: $uid $uid $uid $uid" <<<"$status" || fail "worker is not UID $uid: $status"
grep -q '^CapEff: 0000000000000000' <<<"$status" || fail "worker has capabilities: $status"
ok "the worker runs as $(tr '\n' ' ' <<<"$status")"
kill "$worker_pid"
wait "$run_pid" 2>/dev/null || true
run_pid=""

# Optional: the image against the local Kafka and Cassandra of scripts/services.sh, on topics,
# a keyspace and a consumer group of its own (imagecheck.*, turnstile_imagecheck), so nothing
# another run uses is touched: migrate, run until /readyz 200, one turn in and its reply out
# (read_committed), then SIGTERM and a clean exit 0.
if [[ "${1:-}" != "--with-services" ]]; then
  echo "check-image: all checks passed (add --with-services to run the image against the local Kafka and Cassandra)"
  exit 0
fi
step "with services: the image against the local Kafka and Cassandra"
brokers=${KAFKA_BROKERS:-127.0.0.1:9092}
contact=${CQL_CONTACT:-127.0.0.1:9042}
command -v kcat >/dev/null || fail "--with-services needs kcat (apt-get install kcat)"
kcat -b "$brokers" -L -m 5 >/dev/null 2>&1 || fail "no Kafka at $brokers (bash scripts/services.sh up)"
keyspace=turnstile_imagecheck
prefix=imagecheck
out=$(brun "$ctr" -- /usr/local/bin/turnstile migrate --contact "$contact" --keyspace "$keyspace" 2>&1) \
  || fail "migrate in the image: $out"
ok "buildah run: turnstile migrate: $out"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
brun --env "TURNSTILE_LISTEN=127.0.0.1:$port" --env "TURNSTILE_BROKERS=$brokers" \
  --env "TURNSTILE_CQL_CONTACT=$contact" --env "TURNSTILE_KEYSPACE=$keyspace" \
  --env "TURNSTILE_GROUP_ID=turnstile-$prefix" --env "TURNSTILE_INSTANCE_ID=$prefix-0" \
  --env "TURNSTILE_TOPIC_TURNS=$prefix.turns.v1" --env "TURNSTILE_TOPIC_REPLIES=$prefix.replies.v1" \
  --env "TURNSTILE_TOPIC_EVENTS=$prefix.events.v1" --env "TURNSTILE_TOPIC_DEAD_LETTERS=$prefix.dead-letters.v1" \
  --env TURNSTILE_CREATE_TOPICS=true --env TURNSTILE_TOPIC_PARTITIONS=1 \
  --env TURNSTILE_MODEL_BASE_URL=http://127.0.0.1:9/v1 \
  "$ctr" -- /usr/local/bin/turnstile run >"$cache/run-services.log" 2>&1 &
run_pid=$!
code=""
for _ in $(seq 1 120); do
  code=$(curl -s -o "$cache/readyz.json" -w '%{http_code}' "http://127.0.0.1:$port/readyz" || true)
  [[ "$code" == 200 ]] && break
  kill -0 "$run_pid" 2>/dev/null || break
  sleep 0.5
done
[[ "$code" == 200 ]] || { tail -20 "$cache/run-services.log" >&2; fail "/readyz did not answer 200 within 60 s (last: '$code')"; }
ok "/readyz 200: $(cat "$cache/readyz.json")"
session="img-$(date +%s)-$$"
turn="{\"turn_id\":\"u1\",\"tenant_id\":\"t1\",\"agent_id\":\"retail-bot\",\"session_id\":\"$session\",\"text\":\"cancel order PED-1001\"}"
printf '%s\n' "t1/retail-bot/$session|$turn" | kcat -b "$brokers" -P -t "$prefix.turns.v1" -K'|' \
  || fail "producing a turn to $prefix.turns.v1"
reply=""
for _ in $(seq 1 60); do
  reply=$(kcat -b "$brokers" -C -t "$prefix.replies.v1" -o beginning -e -q \
    -X isolation.level=read_committed -f '%k %s\n' 2>/dev/null | grep -F "t1/retail-bot/$session" | head -1 || true)
  [[ -n "$reply" ]] && break
  sleep 0.5
done
[[ -n "$reply" ]] || { tail -20 "$cache/run-services.log" >&2; fail "no reply on $prefix.replies.v1 for session $session"; }
ok "a turn in, its reply out (read_committed): ${reply:0:160}…"
worker_pid=$(ss -Hltnp "sport = :$port" | grep -o 'pid=[0-9]*' | head -1 | cut -d= -f2)
t0=$(date +%s%N)
kill -TERM "$worker_pid"
set +e
wait "$run_pid"
rc=$?
set -e
run_pid=""
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
[[ $rc -eq 0 ]] || { tail -20 "$cache/run-services.log" >&2; fail "turnstile run exited $rc after SIGTERM, expected 0"; }
ok "SIGTERM: drained and exited 0 in $ms ms (the chart's grace period: 30 s, drain budget 8 s)"
echo "check-image: all checks passed, with services"
