#!/usr/bin/env bash
# sim_port.sh — sourced inside `rigs/ibsim_rig.sh -- CMD`: makes a fixture
# root's HCA port be a simulated node's port.
#
#   attach_sim_port ROOT [DEV] [SIM_HOST]      (default mlx5_0, node2)
#
# Writes the node's GUID, LID and SM LID (from the rig's RIG_* variables) into
# ROOT/sys/class/infiniband/DEV, and makes ROOT/bin/smpquery the real smpquery
# through rigs/smpquery-sim. qoslane runs it with an environment of its own, so
# the wrapper reads ROOT/bin/smpquery.env for the rig's socket and preload.
attach_sim_port() {
  local r=$1 dev=${2:-mlx5_0} host=${3:-node2}
  local here p
  here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
  p=$r/sys/class/infiniband/$dev
  printf '%s\n' "${RIG_NODE_GUID:?run inside rigs/ibsim_rig.sh -- ...}" |
    sed 's/^0x//; s/\(....\)/\1:/g; s/:$//' > "$p/node_guid"
  printf '0x%x\n' "$RIG_LID" > "$p/ports/1/lid"
  printf '0x%x\n' "$RIG_SM_LID" > "$p/ports/1/sm_lid"
  rm -f "$r/bin/smpquery"
  ln -s "$here/smpquery-sim" "$r/bin/smpquery"
  cat > "$r/bin/smpquery.env" <<ENV
export IBSIM_SOCKNAME=$IBSIM_SOCKNAME RIG_UMAD2SIM=$RIG_UMAD2SIM RIG_WORK=$RIG_WORK RIG_CA=$RIG_CA
export SMPQUERY_SIM_HOSTS=$dev=$host
ENV
}
