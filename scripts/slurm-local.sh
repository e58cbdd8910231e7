#!/usr/bin/env bash
# A SLURM cluster on this machine (slurmctld + slurmd + munge), for `make demo-slurm` and the `slurm` tests:
# scripts/slurm-local.sh start [--nodes N]|stop|status (also `make slurm-local`).
#
# start   installs slurm-wlm and munge with apt when missing (needs root), writes /etc/slurm/slurm.conf
#         (ProctrackType=proctrack/linuxproc, TaskPlugin=task/none, a job completion log that keeps each
#         job's final state: JobCompType=jobcomp/filetxt), starts munged, slurmctld and one slurmd per node
#         unless they run already (no systemd: the daemons directly), and waits until sinfo shows every node
#         idle. Idempotent: a second start only checks; a start whose configuration differs from the one
#         the running cluster has refuses (stop it first).
#         One node (the default): this host, under its own name, with CPUs from nproc.
#         --nodes N (N >= 2; or SLURM_LOCAL_NODES=N): N nodes n1..nN, all on this host (NodeHostname and
#         NodeAddr are this host, each slurmd `-N nK` on its own port), so `srun -N2 hostname` and
#         `sbatch --nodes=2` get 2 nodes from SLURM. The machine's CPUs and 90% of its memory are shared out
#         (CPUs nproc/N each, at least 1), so the cluster offers what the machine has, not N times it.
#         Nodes that cannot see each other: each node's slurmd runs in a PID namespace of its own with its
#         own /proc (`unshare --pid --fork --mount-proc`; a bash that reaps orphans is the namespace's
#         first process, `slurmd -D` under it), so every job step, slurmstepd and task of node nK lives
#         there: `ps`, /proc and psutil on n1 do not show n2's processes and the reverse, and a pid on one
#         node means nothing on another (as on separate machines). A gauntlet that runs in a job's first
#         task (the SLURM launcher) sees only n1's processes: what it learns of n2 it learns through n2's
#         agent (launch/node_agent.py, an srun step there). The host's own namespace, the parent of both,
#         still sees every process (a parent PID namespace sees its children's, under other pids); the
#         file system, the network (one address: this host's; every node's ports are the machine's) and
#         munge are shared. /run/slurmd-nK.pid holds slurmd's pid as this namespace sees it (slurmd's own
#         pid file, in its spool folder, its pid in its namespace); stopping slurmd ends its namespace and
#         everything still in it. The one-node mode keeps one slurmd in this namespace.
# stop    cancels every job of the cluster, waits for the queue to empty, stops the daemons and proves
#         none is left. Idempotent.
# status  the daemons, sinfo and squeue; exit 0 only when the cluster is up and the node is usable.
#
# Settings (environment): SLURM_LOCAL_NODES (default: 1), SLURM_LOCAL_PARTITION (default: local),
# SLURM_LOCAL_TIMEOUT_S (default: 60, the wait for the nodes to become idle, and for the queue to empty on
# stop).
set -euo pipefail

NODES="${SLURM_LOCAL_NODES:-1}"
PARTITION="${SLURM_LOCAL_PARTITION:-local}"
TIMEOUT_S="${SLURM_LOCAL_TIMEOUT_S:-60}"
CONF_DIR=/etc/slurm
CONF="$CONF_DIR/slurm.conf"
LOG_DIR=/var/log/slurm
JOBCOMP_LOG="$LOG_DIR/jobcomp.log"
CTLD_PID=/run/slurmctld.pid
# One slurmd per node name (%n): its pid file, spool folder and log. In the multi-node mode the script
# writes /run/slurmd-%n.pid (the pid this namespace sees) and slurmd its own in its spool folder (its pid
# in its namespace).
SLURMD_PID=/run/slurmd-%n.pid
SLURMD_NS_PID=/var/spool/slurmd/%n/slurmd.pid
SLURMD_BASE_PORT=6820  # the multi-node mode's node K listens on 6820+K (slurmctld: 6817, one slurmd: 6818)
MUNGE_PID=/run/munge/munged.pid
NODE="$(hostname -s)"

say() { echo "slurm-local: $*" >&2; }
die() { say "$*"; exit 1; }

alive() {  # alive PIDFILE NAME: the pid in PIDFILE runs a process whose name starts with NAME
  local pid
  [[ -s "$1" ]] || return 1
  pid="$(cat "$1")"
  [[ -r "/proc/$pid/comm" ]] && [[ "$(cat "/proc/$pid/comm")" == "$2"* ]]
}

node_names() {  # the configured cluster's node names, one a line
  if (( NODES == 1 )); then echo "$NODE"; else seq -f 'n%g' 1 "$NODES"; fi
}

slurmd_pidfile() { echo "${SLURMD_PID//%n/$1}"; }  # slurmd_pidfile NODE

install_packages() {
  if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null; then
    return
  fi
  [[ "$(id -u)" == 0 ]] || die "slurm-wlm and munge are not installed, and installing them needs root"
  say "installing slurm-wlm and munge (apt-get)"
  apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q slurm-wlm munge >/dev/null
}

write_config() {
  local cpus mem_mb name k=0 nodes_conf=""
  # The machine's CPUs, shared out between the nodes (at least one each).
  cpus=$(( $(nproc) / NODES ))
  (( cpus >= 1 )) || cpus=1
  # What slurmd measures, less 10% for the daemons and the launching process (a node whose configured
  # memory exceeds what slurmd finds is drained), shared out between the nodes.
  mem_mb="$(slurmd -C | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p')"
  mem_mb=$(( mem_mb * 9 / 10 / NODES ))
  mkdir -p "$CONF_DIR" "$LOG_DIR" /var/spool/slurmctld
  for name in $(node_names); do
    k=$(( k + 1 ))
    mkdir -p "/var/spool/slurmd/$name"
    if (( NODES == 1 )); then
      nodes_conf+="NodeName=$name CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN"$'\n'
    else
      nodes_conf+="NodeName=$name NodeHostname=$NODE NodeAddr=$NODE Port=$(( SLURMD_BASE_PORT + k ))"
      nodes_conf+=" CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN"$'\n'
    fi
  done
  cat >"$CONF.tmp" <<EOF
# Written by gauntlet's scripts/slurm-local.sh: a $NODES-node cluster on $NODE (slurmctld + one slurmd a node).
ClusterName=gauntlet-local
SlurmctldHost=$NODE
SlurmUser=root
AuthType=auth/munge
# A requeued job (preemption, node failure, scontrol requeue) waits the credential lifetime before it
# starts again: 120 s by default, 30 s here so that the requeue test is short.
AuthInfo=cred_expire=30
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
DefMemPerCPU=1024
ReturnToService=2
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd/%n
SlurmctldPidFile=$CTLD_PID
SlurmdPidFile=$( (( NODES == 1 )) && echo "$SLURMD_PID" || echo "$SLURMD_NS_PID")
SlurmctldLogFile=$LOG_DIR/slurmctld.log
SlurmdLogFile=$LOG_DIR/slurmd-%n.log
# The final state of every job (no accounting database here): one line per job, read by gauntlet.
JobCompType=jobcomp/filetxt
JobCompLoc=$JOBCOMP_LOG
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
# scancel and the time limit: SIGTERM, then SIGKILL after KillWait seconds (a job's teardown grace).
KillWait=30
SlurmdParameters=config_overrides
${nodes_conf}PartitionName=$PARTITION Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
  if [[ -f "$CONF" ]] && cmp -s "$CONF" "$CONF.tmp"; then
    rm -f "$CONF.tmp"
    return
  fi
  if alive "$CTLD_PID" slurmctld; then
    rm -f "$CONF.tmp"
    die "the running cluster has another configuration than this start asks for" \
      "($NODES node(s): $(node_names | paste -sd, -)); stop it first: $0 stop"
  fi
  mv "$CONF.tmp" "$CONF"
  say "wrote $CONF ($NODES node(s): $(node_names | paste -sd, -); $cpus CPUs, ${mem_mb} MB each," \
    "partition $PARTITION)"
}

start_munge() {
  alive "$MUNGE_PID" munged && return
  mkdir -p /run/munge /var/lib/munge /var/log/munge
  chown munge:munge /run/munge /var/lib/munge /var/log/munge
  chmod 0755 /run/munge
  [[ -s /etc/munge/munge.key ]] || runuser -u munge -- mungekey --create
  runuser -u munge -- munged
  say "munged started"
}

wait_until() {  # wait_until WHAT COMMAND...: poll COMMAND until it succeeds, for TIMEOUT_S seconds
  local what="$1" deadline=$(( SECONDS + TIMEOUT_S ))
  shift
  until "$@" >/dev/null 2>&1; do
    (( SECONDS < deadline )) || return 1
    sleep 0.5
  done
}

conf_nodes() { sed -n 's/^NodeName=\([^ ]*\) .*/\1/p' "$CONF"; }  # the written configuration's nodes
node_state() { sinfo -h -n "$1" -o '%T' 2>/dev/null | head -1; }  # node_state NODE
nodes_usable() {  # nodes_usable NODE...: every one idle, mixed or allocated
  local name
  for name in "$@"; do [[ "$(node_state "$name")" =~ ^(idle|mixed|allocated)$ ]] || return 1; done
}
nodes_said() {  # nodes_said NODE...: "n1 idle, n2 down"
  local name
  for name in "$@"; do echo "$name $(node_state "$name")"; done | paste -sd, - | sed 's/,/, /g'
}
slurmd_pidfiles() { compgen -G '/run/slurmd*.pid' || true; }  # every node's (and an older single one's)

# start_isolated_slurmd NODE: slurmd -N NODE in a PID namespace (and /proc) of its own
start_isolated_slurmd() {
  local name="$1" ns init pid="" deadline=$(( SECONDS + 10 )) reaper
  # setsid: out of this shell's session; --kill-child: the namespace's first process gets SIGTERM when its
  # unshare goes. That process is a bash that reaps: every orphan of the namespace (slurmstepd detaches
  # from slurmd) becomes its child, and slurmd would leave them zombies. slurmd -D stays in the foreground
  # (a daemonizing slurmd's parent exits); a SIGTERM to the bash stops slurmd, and the namespace ends
  # with the bash, taking whatever still runs in it.
  reaper='slurmd -D -N "$1" & pid=$!; trap "kill -TERM $pid" TERM INT'
  reaper+='; while kill -0 $pid 2>/dev/null; do wait; done'
  setsid unshare --pid --fork --mount-proc --kill-child=SIGTERM -- bash -c "$reaper" init "$name" \
    </dev/null >>"$LOG_DIR/slurmd-$name.out" 2>&1 &
  ns=$!
  until [[ -n "$pid" ]]; do
    (( SECONDS < deadline )) \
      || die "slurmd for node $name did not start: $(tail -3 "$LOG_DIR/slurmd-$name.out")"
    sleep 0.2
    init="$(pgrep -P "$ns" || true)"
    [[ -z "$init" ]] || pid="$(pgrep -P "$init" -x slurmd || true)"
  done
  echo "$pid" >"$(slurmd_pidfile "$name")"
}

start() {
  install_packages
  write_config
  start_munge
  wait_until "munge" munge -n || die "munged does not answer (see /var/log/munge/munged.log)"
  if ! alive "$CTLD_PID" slurmctld; then
    slurmctld
    say "slurmctld started"
  fi
  wait_until "slurmctld" scontrol ping || die "slurmctld does not answer: $(tail -5 $LOG_DIR/slurmctld.log)"
  local name names
  names=( $(node_names) )
  for name in "${names[@]}"; do
    alive "$(slurmd_pidfile "$name")" slurmd && continue
    if (( NODES == 1 )); then slurmd; else start_isolated_slurmd "$name"; fi
    say "slurmd started for node $name"
  done
  if ! wait_until "nodes" nodes_usable "${names[@]}"; then
    # A node left down or drained by an earlier run (its state is saved): bring it back once.
    for name in "${names[@]}"; do scontrol update NodeName="$name" State=RESUME >/dev/null 2>&1 || true; done
    wait_until "nodes" nodes_usable "${names[@]}" \
      || die "not every node is idle ($(nodes_said "${names[@]}")): $(tail -q -n 3 "$LOG_DIR"/slurmd-*.log)"
  fi
  say "up: nodes $(nodes_said "${names[@]}"), partition $PARTITION, job completion log $JOBCOMP_LOG"
}

stop() {
  if alive "$CTLD_PID" slurmctld; then
    if [[ -n "$(squeue -h -o %i 2>/dev/null)" ]]; then
      say "cancelling every job: $(squeue -h -o %i | tr '\n' ' ')"
      scancel --quiet --partition="$PARTITION" || true
      wait_until "queue" bash -c '[[ -z "$(squeue -h -o %i)" ]]' || say "jobs still queued: $(squeue -h)"
    fi
  fi
  local name pidfile pid
  for pidfile in $(slurmd_pidfiles) "$CTLD_PID" "$MUNGE_PID"; do
    case "$pidfile" in
      "$CTLD_PID") name=slurmctld ;;
      "$MUNGE_PID") name=munged ;;
      *) name=slurmd ;;
    esac
    alive "$pidfile" "$name" || continue
    pid="$(cat "$pidfile")"
    kill -TERM "$pid"
    wait_until "$name" bash -c "! kill -0 $pid" || { say "$name ($pid) ignores SIGTERM: SIGKILL"; kill -KILL "$pid"; }
    say "$name ($pidfile) stopped"
  done
  # slurmstepd outlives slurmd when a step is still running (the queue did not empty): none may be left.
  for name in slurmd slurmctld munged slurmstepd; do
    if pgrep -x "$name" >/dev/null; then
      die "$name is still running: $(pgrep -a -x "$name")"
    fi
  done
  say "stopped: no slurmctld, slurmd, slurmstepd or munged runs"
}

status() {
  local up=0 name pidfile names=()
  [[ -f "$CONF" ]] && names=( $(conf_nodes) )
  for pidfile in "$MUNGE_PID" "$CTLD_PID"; do
    name="$(basename "$pidfile" .pid)"
    if alive "$pidfile" "$name"; then echo "$name: running (pid $(cat "$pidfile"))"; else echo "$name: not running"; up=1; fi
  done
  (( ${#names[@]} > 0 )) || { echo "no cluster configured ($CONF)"; up=1; }
  for name in "${names[@]}"; do
    pidfile="$(slurmd_pidfile "$name")"
    if alive "$pidfile" slurmd; then
      echo "slurmd $name: running (pid $(cat "$pidfile"))"
    else
      echo "slurmd $name: not running"; up=1
    fi
  done
  if (( up == 0 )); then
    sinfo -N -l || up=1
    squeue || up=1
    nodes_usable "${names[@]}" || { echo "nodes: $(nodes_said "${names[@]}")"; up=1; }
  fi
  return "$up"
}

usage() { echo "usage: $0 start [--nodes N]|stop|status" >&2; exit 2; }

command="${1:-}"
(( $# == 0 )) || shift
if [[ "$command" == start && "${1:-}" == --nodes ]]; then
  [[ $# == 2 ]] || usage
  NODES="$2"
  shift 2
fi
(( $# == 0 )) || usage
[[ "$NODES" =~ ^[1-9][0-9]*$ ]] || die "the node count must be a whole number from 1: '$NODES'"
case "$command" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  *) usage ;;
esac
