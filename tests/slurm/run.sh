#!/usr/bin/env bash
# make test-slurm: the tiny run of tests/slurm/tiny.yaml through the SLURM profile, exactly as
# docs/cluster.md says, on a one-node SLURM cluster set up on this machine.
#
# Needs root on Debian/Ubuntu (apt-get install slurm-wlm munge if missing; the daemons run as
# root) and no SLURM daemon already running here. What it does:
#  1. installs the executor plugin pinned in pyproject's `slurm` extra (pip install -e '.[slurm]');
#  2. writes /etc/slurm/slurm.conf from tests/slurm/slurm.conf.in (the default path: the plugin's
#     job step drops SLURM_CONF before its inner srun), with this node's CPUs and memory from
#     `slurmd -C`; no slurmdbd, so job status is polled with squeue (--slurm-status-command
#     squeue, MinJobAge 1800 s); partitions "debug" (the default) and "cpu" (MaxTime 30 min);
#  3. starts munged (unless one answers already), slurmctld and slurmd;
#  4. checks that a job asking for a GPU is refused at submission on this GPU-less node, and
#     that planning refuses a config asking more CPUs than the node has;
#  5. runs snakemake --configfile <tiny + cluster section> --profile workflow/profiles/slurm
#     --slurm-status-command squeue (in a temporary --directory);
#  6. tests/slurm/check.py: every job that is not a localrule ran as a SLURM job, in partition
#     "cpu", with the CPUs and memory of the config, and slurmctld reports it COMPLETED with
#     exit code 0:0 (scontrol show job, and the controller's log); the local rules ran on the
#     host; every figure and the report exist;
#  7. on exit (trap): cancels what is left in the queue, stops the daemons it started and removes
#     the slurm.conf it wrote; the temporary directory is kept when a check failed.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HERE=$ROOT/tests/slurm
VENV=${VENV:-$ROOT/.venv}
CONF=/etc/slurm/slurm.conf
MARK="# written by scalemech tests/slurm/run.sh"
MAXTIME=30   # minutes: the "cpu" partition's time limit, declared to the config as cluster.max_runtime

say() { printf '[test-slurm] %s\n' "$*"; }
fail() { say "FAIL: $*"; exit 1; }

[ "$(id -u)" -eq 0 ] || fail "run as root: it installs slurm-wlm and munge and starts their daemons"
[ -x "$VENV/bin/snakemake" ] || fail "no $VENV/bin/snakemake: run make test (or make reproduce) once first"

# -- 1. packages -------------------------------------------------------------------------------
need=()
for tool in slurmctld slurmd sbatch squeue scontrol munged munge; do command -v "$tool" >/dev/null || need+=("$tool"); done
if [ ${#need[@]} -gt 0 ]; then
    say "installing slurm-wlm and munge (missing: ${need[*]})"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q --no-install-recommends slurm-wlm munge >/dev/null \
        || { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends slurm-wlm munge >/dev/null; }
fi
"$VENV/bin/pip" install --quiet -e "$ROOT[slurm]"

# -- 2. never touch a real cluster ---------------------------------------------------------------
if pgrep -x slurmctld >/dev/null || pgrep -x slurmd >/dev/null; then
    fail "a slurmctld or slurmd already runs on this machine; this test sets up its own cluster"
fi
if [ -e "$CONF" ] && ! head -n 1 "$CONF" | grep -qF "$MARK"; then
    fail "$CONF exists and was not written by this script; not overwriting it"
fi

WORK=$(mktemp -d /tmp/scalemech-slurm.XXXXXX)
STATE=$WORK/state
mkdir -p "$STATE/ctld" "$STATE/d" /etc/slurm
STARTED=()   # "name pid" of each daemon this script started, stopped in reverse order
WROTE_CONF=

cleanup() {
    local rc=$? i name pid ids
    set +e
    trap - EXIT INT TERM
    if [ ${#STARTED[@]} -gt 0 ]; then
        ids=$(squeue -h -o %i 2>/dev/null)
        [ -n "$ids" ] && say "cancelling jobs left in the queue: $ids" && scancel $ids
        for ((i = ${#STARTED[@]} - 1; i >= 0; i--)); do
            read -r name pid <<<"${STARTED[$i]}"
            kill "$pid" 2>/dev/null && say "stopped $name (pid $pid)"
        done
        for ((i = ${#STARTED[@]} - 1; i >= 0; i--)); do
            read -r name pid <<<"${STARTED[$i]}"
            for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
            kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null && say "killed $name (pid $pid)"
        done
    fi
    [ -n "$WROTE_CONF" ] && rm -f "$CONF"
    if [ "$rc" -eq 0 ]; then rm -rf "$WORK"; else say "kept $WORK (logs: snakemake.log, state/slurmctld.log, state/slurmd.log)"; fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# -- 3. slurm.conf from this machine ------------------------------------------------------------
NODE_LINE=$(slurmd -C | head -n 1)   # NodeName=vm CPUs=2 Boards=1 ... RealMemory=24152
NODENAME=$(sed -n 's/^NodeName=\([^ ]*\).*/\1/p' <<<"$NODE_LINE")
CPUS=$(sed -n 's/.* CPUs=\([0-9]*\).*/\1/p' <<<"$NODE_LINE")
MEM=$(sed -n 's/.* RealMemory=\([0-9]*\).*/\1/p' <<<"$NODE_LINE")
[ -n "$NODENAME" ] && [ -n "$CPUS" ] && [ -n "$MEM" ] || fail "cannot read this node from slurmd -C: $NODE_LINE"
sed -e "s|@HOST@|$(hostname -s)|" -e "s|@STATE@|$STATE|g" -e "s|@NODE@|$NODE_LINE|" \
    -e "s|@NODENAME@|$NODENAME|g" -e "s|@MAXTIME@|$MAXTIME|" "$HERE/slurm.conf.in" >"$CONF"
WROTE_CONF=1
say "node $NODENAME: $CPUS CPUs, $MEM MB (slurmd -C); $CONF written"

# -- 4. daemons ---------------------------------------------------------------------------------
munge_ok() { munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; }
if munge_ok; then
    say "munged already answers; using it"
else
    if [ ! -s /etc/munge/munge.key ]; then
        mungekey --create --keyfile /etc/munge/munge.key
        chown munge:munge /etc/munge/munge.key && chmod 0400 /etc/munge/munge.key
    fi
    mkdir -p /run/munge /var/lib/munge /var/log/munge
    chown munge:munge /run/munge /var/lib/munge /var/log/munge
    setpriv --reuid munge --regid munge --init-groups /usr/sbin/munged --foreground >"$STATE/munged.out" 2>&1 &
    STARTED+=("munged $!")
    for _ in $(seq 50); do munge_ok && break; sleep 0.2; done
    munge_ok || fail "munged did not start: $(cat "$STATE/munged.out")"
fi
slurmctld -D -c >"$STATE/slurmctld.out" 2>&1 &
STARTED+=("slurmctld $!")
for _ in $(seq 50); do scontrol ping >/dev/null 2>&1 && break; sleep 0.2; done
slurmd -D >"$STATE/slurmd.out" 2>&1 &
STARTED+=("slurmd $!")
for _ in $(seq 60); do
    state=$(sinfo -h -n "$NODENAME" -o %t 2>/dev/null | head -n 1)
    [ "$state" = idle ] && break
    sleep 1
done
[ "$state" = idle ] || { tail -n 20 "$STATE/slurmctld.log" "$STATE/slurmd.log"; fail "node $NODENAME is '$state', not idle"; }
say "cluster up: $(sinfo -h -o '%P %a %l %D %t' | tr '\n' ';' | sed 's/;$//; s/;/; /g')"
say "$(sinfo --version), snakemake $("$VENV/bin/snakemake" --version)," \
    "snakemake-executor-plugin-slurm $("$VENV/bin/pip" show snakemake-executor-plugin-slurm | sed -n 's/^Version: //p')"

# -- 5. what a user sees when a job cannot run here ------------------------------------------------
if out=$(sbatch -p cpu --gpus=1 --wrap true 2>&1); then
    fail "a job asking for a GPU was accepted by a node without GPUs: $out"
fi
grep -q "Invalid generic resource (gres) specification" <<<"$out" || fail "unexpected sbatch error for a GPU job: $out"
say "GPU job on a GPU-less node refused at submission: $out"

CONFIG=$WORK/tiny.yaml
cp "$HERE/tiny.yaml" "$CONFIG"
cat >>"$CONFIG" <<EOF

# added by tests/slurm/run.sh: this one-node cluster
cluster:
  cpu_partition: cpu
  max_cpus: $CPUS
  max_mem_mb: $MEM
  max_gpus: 0
  max_runtime: $MAXTIME
EOF
# docs/cluster.md's command for a cluster without slurmdbd, in a temporary directory; the first status
# check after 10 s instead of 40 (docs/cluster.md: short jobs) only makes this test of seconds-long jobs quicker.
SNAKEMAKE=("$VENV/bin/snakemake" --configfile "$CONFIG" --profile workflow/profiles/slurm
           --slurm-status-command squeue --slurm-init-seconds-before-status-checks 10 --directory "$WORK/run")
cd "$ROOT"
if out=$("${SNAKEMAKE[@]}" -n --config threads=$((CPUS + 1)) 2>&1); then
    fail "planning accepted threads $((CPUS + 1)) on a $CPUS-CPU node"
fi
grep -q "cluster.max_cpus $CPUS" <<<"$out" || fail "unexpected planning error: $(tail -n 5 <<<"$out")"
say "planning refuses threads=$((CPUS + 1)): $(grep -o "threads: $((CPUS + 1)) is more than cluster.max_cpus $CPUS[^;]*" <<<"$out" | head -n 1)"

# -- 6. the run ---------------------------------------------------------------------------------
say "running: ${SNAKEMAKE[*]#$VENV/bin/}"
start=$SECONDS
if ! timeout 1800 "${SNAKEMAKE[@]}" >"$WORK/snakemake.log" 2>&1; then
    tail -n 60 "$WORK/snakemake.log"
    fail "snakemake failed"
fi
say "snakemake finished in $((SECONDS - start)) s"
"$VENV/bin/python" "$HERE/check.py" "$WORK/snakemake.log" "$WORK/run" "$CONFIG" "$STATE/slurmctld.log" "$CPUS"
say "PASS"
