#!/bin/bash
# net_info_nets: `zinc-info nets` lists every built-in net, the ones without a device with the
# reason, and says why IB is not used exactly once at INFO level; libnccl-net-zinc.so exports
# the IB net when it has a usable port and the socket net otherwise (ZINC_NET forces one).
# Usage: nets_info.sh ZINC_INFO PLUGIN_DIR [IBEMU_LIBRARY]   (no emulation: only the first part)
set -uo pipefail
info=$1 plugindir=$2 emu=${3:-}
export ZINC_IBEMU_FABRIC=netsinfo-$$ NCCL_NET_PLUGIN=none
trap 'rm -f /dev/shm/zinc-ibemu-netsinfo-$$ /dev/shm/zinc-ibemu-netsinfo-$$-*' EXIT
fail=0
# expect WHAT PATTERN ENV...: run zinc-info nets in ENV, its output must match PATTERN.
expect() {
    local what=$1 pat=$2
    shift 2
    out=$(env "$@" "$info" nets 2>&1)
    if [ $? != 0 ] || ! grep -qE "$pat" <<<"$out"; then
        echo "FAIL: $what: no line matching /$pat/ in:"
        echo "$out"
        fail=1
    else
        echo "ok: $what"
    fi
}

# Without the emulation (Debian's libibverbs or none, and no RDMA device here): IB is listed
# with the reason, the socket net is used, and the reason is logged once.
noemu=(ZINC_IBVERBS_LIB=)
expect "IB listed with why it is not used" "^  IB +built in, not used: .+" "${noemu[@]}"
expect "socket used" "^  Socket +built in, [1-9][0-9]* device" "${noemu[@]}"
n=$(env "${noemu[@]}" ZINC_DEBUG=INFO "$info" nets 2>&1 | grep -c "IB not used: ")
[ "$n" = 1 ] || { echo "FAIL: the reason IB is not used is logged $n times, not once"; fail=1; }
n=$(env "${noemu[@]}" ZINC_DEBUG=WARN "$info" nets 2>&1 | grep -c "WARN")
[ "$n" = 0 ] || { echo "FAIL: $n warnings without an RDMA device"; fail=1; }
[ -n "$emu" ] || exit $fail

# With the emulation: IB has its device; a port that is down is the reason it is not used.
withemu=(ZINC_IBVERBS_LIB=$emu)
down=(ZINC_IBVERBS_LIB=$emu ZINC_IBEMU_DEVICES=mlx5_0:ib:1:down)
expect "IB with a device" "^  IB +built in, 1 device" "${withemu[@]}"
expect "IB device listed" "^    dev 0: mlx5_0, " "${withemu[@]}"
expect "IB port down" "^  IB +built in, not used: 1 RDMA device\(s\) but no active port" "${down[@]}"
expect "HCA filter named" "^  IB +built in, not used: .*ZINC_IB_HCA=mlx9" "${withemu[@]}" \
    ZINC_IB_HCA=mlx9

# The plugin: IB when it has a usable port, else socket; ZINC_NET forces one.
plug=(NCCL_NET_PLUGIN=zinc LD_LIBRARY_PATH=$plugindir)
expect "plugin exports IB" "^  IB +plugin, ncclNetPlugin_v12, 1 device" "${plug[@]}" "${withemu[@]}"
expect "plugin exports socket (port down)" "^  Socket +plugin, ncclNetPlugin_v12" "${plug[@]}" \
    "${down[@]}"
expect "plugin exports socket (no emulation)" "^  Socket +plugin, ncclNetPlugin_v12" \
    "${plug[@]}" "${noemu[@]}"
expect "plugin exports socket (ZINC_NET=Socket)" "^  Socket +plugin, ncclNetPlugin_v12" \
    "${plug[@]}" "${withemu[@]}" ZINC_NET=Socket
expect "plugin's v8 table named IB" "^  IB +plugin, ncclNetPlugin_v8" "${plug[@]}" \
    "${withemu[@]}" ZINC_NET_PLUGIN_VERSION=8
expect "plugin's forced IB fails init" "^  IB +plugin, not used: init failed" "${plug[@]}" \
    "${down[@]}" ZINC_NET=IB
exit $fail
