#!/usr/bin/env bash
# A throwaway single-node Slurm cluster on this machine (slurmctld + slurmd on localhost,
# started by hand, no systemd), then the shipped sweep submitted as an emitted array script.
# Needs Debian's slurm-wlm and munge (apt-get install -y slurm-wlm munge) and root (slurmd
# runs jobs as their submitting user). Everything Slurm writes stays in $SLURM_LOCAL_DIR; the
# daemons are stopped on exit. Usage:
#   scripts/slurm_local.sh [SWEEP_FILE] [SWEEP_OUT]
# Output: the slurm.conf used, sinfo, the emitted script, squeue while it runs, sacct-less
# per-task exit codes (from the sweep's own status files) and `diffphd sweep collect`.
set -euo pipefail
cd "$(dirname "$0")/.."
SWEEP=${1:-scenes/sweeps/cantilever_E_nu.sweep.toml}
OUT=${2:-out/sweeps/slurm_local}
B=$(pwd)/target/release/diffphd
[ -x "$B" ] || cargo build --release
D=${SLURM_LOCAL_DIR:-$(mktemp -d -t diffphd-slurm.XXXXXX)}
mkdir -p "$D"/{state,spool,log}
HOST=$(hostname -s)
CPUS=$(nproc)
MEM=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 512 ))

# munge: the authentication daemon Slurm's default auth/munge plugin talks to.
if ! pgrep -x munged >/dev/null; then
  mkdir -p /run/munge && chown munge:munge /run/munge
  [ -s /etc/munge/munge.key ] || { mungekey --create 2>/dev/null || create-munge-key -f; }
  runuser -u munge -- /usr/sbin/munged
fi

cat > "$D/slurm.conf" <<CONF
ClusterName=local
SlurmctldHost=$HOST
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool
SlurmctldPidFile=$D/slurmctld.pid
SlurmdPidFile=$D/slurmd.pid
SlurmctldLogFile=$D/log/slurmctld.log
SlurmdLogFile=$D/log/slurmd.log
SlurmctldPort=6817
SlurmdPort=6818
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MaxArraySize=1001
NodeName=$HOST CPUs=$CPUS RealMemory=$MEM State=UNKNOWN
PartitionName=local Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF=$D/slurm.conf

stop() {
  [ -s "$D/slurmd.pid" ] && kill "$(cat "$D/slurmd.pid")" 2>/dev/null || true
  [ -s "$D/slurmctld.pid" ] && kill "$(cat "$D/slurmctld.pid")" 2>/dev/null || true
}
trap stop EXIT

echo "== slurm.conf ($SLURM_CONF)"; cat "$SLURM_CONF"
slurmctld -f "$SLURM_CONF"
slurmd -f "$SLURM_CONF"
for _ in $(seq 60); do
  sinfo -h -o %T 2>/dev/null | grep -qE '^(idle|mixed|allocated)' && break
  sleep 1
done
echo "== sinfo"; sinfo
echo "== sbatch --version"; sbatch --version

echo "== diffphd sweep emit --slurm"
"$B" sweep emit "$SWEEP" --slurm --out "$OUT" --time 00:20:00 --mem 1G --max-parallel "$CPUS"
echo "== $OUT/sweep.sbatch"; cat "$OUT/sweep.sbatch"
JOB=$(sbatch --parsable "$OUT/sweep.sbatch")
echo "== submitted array job $JOB"
t0=$(date +%s)
while squeue -h -j "$JOB" 2>/dev/null | grep -q .; do
  squeue -j "$JOB" -o '%.18i %.10T %.10M %R' | sed -n '1,6p'
  sleep 5
done
echo "== array finished in $(( $(date +%s) - t0 ))s"
echo "== per-task exit codes (sweep-status.json)"
for f in "$OUT"/run_*/sweep-status.json; do
  printf '%s exit %s\n' "$(basename "$(dirname "$f")")" "$(sed -n 's/.*"exit_code": \(-\?[0-9]*\).*/\1/p' "$f")"
done
echo "== slurm-*.out of task 0"; cat "$OUT"/slurm-"${JOB}"_0.out
"$B" sweep collect "$OUT"
echo "== results.csv"; cat "$OUT/results.csv"
