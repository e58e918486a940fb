#!/usr/bin/env bash
# A real, private Slurm for tests: munged, slurmctld and slurmd from Debian's slurm-wlm and munge, run as
# root in a directory of their own. Nothing system-wide is changed: the generated slurm.conf is reached
# through SLURM_CONF, every state/spool/log/pid file lives under DIR, the daemons listen on free
# unprivileged ports of 127.0.0.1 and authenticate through a munge key and socket of their own
# (AuthInfo=socket=...). Several of these clusters can run side by side on one machine.
#
# One node (named after the host) by default. HSIPIPE_SLURM_NODES=2 makes a two-node cluster on this one
# host (Slurm's multiple-slurmd support): nodes n1 and n2, one `slurmd -N nI` each with its own port,
# spool, pid and log file (%n), and TmpFS=DIR/tmp/%n (both nodes' step daemons in one TmpFS make the same
# PMIx directory, and every `srun --mpi=pmix` step fails with "File exists"). Its TaskProlog
# (DIR/etc/task_prolog.sh) gives every task what a site's prolog gives it on a real cluster, per node:
#   SLURM_TMPDIR=DIR/tmp/NODE/job-JOBID   a per-job node-local directory that differs from node to node;
#   OMPI_MCA_btl_vader_backing_directory=/dev/shm/NAME-NODE   only because both "nodes" are one host:
#       Open MPI names its shared-memory segments after the host name, so ranks of n1 and n2 would take
#       each other's segments (a crash in mca_btl_vader_poll_handle_frag with two ranks per node). A test
#       harness matter: jobs/ and hsipipe know nothing of it.
#
#   scripts/slurm_test_cluster.sh run [--dir DIR] -- CMD [ARGS...]
#       start a cluster (in DIR, default a fresh temporary directory), run CMD with SLURM_CONF and
#       HSIPIPE_SLURM_DIR exported, stop every daemon afterwards (also on failure or Ctrl-C) and return
#       CMD's exit status. The temporary directory is removed unless HSIPIPE_SLURM_KEEP=1 or CMD failed.
#   scripts/slurm_test_cluster.sh start DIR     start and wait until the node is idle; writes DIR/env.sh
#   scripts/slurm_test_cluster.sh stop DIR      stop the daemons started in DIR
#
# Environment:
#   HSIPIPE_SLURM_NODES     1 (default) or 2 nodes
#   HSIPIPE_SLURM_CPUS      CPUs each node advertises (default: what `slurmd -C` finds). More than the
#                           machine has lets several small jobs share the cores (SlurmdParameters=
#                           config_overrides); fewer reserves cores for other work.
#   HSIPIPE_SLURM_MEM_MB    memory each node advertises (default: half of what `slurmd -C` finds, split
#                           between the nodes)
#   HSIPIPE_SLURM_TIMEOUT   seconds to wait for the nodes to become idle (default 60)
#
# Exit status 77 when slurm-wlm or munge is not installed (the test driver turns that into a skip, or a
# failure under CI=true).
set -euo pipefail

die() { echo "slurm_test_cluster: $*" >&2; exit 1; }

need_tools() {
  local t
  for t in munged mungekey slurmctld slurmd sinfo scontrol sbatch srun; do
    command -v "$t" >/dev/null 2>&1 || PATH="$PATH:/usr/sbin" command -v "$t" >/dev/null 2>&1 || {
      echo "slurm_test_cluster: '$t' not found (install the Debian packages slurm-wlm and munge)" >&2
      exit 77
    }
  done
  export PATH="$PATH:/usr/sbin"
}

# A TCP port of 127.0.0.1 that nobody listens on, chosen at random in 20000-59999.
free_port() {
  local used p i
  used=$(ss -Htan 2>/dev/null | awk '{print $4}' | sed 's/.*://' | sort -u)
  for i in $(seq 1 200); do
    p=$(( 20000 + (RANDOM * 32768 + RANDOM) % 40000 ))
    grep -qx "$p" <<<"$used" && continue
    # bash's /dev/tcp: a successful connect means someone listens there
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      echo "$p"
      return 0
    fi
  done
  die "no free TCP port found"
}

# The node names of the cluster: this host's name, or n1 n2 (HSIPIPE_SLURM_NODES=2).
node_names() {
  case ${HSIPIPE_SLURM_NODES:-1} in
    1) hostname -s ;;
    2) echo n1 n2 ;;
    *) die "HSIPIPE_SLURM_NODES must be 1 or 2 (got '$HSIPIPE_SLURM_NODES')" ;;
  esac
}

# The two-node TaskProlog (see the header): what a site's prolog gives each task on a real cluster, and
# the shared-memory folder of the node.
write_task_prolog() {
  local dir=$1
  cat >"$dir/etc/task_prolog.sh" <<EOF
#!/bin/sh
node=\${SLURMD_NODENAME:?}
tmp=$dir/tmp/\$node/job-\${SLURM_JOB_ID:?}
shm=/dev/shm/$(basename "$dir")-\$node
mkdir -p "\$tmp" "\$shm"
echo "export SLURM_TMPDIR=\$tmp"
echo "export OMPI_MCA_btl_vader_backing_directory=\$shm"
EOF
  chmod 755 "$dir/etc/task_prolog.sh"
}

write_conf() {
  local dir=$1 host cpus mem real_cpus real_mem line ctld_port port overrides="" nodes n ports=""
  host=$(hostname -s)
  read -r -a nodes <<<"$(node_names)"
  line=$(slurmd -C | head -1)
  real_cpus=$(sed -n 's/.* CPUs=\([0-9]*\).*/\1/p' <<<"$line")
  real_mem=$(sed -n 's/.* RealMemory=\([0-9]*\).*/\1/p' <<<"$line")
  [[ -n $real_cpus && -n $real_mem ]] || die "cannot parse 'slurmd -C': $line"
  cpus=${HSIPIPE_SLURM_CPUS:-$real_cpus}
  mem=${HSIPIPE_SLURM_MEM_MB:-$(( real_mem / 2 / ${#nodes[@]} ))}
  (( mem <= real_mem )) || mem=$real_mem
  # The node line: sockets/cores/threads of this machine unless the CPU count is overridden, in which
  # case slurmd must be told to believe the file rather than the hardware.
  local node_hw
  if [[ $cpus == "$real_cpus" ]]; then
    node_hw=$(grep -o 'CPUs=[0-9]* Boards=[0-9]* SocketsPerBoard=[0-9]* CoresPerSocket=[0-9]* ThreadsPerCore=[0-9]*' <<<"$line")
  else
    node_hw="CPUs=$cpus Boards=1 SocketsPerBoard=1 CoresPerSocket=$cpus ThreadsPerCore=1"
    overrides="SlurmdParameters=config_overrides"
  fi
  ctld_port=$(free_port)
  # One node: the host itself, on SlurmdPort. Two: n1 and n2 on this host, each slurmd on its own Port, with
  # its own pid and log file and TmpFS (%n), and the TaskProlog.
  local node_lines="" prolog="" tmpfs=$dir/tmp pidfile=$dir/run/slurmd.pid logfile=$dir/log/slurmd.log
  for n in "${nodes[@]}"; do
    port=$(free_port)
    while [[ " $ctld_port $ports " == *" $port "* ]]; do port=$(free_port); done
    ports+=" $port"
    if ((${#nodes[@]} == 1)); then
      node_lines+="SlurmdPort=$port"$'\n'"NodeName=$n NodeAddr=127.0.0.1 $node_hw RealMemory=$mem State=UNKNOWN"$'\n'
    else
      node_lines+="NodeName=$n NodeHostname=$host NodeAddr=127.0.0.1 Port=$port $node_hw RealMemory=$mem State=UNKNOWN"$'\n'
    fi
  done
  if ((${#nodes[@]} > 1)); then
    tmpfs=$dir/tmp/%n pidfile=$dir/run/slurmd-%n.pid logfile=$dir/log/slurmd-%n.log
    prolog="TaskProlog=$dir/etc/task_prolog.sh"
    write_task_prolog "$dir"
  fi

  : >"$dir/etc/plugstack.conf"  # no site SPANK plugins from /etc/slurm
  cat >"$dir/etc/slurm.conf" <<EOF
# Generated by scripts/slurm_test_cluster.sh for a private test cluster; not for production.
ClusterName=hsipipetest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket,cred_expire=${HSIPIPE_SLURM_CRED_EXPIRE:-10}
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/slurmd-%n
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$pidfile
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$logfile
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig=$dir/etc/plugstack.conf
TmpFS=$tmpfs
$prolog
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1,sched_interval=2
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=512
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$dir/log/jobcomp.txt
MpiDefault=none
ReturnToService=2
MinJobAge=86400
KillWait=10
SlurmdTimeout=60
InactiveLimit=0
Waittime=0
$overrides
${node_lines}PartitionName=debug Nodes=$(IFS=,; echo "${nodes[*]}") Default=YES MaxTime=INFINITE State=UP
EOF
  cat >"$dir/env.sh" <<EOF
export SLURM_CONF=$dir/etc/slurm.conf
export HSIPIPE_SLURM_DIR=$dir
export PATH="\$PATH:/usr/sbin"
EOF
}

stop_cluster() {
  local dir=$1 name pid i
  [[ -d $dir/run ]] || return 0
  local pidfile
  for pidfile in "$dir"/run/slurmd*.pid "$dir/run/slurmctld.pid" "$dir/run/munged.pid"; do
    [[ -f $pidfile ]] || continue
    pid=$(cat "$pidfile" 2>/dev/null || true)
    [[ $pid =~ ^[0-9]+$ ]] || continue
    kill -TERM "$pid" 2>/dev/null || continue
    for i in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    rm -f "$pidfile"
  done
  # Job processes slurmd left behind (a step killed with the daemon) belong to this cluster only if
  # their environment says so (a job id and this SLURM_CONF): end those, and nothing else.
  local p env
  for p in /proc/[0-9]*; do
    [[ ${p#/proc/} == "$$" || ${p#/proc/} == "$PPID" ]] && continue
    env=$(tr '\0' '\n' 2>/dev/null <"$p/environ") || continue
    if grep -qx "SLURM_CONF=$dir/etc/slurm.conf" <<<"$env" && grep -q '^SLURM_JOB_ID=' <<<"$env"; then
      kill -KILL "${p#/proc/}" 2>/dev/null || true
    fi
  done
  rm -rf "/dev/shm/$(basename "$dir")"-*  # the two-node TaskProlog's shared-memory folders
}

start_cluster() {
  local dir=$1 i state=""
  need_tools
  [[ $(id -u) == 0 ]] || die "must run as root (slurmd starts job steps as the submitting user)"
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  mkdir -p "$dir"/{etc,munge,state,spool,log,run,tmp}
  chmod 700 "$dir/munge"
  write_conf "$dir"
  # shellcheck disable=SC1091
  source "$dir/env.sh"

  # munge: a key and socket of our own. munged checks that the key and socket directories are not
  # writable by others; our private directory satisfies it.
  mungekey --create --keyfile="$dir/munge/munge.key" --force >/dev/null 2>&1 \
    || dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
  chmod 400 "$dir/munge/munge.key"
  munged --socket="$dir/munge/munge.socket" --key-file="$dir/munge/munge.key" \
    --pid-file="$dir/run/munged.pid" --log-file="$dir/log/munged.log" \
    --seed-file="$dir/munge/munged.seed" --force --num-threads=2 \
    || die "munged failed to start: $(tail -5 "$dir/log/munged.log" 2>/dev/null)"

  # slurmctld (-c: clear state, a fresh cluster), then slurmd. Both daemonise and write pid files.
  slurmctld -c -f "$dir/etc/slurm.conf" || die "slurmctld failed: $(tail -20 "$dir/log/slurmctld.log" 2>/dev/null)"
  local nodes n
  read -r -a nodes <<<"$(node_names)"
  if ((${#nodes[@]} == 1)); then
    slurmd -f "$dir/etc/slurm.conf" || die "slurmd failed: $(tail -20 "$dir/log/slurmd.log" 2>/dev/null)"
  else
    for n in "${nodes[@]}"; do
      mkdir -p "$dir/tmp/$n"
      slurmd -N "$n" -f "$dir/etc/slurm.conf" || die "slurmd -N $n failed: $(tail -20 "$dir/log/slurmd-$n.log" 2>/dev/null)"
    done
  fi

  local timeout=${HSIPIPE_SLURM_TIMEOUT:-60}
  for _ in $(seq 1 $(( timeout * 2 ))); do
    state=$(sinfo -h -N -o '%T' 2>/dev/null | sort | uniq -c | awk '{print $2 "x" $1}' | tr '\n' ' ' | sed 's/ $//' || true)
    [[ $state == "idlex${#nodes[@]}" ]] && break
    sleep 0.5
  done
  if [[ $state != "idlex${#nodes[@]}" ]]; then
    echo "slurm_test_cluster: the ${#nodes[@]} node(s) not idle after ${timeout}s (states '${state}')" >&2
    tail -20 "$dir"/log/slurm*.log >&2 2>/dev/null || true
    stop_cluster "$dir"
    exit 1
  fi
  echo "slurm_test_cluster: up in $dir (SLURM_CONF=$SLURM_CONF, nodes: $(sinfo -h -N -o '%N %c CPUs %m MB' | paste -sd, | sed 's/,/, /g'))"
}

cmd=${1:-}
shift || true
case $cmd in
  start)
    [[ $# == 1 ]] || die "usage: $0 start DIR"
    start_cluster "$1"
    ;;
  stop)
    [[ $# == 1 ]] || die "usage: $0 stop DIR"
    stop_cluster "$(cd "$1" && pwd)"
    ;;
  run)
    dir=""
    temp=0
    while [[ $# -gt 0 && $1 != -- ]]; do
      case $1 in
        --dir) dir=$2; shift 2 ;;
        *) die "run: unknown option '$1'" ;;
      esac
    done
    [[ ${1:-} == -- ]] && shift
    [[ $# -gt 0 ]] || die "usage: $0 run [--dir DIR] -- CMD [ARGS...]"
    if [[ -z $dir ]]; then
      dir=$(mktemp -d "${TMPDIR:-/tmp}/hsipipe-slurm.XXXXXX")
      temp=1
    fi
    rc=1
    cleanup() {
      stop_cluster "$dir"
      if [[ $temp == 1 && ($rc == 0 || $rc == 77) && ${HSIPIPE_SLURM_KEEP:-0} != 1 ]]; then
        rm -rf "$dir"
      elif [[ $rc != 0 && $rc != 77 ]]; then
        echo "slurm_test_cluster: kept $dir (logs in $dir/log)" >&2
      fi
    }
    trap cleanup EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    start_cluster "$dir"
    dir=$(cd "$dir" && pwd)
    set +e
    "$@"
    rc=$?
    set -e
    exit $rc
    ;;
  *)
    die "usage: $0 run [--dir DIR] -- CMD... | start DIR | stop DIR"
    ;;
esac
