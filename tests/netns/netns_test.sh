#!/usr/bin/env bash
# Multi-host test on one machine: every "host" is a network namespace.
#
#   netns_test.sh COLL_CHECK GROUP_CHECK RANKS_PER_HOST [COLL_CHECK_ARGS...]
#
# RANKS_PER_HOST is a comma-separated list, one entry per host: "2,2" is 2 hosts x 2 ranks,
# "2,2,1" is 3 hosts with 5 ranks. Ranks are numbered host by host (host 0 gets ranks 0..n0-1).
#
# zinc's host identity hashes the host name, the boot id and the network namespace inode, so
# ranks in different namespaces are different hosts: they talk over TCP (the net transport over the socket net)
# and ranks in the same namespace over shared memory (shm transport); the collectives use the
# point-to-point algorithms instead of the single-host shared-memory arena.
#
# Topology: a "switch" namespace holds a bridge br0; every host namespace has one veth znv0
# (10.77.<nhosts>.<host+1>/24) whose peer p<host> is a port of br0. Nothing is created in the
# root namespace, so deleting the namespaces removes every link and the bridge.
#
# Steps per run: connectivity check (bash /dev/tcp), a short logged run that proves both
# transports and the host count (ZINC_DEBUG=INFO), then coll_check and group_check.
#
# Needs root (CAP_SYS_ADMIN / CAP_NET_ADMIN): otherwise prints "SKIP: ..." and exits 77.
# NETNS_ENV="VAR=VALUE ..." adds settings to every rank (e.g. NETNS_ENV="ZINC_ALGO=ring").
# NETNS_KEEP_LOGS=1 keeps the log directory.
set -euo pipefail
export LC_ALL=C

usage() {
    echo "usage: $0 COLL_CHECK GROUP_CHECK RANKS_PER_HOST [COLL_CHECK_ARGS...]" >&2
    exit 2
}
(($# >= 3)) || usage
COLL_CHECK=$1
GROUP_CHECK=$2
LAYOUT=$3
shift 3
COLL_ARGS=("$@")
[[ -x $COLL_CHECK && -x $GROUP_CHECK ]] || { echo "FAIL: $COLL_CHECK or $GROUP_CHECK is not executable" >&2; exit 1; }
[[ $LAYOUT =~ ^[1-9][0-9]*(,[1-9][0-9]*)+$ ]] || { echo "FAIL: bad RANKS_PER_HOST '$LAYOUT' (want at least 2 hosts, e.g. 2,2)" >&2; exit 1; }

skip() {
    echo "SKIP: $*"
    exit 77
}

# --- environment checks (the only reasons to skip) --------------------------------------------
(($(id -u) == 0)) || skip "not root (network namespaces need CAP_SYS_ADMIN and CAP_NET_ADMIN)"
command -v ip >/dev/null || skip "iproute2's ip command is not installed"
command -v timeout >/dev/null || skip "coreutils' timeout is not installed"

IFS=, read -r -a PER_HOST <<<"$LAYOUT"
NHOSTS=${#PER_HOST[@]}
NRANKS=0
HOST_FIRST=() # first rank of each host
for n in "${PER_HOST[@]}"; do
    HOST_FIRST+=("$NRANKS")
    NRANKS=$((NRANKS + n))
done
SUBNET=10.77.$NHOSTS
IFNAME=znv0
PREFIX="znt$$"
SW_NS=${PREFIX}sw
HOST_NS=()
for ((h = 0; h < NHOSTS; h++)); do HOST_NS+=("${PREFIX}h$h"); done

TMP=$(mktemp -d "${TMPDIR:-/tmp}/zinc-netns.XXXXXX")
: >"$TMP/empty.conf" # ZINC_CONF_FILE: no ~/.zinc.conf setting leaks in

now_ms() { echo $((${EPOCHREALTIME/./} / 1000)); }
T_START=$(now_ms)
elapsed() { printf '%d.%03d' $((($(now_ms) - $1) / 1000)) $((($(now_ms) - $1) % 1000)); }
log() { echo "[netns $LAYOUT +$(elapsed "$T_START")s] $*"; }

# --- cleanup: runs on every exit ---------------------------------------------------------------
RANK_PIDS=()
KILLER_PID=
CREATED_NS=()
cleanup() {
    local rc=$? p ns
    trap - EXIT INT TERM HUP
    set +e
    [[ -n $KILLER_PID ]] && kill "$KILLER_PID" 2>/dev/null
    # The ranks: each started as `timeout ... ip netns exec NS env ... PROG`; TERM to timeout is
    # passed on to the rank, and anything still inside our namespaces is killed by pid.
    for p in "${RANK_PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for ns in "${CREATED_NS[@]}"; do
        for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null || true; done
    done
    for p in "${RANK_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    # Deleting a host namespace destroys its veth (and the peer port in the switch); deleting the
    # switch namespace destroys the bridge. Delete the links explicitly first all the same.
    for ns in "${CREATED_NS[@]}"; do
        ip -n "$ns" link del "$IFNAME" 2>/dev/null || true
    done
    ip -n "$SW_NS" link del br0 2>/dev/null || true
    for ns in "${CREATED_NS[@]}"; do
        ip netns del "$ns" 2>/dev/null || echo "WARN: cannot delete network namespace $ns" >&2
    done
    if [[ ${NETNS_KEEP_LOGS:-0} == 1 ]]; then
        echo "logs kept in $TMP"
    else
        rm -rf "$TMP"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

fail() {
    echo "FAIL [netns $LAYOUT]: $*" >&2
    exit 1
}

# Namespaces left behind by an earlier run of this script that was killed (SIGKILL cannot be
# trapped): "znt<PID>..." whose PID is gone. Its ranks may still run inside them.
for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
    if [[ $ns =~ ^znt([0-9]+)(sw|h[0-9]+)$ ]] && ! kill -0 "${BASH_REMATCH[1]}" 2>/dev/null; then
        for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null || true; done
        ip netns del "$ns" 2>/dev/null || true
    fi
done

# --- topology ------------------------------------------------------------------------------------
if ! err=$(ip netns add "$SW_NS" 2>&1); then
    skip "cannot create a network namespace (ip netns add: $err)"
fi
CREATED_NS+=("$SW_NS")
# From here on the environment is known to allow namespaces: every failure is a FAIL.
ip -n "$SW_NS" link set lo up || fail "lo up in $SW_NS"
ip -n "$SW_NS" link add br0 type bridge || fail "cannot create a bridge in $SW_NS"
ip -n "$SW_NS" link set br0 up || fail "br0 up"
for ((h = 0; h < NHOSTS; h++)); do
    ns=${HOST_NS[h]}
    ip netns add "$ns" || fail "ip netns add $ns"
    CREATED_NS+=("$ns")
    ip -n "$ns" link set lo up || fail "lo up in $ns"
    ip -n "$SW_NS" link add "p$h" type veth peer name "$IFNAME" netns "$ns" || fail "veth p$h/$IFNAME"
    ip -n "$SW_NS" link set "p$h" master br0 || fail "p$h to br0"
    ip -n "$SW_NS" link set "p$h" up || fail "p$h up"
    ip -n "$ns" addr add "$SUBNET.$((h + 1))/24" dev "$IFNAME" || fail "address on $ns"
    ip -n "$ns" link set "$IFNAME" up || fail "$IFNAME up in $ns"
done
log "created ${CREATED_NS[*]}: $NHOSTS hosts on $SUBNET.0/24, ranks per host: $LAYOUT"

# Connectivity: a TCP connect to a closed port is answered by the target's kernel with a reset
# ("Connection refused"), which proves the path both ways; "No route to host" or a timeout
# means it is broken. Retried for a few seconds while the links come up.
check_path() { # FROM_HOST TO_HOST
    local out i
    for ((i = 0; i < 50; i++)); do
        out=$(ip netns exec "${HOST_NS[$1]}" timeout 3 bash -c \
            "exec 3<>/dev/tcp/$SUBNET.$(($2 + 1))/9" 2>&1) && return 0
        [[ $out == *"Connection refused"* ]] && return 0
        sleep 0.2
    done
    fail "host $1 (${HOST_NS[$1]}) cannot reach host $2 at $SUBNET.$(($2 + 1)): $out"
}
for ((a = 0; a < NHOSTS; a++)); do
    for ((b = 0; b < NHOSTS; b++)); do ((a == b)) || check_path "$a" "$b"; done
done
log "connectivity between all $NHOSTS hosts checked"

# --- running a job ---------------------------------------------------------------------------------
# Every ZINC_/NCCL_ variable of the caller is dropped (ZINC_HOSTID, ZINC_TRANSPORT=socket or
# ZINC_SHM_DISABLE would defeat the test); NETNS_ENV adds settings on purpose.
for v in $(compgen -e); do
    [[ $v == ZINC_* || $v == NCCL_* ]] && unset "$v"
done
read -r -a EXTRA_ENV <<<"${NETNS_ENV:-}"

PORT=29500
# run_job NAME LIMIT_S [VAR=VALUE...] -- PROG ARGS...: start every rank in its host's
# namespace, wait for all; fails if any rank exits non-zero or the job runs past LIMIT_S.
# Output of rank r goes to $TMP/NAME.r.log. Sets JOB_S to the seconds taken.
run_job() {
    local name=$1 limit=$2 envs=() r=0 h l t0 pid rc failed=0 first_fail=
    shift 2
    while [[ $1 != -- ]]; do envs+=("$1"); shift; done
    shift
    PORT=$((PORT + 1)) # a fresh root port per job (no TIME_WAIT surprises)
    local comm_id=$SUBNET.1:$PORT
    declare -A rank_of=()
    RANK_PIDS=()
    t0=$(now_ms)
    for ((h = 0; h < NHOSTS; h++)); do
        for ((l = 0; l < PER_HOST[h]; l++)); do
            timeout -k 5 "$limit" ip netns exec "${HOST_NS[h]}" env \
                ZINC_RANK=$r ZINC_NRANKS=$NRANKS ZINC_LOCAL_RANK=$l ZINC_LOCAL_NRANKS="${PER_HOST[h]}" \
                ZINC_COMM_ID="$comm_id" ZINC_SOCKET_IFNAME="$IFNAME" ZINC_TIMEOUT=60 \
                ZINC_CONF_FILE="$TMP/empty.conf" "${EXTRA_ENV[@]}" "${envs[@]}" \
                "$@" </dev/null >"$TMP/$name.$r.log" 2>&1 &
            RANK_PIDS+=($!)
            rank_of[$!]=$r
            r=$((r + 1))
        done
    done
    local live=("${RANK_PIDS[@]}")
    while ((${#live[@]})); do
        rc=0
        wait -n -p pid "${live[@]}" || rc=$?
        [[ -n ${pid:-} ]] || break
        local keep=()
        for p in "${live[@]}"; do [[ $p == "$pid" ]] || keep+=("$p"); done
        live=("${keep[@]}")
        if ((rc != 0)); then
            failed=1
            if ((rc == 124 || rc == 137)); then
                echo "rank ${rank_of[$pid]} ($name) ran past ${limit}s and was killed" >&2
            elif ((rc > 128)); then
                echo "rank ${rank_of[$pid]} ($name) was killed by signal $((rc - 128))" >&2
            else
                echo "rank ${rank_of[$pid]} ($name) exited with status $rc" >&2
            fi
            if [[ -z $first_fail ]]; then
                first_fail=${rank_of[$pid]}
                # Give the others 15 s to report the failure themselves, then stop whatever
                # still runs inside the host namespaces (only this job's ranks do).
                if ((${#live[@]})); then
                    (
                        trap 'kill $sp 2>/dev/null; exit 0' TERM
                        sleep 15 &
                        sp=$!
                        wait $sp
                        for ns in "${HOST_NS[@]}"; do
                            for p in $(ip netns pids "$ns" 2>/dev/null); do kill -TERM "$p" 2>/dev/null; done
                        done
                    ) &
                    KILLER_PID=$!
                fi
            fi
        fi
        unset pid
    done
    if [[ -n $KILLER_PID ]]; then
        kill "$KILLER_PID" 2>/dev/null || true
        wait "$KILLER_PID" 2>/dev/null || true
        KILLER_PID=
    fi
    RANK_PIDS=()
    JOB_S=$(elapsed "$t0")
    if ((failed)); then
        for ((r = 0; r < NRANKS; r++)); do
            echo "--- $name rank $r (last 30 lines, TUNE lines left out):" >&2
            grep -v " zinc INFO TUNE " "$TMP/$name.$r.log" | tail -n 30 >&2 || true
        done
        fail "$name failed (first failure: rank ${first_fail:-?}) after ${JOB_S}s"
    fi
}

# --- 1. the multi-host path is really taken ----------------------------------------------------
# One call of every collective, logged: both transports, the host count, the interface.
run_job debug 60 ZINC_DEBUG=INFO ZINC_DEBUG_SUBSYS=INIT,TUNE,NET -- \
    "$COLL_CHECK" -t float -o sum -n 1,70001
for ((h = 0, r = 0; h < NHOSTS; h++)); do
    for ((l = 0; l < PER_HOST[h]; l++, r++)); do
        f=$TMP/debug.$r.log
        grep -q "transport shm initialised" "$f" ||
            { cat "$f" >&2; fail "rank $r: no 'transport shm initialised' in its log"; }
        grep -q "transport net initialised" "$f" ||
            { cat "$f" >&2; fail "rank $r: no 'transport net initialised' in its log"; }
        line=$(grep -m1 -E "rank $r/$NRANKS host: [0-9]+ host\(s\)" "$f") ||
            { cat "$f" >&2; fail "rank $r: no 'N host(s)' init line in its log"; }
        [[ $line =~ ([0-9]+)\ host\(s\),\ ([0-9]+)\ local ]] || fail "rank $r: cannot parse: $line"
        ((BASH_REMATCH[1] > 1)) || fail "rank $r: one host only: $line"
        ((BASH_REMATCH[1] == NHOSTS)) || fail "rank $r: expected $NHOSTS hosts: $line"
        ((BASH_REMATCH[2] == PER_HOST[h])) || fail "rank $r: expected ${PER_HOST[h]} local ranks: $line"
        [[ $line == *"no arena"* ]] || fail "rank $r: the single-host shm arena was set up: $line"
        grep -qE "socket net: listening on $SUBNET\.$((h + 1)):[0-9]+ \($IFNAME\)" "$f" ||
            { cat "$f" >&2; fail "rank $r: the socket net does not listen on $SUBNET.$((h + 1)) ($IFNAME)"; }
    done
done
log "debug run ${JOB_S}s: every rank logged 'transport shm initialised', 'transport net initialised', '$NHOSTS host(s)', listening on $IFNAME"
grep -hE "rank 0/$NRANKS host: .* host\(s\)|transport .* initialised|listening on" "$TMP/debug.0.log" | sed 's/^/    /'
echo "    algorithms chosen (rank 0, TUNE):"
grep -oE "zinc INFO TUNE [A-Za-z]+ count [0-9]+ .*: [A-Za-z0-9_]+ \(" "$TMP/debug.0.log" |
    sed -E 's/zinc INFO TUNE ([A-Za-z]+) count ([0-9]+) .*: ([A-Za-z0-9_]+) \(/\1 count \2: \3/' |
    sort -u | paste -sd ';' | sed 's/;/; /g; s/^/      /' || true
# Which peers each rank reached over TCP (all of them must be on other hosts).
for ((h = 0, r = 0; h < NHOSTS; h++)); do
    for ((l = 0; l < PER_HOST[h]; l++, r++)); do
        peers=$(grep -oE "net transport: connected to rank [0-9]+" "$TMP/debug.$r.log" |
            awk '{print $NF}' | sort -n | uniq | paste -sd ,) || true
        echo "    rank $r (host $h) socket peers: ${peers:-none}"
        for p in ${peers//,/ }; do
            ((p < HOST_FIRST[h] || p >= HOST_FIRST[h] + PER_HOST[h])) ||
                fail "rank $r talks to rank $p of its own host over the net transport"
        done
    done
done

# --- 2. every collective, checked -----------------------------------------------------------------
run_job coll 380 -- "$COLL_CHECK" "${COLL_ARGS[@]}"
log "coll_check ${COLL_ARGS[*]:-(full matrix)}: ${JOB_S}s: $(grep -h "coll_check:" "$TMP/coll.0.log" || echo '?')"
grep -qE "checks, 0 failed$" "$TMP/coll.0.log" || fail "coll_check did not report '0 failed': $(cat "$TMP/coll.0.log")"

# --- 3. groups, send/recv, split ----------------------------------------------------------------
run_job group 120 -- "$GROUP_CHECK"
log "group_check: ${JOB_S}s: $(tail -n 1 "$TMP/group.0.log" || true)"

log "PASS: $NHOSTS hosts, $NRANKS ranks"
