#!/usr/bin/env bash
# A single-node SLURM cluster on this machine (slurmctld + slurmd + munge), for `make demo-slurm` and the
# `slurm` tests: scripts/slurm-local.sh start|stop|status (also `make slurm-local`).
#
# start   installs slurm-wlm and munge with apt when missing (needs root), writes /etc/slurm/slurm.conf
#         (this host as the one node, CPUs from nproc, ProctrackType=proctrack/linuxproc, TaskPlugin=task/none,
#         a job completion log that keeps each job's final state: JobCompType=jobcomp/filetxt), starts
#         munged, slurmctld and slurmd unless they run already (no systemd: the daemons directly), and waits
#         until sinfo shows the node idle. Idempotent: a second start only checks.
# stop    cancels every job of the cluster, waits for the queue to empty, stops the daemons and proves
#         none is left. Idempotent.
# status  the daemons, sinfo and squeue; exit 0 only when the cluster is up and the node is usable.
#
# Settings (environment): SLURM_LOCAL_PARTITION (default: local), SLURM_LOCAL_TIMEOUT_S (default: 60, the
# wait for the node to become idle, and for the queue to empty on stop).
set -euo pipefail

PARTITION="${SLURM_LOCAL_PARTITION:-local}"
TIMEOUT_S="${SLURM_LOCAL_TIMEOUT_S:-60}"
CONF_DIR=/etc/slurm
CONF="$CONF_DIR/slurm.conf"
LOG_DIR=/var/log/slurm
JOBCOMP_LOG="$LOG_DIR/jobcomp.log"
CTLD_PID=/run/slurmctld.pid
SLURMD_PID=/run/slurmd.pid
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
  local cpus mem_mb
  cpus="$(nproc)"
  # What slurmd measures, less 10% for the daemons and the launching process (a node whose configured
  # memory exceeds what slurmd finds is drained).
  mem_mb="$(slurmd -C | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p')"
  mem_mb=$(( mem_mb * 9 / 10 ))
  mkdir -p "$CONF_DIR" "$LOG_DIR" /var/spool/slurmctld /var/spool/slurmd
  cat >"$CONF.tmp" <<EOF
# Written by gauntlet's scripts/slurm-local.sh: a single-node cluster on $NODE (slurmctld + slurmd).
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
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=$CTLD_PID
SlurmdPidFile=$SLURMD_PID
SlurmctldLogFile=$LOG_DIR/slurmctld.log
SlurmdLogFile=$LOG_DIR/slurmd.log
# The final state of every job (no accounting database here): one line per job, read by gauntlet.
JobCompType=jobcomp/filetxt
JobCompLoc=$JOBCOMP_LOG
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
# scancel and the time limit: SIGTERM, then SIGKILL after KillWait seconds (a job's teardown grace).
KillWait=30
SlurmdParameters=config_overrides
NodeName=$NODE CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
PartitionName=$PARTITION Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
  if [[ -f "$CONF" ]] && cmp -s "$CONF" "$CONF.tmp"; then
    rm -f "$CONF.tmp"
  else
    mv "$CONF.tmp" "$CONF"
    say "wrote $CONF ($cpus CPUs, ${mem_mb} MB, partition $PARTITION)"
  fi
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

node_state() { sinfo -h -n "$NODE" -o '%T' 2>/dev/null | head -1; }
node_idle() { [[ "$(node_state)" =~ ^(idle|mixed|allocated)$ ]]; }

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
  if ! alive "$SLURMD_PID" slurmd; then
    slurmd
    say "slurmd started"
  fi
  if ! wait_until "node" node_idle; then
    # A node left down or drained by an earlier run (its state is saved): bring it back once.
    scontrol update NodeName="$NODE" State=RESUME >/dev/null 2>&1 || true
    wait_until "node" node_idle || die "node $NODE is '$(node_state)', not idle: $(tail -5 $LOG_DIR/slurmd.log)"
  fi
  say "up: node $NODE $(node_state), partition $PARTITION, job completion log $JOBCOMP_LOG"
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
  for name in slurmd slurmctld munged; do
    case "$name" in
      slurmd) pidfile="$SLURMD_PID" ;;
      slurmctld) pidfile="$CTLD_PID" ;;
      munged) pidfile="$MUNGE_PID" ;;
    esac
    alive "$pidfile" "$name" || continue
    pid="$(cat "$pidfile")"
    kill -TERM "$pid"
    wait_until "$name" bash -c "! kill -0 $pid" || { say "$name ($pid) ignores SIGTERM: SIGKILL"; kill -KILL "$pid"; }
    say "$name stopped"
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
  local up=0 name pidfile
  for name in munged slurmctld slurmd; do
    case "$name" in
      slurmd) pidfile="$SLURMD_PID" ;;
      slurmctld) pidfile="$CTLD_PID" ;;
      munged) pidfile="$MUNGE_PID" ;;
    esac
    if alive "$pidfile" "$name"; then echo "$name: running (pid $(cat "$pidfile"))"; else echo "$name: not running"; up=1; fi
  done
  if (( up == 0 )); then
    sinfo -N -l || up=1
    squeue || up=1
    node_idle || { echo "node $NODE: $(node_state)"; up=1; }
  fi
  return "$up"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
