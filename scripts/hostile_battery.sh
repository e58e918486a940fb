#!/usr/bin/env bash
# scripts/hostile_battery.sh [BUILD_DIR]: issue 35's hostile cases, one command each (items 1-16), and issue 43's
# (rows 43.N: the item of issue 43; tests/train/test_hostile.py checks them, with variants) and issue 46's scene
# lists (rows 46.N; tests/cache/scene_list_test.py and tests/train/test_predict_list.py check them, with
# variants), run on
# synthetic scenes in a temporary directory; prints a markdown table: item, the command (run in that directory,
# `hsipipe` = BUILD_DIR/hsipipe, default build/), its exit code, the first line of its message (the first error
# line, else the line that answers the case) and a check made after it. About 20 s on 2 cores.
#   - item 3 (and 4, which reuses its full disk) mounts a 1 MiB tmpfs: root only, otherwise "not run";
#   - item 9 runs jobs/lib.sh's preemption path outside Slurm: an mpiexec stand-in that writes a checkpoint on
#     SIGUSR1 and then dies of SIGSEGV (Open MPI's crash), Slurm's pair (USR1, then TERM 0.3 s later) sent to the
#     batch shell, and an scontrol stand-in that records the requeue (the real Slurm: ctest -R slurm_preempt_pair).
# Needs /usr/bin/python3 with numpy and scipy (the scenes of items 7, 11, 12, 14).
#   HSIPIPE_BATTERY_KEEP=1  keep the temporary directory (its path is printed) to look at what each case left
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-$ROOT/build}" && pwd)
PY=${HSIPIPE_PYTHON:-/usr/bin/python3}
# shellcheck disable=SC1091
source "$ROOT/scripts/mpi_env.sh"
export OMPI_MCA_rmaps_base_oversubscribe=1
T=$(mktemp -d "${TMPDIR:-/tmp}/hsipipe-battery.XXXXXX")
cleanup() { umount "$T/full" 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT
[[ ${HSIPIPE_BATTERY_KEEP:-0} == 1 ]] && trap 'umount "$T/full" 2>/dev/null; echo "kept $T" >&2' EXIT
mkdir -p "$T/bin"
printf '#!/bin/sh\nexec %q "$@"\n' "$BUILD/hsipipe" >"$T/bin/hsipipe"
chmod +x "$T/bin/hsipipe"
export PATH=$T/bin:$PATH ROOT
cd "$T" || exit 1

rows=()
# row ITEM CMD [PATTERN [CHECK]]: runs CMD (bash, in $T); the message is its first line matching PATTERN (default
# "error"), else its last line; CHECK (bash) is run afterwards and its output is the last column.
row() {
  local item=$1 cmd=$2 pat=${3:-error} chk=${4:-} out rc msg note=""
  out=$(bash -c "$cmd" 2>&1)
  rc=$?
  printf '%s\n' "$out" >last.out  # for CHECK
  msg=$(grep -m1 -E -- "$pat" <<<"$out" || tail -n1 <<<"$out")
  [[ -z $chk ]] || note=$(bash -c "$chk" 2>&1 | tr '\n' ' ')
  msg=${msg//$T\//}
  msg=${msg//|/\\|}
  ((${#msg} <= 300)) || msg="${msg:0:297}..."
  rows+=("| $item | \`${cmd//|/\\|}\` | $rc | ${msg} | ${note//|/\\|} |")
  echo "item $item: exit $rc" >&2
}
quiet() { "$@" >/dev/null 2>&1 || { echo "set-up failed: $*" >&2; "$@"; exit 1; }; }

# ---------------------------------------------------------------- set-up
quiet hsipipe synth --out scene --rows 30 --cols 30 --bands 20 --classes 4 --seed 5
quiet hsipipe decode --scene scene/scene.hdr --labels scene/labels.hdr --out cache --backend npy --no-progress
quiet hsipipe folds --cache cache --k 3 --seed 7 --out folds.json
quiet hsipipe folds --cache cache --k 3 --seed 99 --out folds99.json
TR="--model mlp --batch 16 --deterministic"
# run A: stopped by SIGUSR1 mid-training (epoch 3 or so): checkpoint.pt, exit 75
HSIPIPE_TEST_STEP_DELAY_MS=20 timeout --preserve-status -s USR1 3 hsipipe train --cache cache --folds folds.json --fold 0 --epochs 30 $TR \
  --checkpoint-every 0 --out runA >runA.log 2>&1
[[ $? == 75 && -e runA/fold-0/checkpoint.pt ]] || { cat runA.log; echo "set-up: run A did not checkpoint" >&2; exit 1; }
cp runA/fold-0/checkpoint.pt checkpointA.pt
# run M: fold 0 with lr 0.01, folds 1 and 2 with lr 0.001, trained apart (train refuses other settings into one
# run) and put together
quiet hsipipe train --cache cache --folds folds.json --fold 0 --epochs 1 $TR --lr 0.01 --out runM
quiet hsipipe train --cache cache --folds folds.json --fold 1 --epochs 1 $TR --lr 0.001 --out runM12
quiet hsipipe train --cache cache --folds folds.json --fold 2 --epochs 1 $TR --lr 0.001 --out runM12
cp -r runM12/fold-1 runM12/fold-2 runM/
# a folds file whose fold 2 is empty, its fingerprint recomputed by the reference implementation
quiet "$PY" -c "import json, sys; sys.path.insert(0, '$ROOT/scripts'); import folds_reference as fr
j = json.load(open('folds.json')); j['fold'] = [1 if f == 2 else f for f in j['fold']]
j['fingerprint'] = fr.fingerprint(fr.read_cache('cache'), j['fold'], j['excluded'])
[j.pop(k) for k in ('counts', 'leakage', 'excluded_counts', 'classes')]; json.dump(j, open('folds_empty2.json', 'w'))"
# a 160-band scene: its mlp checkpoint (~2.5 MiB) does not fit a 1 MiB tmpfs
quiet hsipipe synth --out wide --rows 16 --cols 16 --bands 160 --classes 3 --seed 2
quiet hsipipe decode --scene wide/scene.hdr --labels wide/labels.hdr --out wcache --backend npy --no-progress
quiet hsipipe folds --cache wcache --k 2 --seed 1 --out wfolds.json
mkdir -p full
mounted=0
mount -t tmpfs -o size=1m tmpfs full 2>/dev/null && mounted=1
# a cube cache with a flipped byte in its first cube row
quiet hsipipe decode --scene scene/scene.hdr --labels scene/labels.hdr --out cube --layout cube --patch 3 --backend npy --no-progress
quiet hsipipe folds --cache cube --k 3 --seed 7 --out cfolds.json
quiet "$PY" -c "
import numpy as np
h = np.load('cube/cube_0.npy', mmap_mode='r'); off = h.offset
b = bytearray(open('cube/cube_0.npy', 'rb').read()); b[off + 5] ^= 0x10; open('cube/cube_0.npy', 'wb').write(b)"
# run B: run A's checkpoint with one byte of a stored weight tensor flipped (the archive's entries are stored, not
# compressed: the byte is the tensor's)
mkdir -p runB/fold-0
cp runA/fold-0/epochs.jsonl runB/fold-0/ && cp runA/preprocessing.json runB/
quiet "$PY" -c "
import zipfile
z = zipfile.ZipFile('checkpointA.pt'); b = bytearray(open('checkpointA.pt', 'rb').read())
# the model's first tensor: the largest stored entry under model's data/
e = max((i for i in z.infolist() if '/data/' in i.filename and i.compress_type == 0), key=lambda i: i.file_size)
n = int.from_bytes(b[e.header_offset + 26:e.header_offset + 28], 'little'); m = int.from_bytes(b[e.header_offset + 28:e.header_offset + 30], 'little')
b[e.header_offset + 30 + n + m + 2] ^= 0x10
open('runB/fold-0/checkpoint.pt', 'wb').write(b)"
# MATLAB files: Y [bands x pixels] without the image size; Y with nRow/nCol beside a 3-D S_GT
quiet "$PY" -c "
import numpy as np, scipy.io
rng = np.random.default_rng(1)
scipy.io.savemat('ymat.mat', {'Y': rng.random((20, 12 * 9))})
scipy.io.savemat('two.mat', {'Y': rng.random((20, 12 * 9)), 'S_GT': rng.random((12, 9, 3)), 'nRow': 12.0, 'nCol': 9.0})"
# a scene whose labeled pixel (3, 7) is the data-ignore value
quiet "$PY" -c "
import sys; sys.path.insert(0, '$ROOT/tests/cache')
from decode_test import make_scene
make_scene('.', 'bad', H=10, W=9, B=6, seed=3, labeled_frac=1.0, ignore_value=-9999)"
# item 9: the mpiexec and scontrol stand-ins, and the batch script
mkdir -p pair/bin
cat >pair/bin/mpiexec <<'EOF'
#!/bin/bash
# ranks that checkpoint on SIGUSR1 and exit 75, and a launcher that then crashes like Open MPI's (SIGSEGV)
trap 'echo ckpt >"$HSIPIPE_CHECKPOINTS.tmp"; mv "$HSIPIPE_CHECKPOINTS.tmp" "$HSIPIPE_CHECKPOINTS"; exec sh -c "kill -SEGV \$\$"' USR1
trap '' TERM
touch "$HSIPIPE_OUT/started"
while :; do sleep 0.05; done
EOF
cat >pair/bin/scontrol <<'EOF'
#!/bin/bash
echo "scontrol $*" >>"$HSIPIPE_OUT/scontrol.log"
(sleep 0.5; kill -TERM $PPID) >/dev/null 2>&1 &  # slurmctld ending the requeued attempt
EOF
cat >pair/job.sh <<EOF
#!/bin/bash
source "$ROOT/jobs/lib.sh"
hsipipe_trap_preemption
export HSIPIPE_CHECKPOINTS=\$HSIPIPE_OUT/checkpoint.pt
hsipipe_run_preemptible train
EOF
chmod +x pair/bin/* pair/job.sh
cat >pair/send.sh <<'EOF'
#!/bin/bash
# pair/send.sh: starts pair/job.sh as a batch shell (in a process group of its own), sends it SIGUSR1 and SIGTERM
# 0.3 s later, returns its status. The TERM reaches it once it has requeued itself, in lib.sh's wait for slurmctld
# to end the attempt, which it then ends: 143, as under Slurm.
PATH=$PWD/pair/bin:$PATH HSIPIPE_ROOT=$ROOT HSIPIPE_CONFIG=/dev/null HSIPIPE_OUT=$PWD/pair HSIPIPE_EXE=/bin/true \
  HSIPIPE_MPI=mpiexec SLURM_JOB_ID=9 setsid bash pair/job.sh &
job=$!
for _ in $(seq 100); do [[ -e pair/started ]] && break; sleep 0.05; done
kill -USR1 $job; sleep 0.3; kill -TERM $job
wait $job
rc=$?
sleep 0.6
kill -TERM -- -$job 2>/dev/null  # what is left of its group (lib.sh's sleep), as slurmstepd would
exit $rc
EOF
chmod +x pair/send.sh

# ---------------------------------------------------------------- the cases
row 1 "hsipipe train --cache cache --folds folds99.json --fold 0 --epochs 30 $TR --resume --out runA"
row 2 "hsipipe train --cache cache --folds folds.json --fold 0 --epochs 1 $TR --resume --out runA"
if ((mounted)); then
  row 3 "hsipipe train --cache wcache --folds wfolds.json --fold 0 --model mlp --epochs 1 --out full/run" error \
    "ls full/run/fold-0 | grep -c tmp- | sed 's/^/temporary files left: /'"
  row 4 "hsipipe train --cache wcache --folds wfolds.json --fold 0 --model mlp --epochs 1 --resume --out full/run" error \
    "test -e full/run/fold-0/metrics.json && echo 'metrics.json: present' || echo 'no metrics.json: the fold is not marked done'"
else
  rows+=("| 3 | (needs root to mount a 1 MiB tmpfs) | not run | | |" "| 4 | (needs item 3's full disk) | not run | | |")
fi
row 5 "hsipipe report runM"
row 6 "hsipipe train --cache cache --folds folds.json --fold 0 --epochs 1 $TR --out runM"
row 7 "hsipipe train --cache cache --folds folds_empty2.json --fold 2 --epochs 1 $TR --out run7" error \
  "test -e run7 && echo 'run7/ left' || echo 'nothing made'"
row 8 "timeout --preserve-status -s USR1 0.2 hsipipe train --cache cache --folds folds.json --fold 0 --epochs 1 $TR --out run8" \
  "signal|error" "ls run8 2>&1 | head -1"
row 9 "pair/send.sh" "exited with status|error" "cat pair/scontrol.log"
row 10 "hsipipe train --cache cube --folds cfolds.json --fold 0 --epochs 1 $TR --out run10" error \
  "test -e run10 && echo 'run10/ left' || echo 'nothing made'"
row "10 (checkpoint)" "hsipipe train --cache cache --folds folds.json --fold 0 --epochs 30 $TR --resume --out runB"
row 11 "hsipipe decode --scene ymat.mat:Y --out c11 --normalize none --no-progress" error \
  "test -e c11 && echo 'c11 left' || echo 'nothing written'"
row 12 "hsipipe decode --scene two.mat --out c12 --normalize none --no-progress" error
row 13 "hsipipe decode --scene scene/scene.hdr --out c13 --no-progress" "decode: wrote" \
  "$PY -c \"import json; print('statistics.over:', json.load(open('c13/manifest.json'))['statistics']['over'])\""
row 14 "hsipipe decode --scene bad.hdr --labels bad_gt.hdr --out newdir/sub/cache --no-progress" error \
  "if [ -e newdir ]; then echo left: \$(find newdir); else echo 'no newdir/ (nor its lock)'; fi"
row 15 "hsipipe synth --out cache --rows 8 --cols 8 --bands 4"
row 16 "mpiexec -n 4 hsipipe decode --scene scene/scene.hdr --out x --no-progress --no-progress" error \
  "echo \"lines with 'error:' (4 ranks): \$(grep -c 'error:' last.out)\""

# ---------------------------------------------------------------- issue 43: the second battery
quiet hsipipe train --cache cache --folds folds.json --fold all --epochs 1 $TR --out runK
quiet hsipipe train --cache cache --folds folds.json --fold 0 --epochs 1 $TR --seed 2 --out runS
echo "my notes" >notes.txt
row 43.1a "hsipipe export --run runK --fold 1 --out runK/fold-1/checkpoint.pt --force" error "cmp -s runK/fold-1/checkpoint.pt runK/fold-1/checkpoint.pt && echo 'checkpoint intact'"
row 43.1b "hsipipe export --run runK --fold 1 --out notes.txt" error "cat notes.txt"
row 43.1c "hsipipe predict --run runK --fold 0 --scene scene/scene.hdr --name ../../victim --out maps43" error \
  "ls ../../victim* 2>/dev/null | head -1 || echo 'nothing outside --out'"
printf '[scene.../../x]\npath = scene/scene.hdr\n' >p43.ini
row 43.1d "hsipipe predict --config p43.ini --run runK --fold 0 --out maps43" error
quiet hsipipe predict --run runK --fold 0 --scene scene/scene.hdr --name s --out maps43
row 43.1e "hsipipe predict --run runK --fold 0 --scene scene/scene.hdr --name s --out maps43" error
row 43.1f "hsipipe folds --cache cache --k 3 --seed 1 --out notes.txt" error "cat notes.txt"
row 43.1g "hsipipe synth --out scene --rows 8 --cols 8 --bands 4" error "grep -m1 lines scene/scene.hdr"
cp runK/fold-0/checkpoint.pt ck0.pt && cp runK/fold-1/checkpoint.pt runK/fold-0/checkpoint.pt
row 43.2a "hsipipe predict --run runK --fold 0 --scene scene/scene.hdr --out maps43b" error
row 43.2b "hsipipe export --run runK --fold 0 --out m43.pt" error
row 43.2c "hsipipe report runK" error
cp runS/fold-0/checkpoint.pt runK/fold-0/checkpoint.pt
row 43.2d "hsipipe predict --run runK --ensemble --scene scene/scene.hdr --out maps43b" error
cp ck0.pt runK/fold-0/checkpoint.pt
HSIPIPE_TEST_STEP_DELAY_MS=30 hsipipe train --cache cache --folds folds.json --fold 2 --epochs 300 $TR --out runL >runL.log 2>&1 &
live=$!
for _ in $(seq 200); do [[ -e runL/fold-2/epochs.jsonl ]] && break; sleep 0.05; done
row 43.3 "hsipipe train --cache cache --folds folds.json --fold 2 --epochs 300 $TR --resume --out runL" error
kill -9 $live 2>/dev/null; wait $live 2>/dev/null
cp -r cache cache43 && "$PY" -c "
import json; m = json.load(open('cache43/manifest.json')); m['statistics']['shift'][0] += 1
open('cache43/manifest.json', 'w').write(json.dumps(m, indent=1) + '\n')"
row 43.4a "hsipipe train --cache cache43 --folds folds.json --fold 0 --epochs 1 $TR --out run43" error
cp -r runK runE && "$PY" -c "
import json; m = json.load(open('runE/preprocessing.json')); m['manifest']['label_values'].append(9)
open('runE/preprocessing.json', 'w').write(json.dumps(m, indent=1) + '\n')"
row 43.4b "hsipipe predict --run runE --fold 0 --scene scene/scene.hdr --out maps43c" error
"$PY" -c "
import numpy as np
l = np.fromfile('scene/labels.img', dtype=np.uint8).astype(np.int32); l[7] = 70000; l.tofile('big.img')
open('big.hdr', 'w').write('ENVI\nsamples = 30\nlines = 30\nbands = 1\nheader offset = 0\ndata type = 3\ninterleave = bsq\nbyte order = 0\n')"
row 43.5 "hsipipe decode --scene scene/scene.hdr --labels big.hdr --out c43 --no-progress" error
row 43.6a "hsipipe train --cache cache --folds folds.json --fold 0 --epochs 1 $TR --threads 1000 --out run43" error
row 43.6b "hsipipe train --cache cache --folds folds.json --fold 0 --epochs 1 $TR --prefetch 1000000000 --out run43" error
row 43.7a "hsipipe train --cache cache --folds /dev/zero --fold 0 --epochs 1 $TR --out run43" error
row 43.7b "hsipipe folds --check /dev/urandom --cache cache" error
row 43.9a "hsipipe train --cache cache --folds folds.json --fold 0 --epochs 1 $TR --out cache" error
row 43.9b "hsipipe train --cache cache --folds folds.json --fold 0 --epochs 1 $TR --batch 1000000000000 --out run43" error
row 43.9c "HSIPIPE_TEST_DELAY_PUBLISH_MS=4000 timeout -s TERM 1.5 hsipipe decode --scene scene/scene.hdr --out c43b --no-progress" \
  "interrupted|error" "test -e c43b && echo 'c43b published' || echo 'nothing published'"
row 43.9d "hsipipe folds --check scene --cache cache" error

# ---------------------------------------------------------------- issue 46: scene lists
quiet hsipipe synth --out lists/s0 --rows 8 --cols 8 --bands 20 --classes 3 --seed 4
for i in $(seq 1 149); do cp -r lists/s0 "lists/s$i"; done
{ echo "# 150 scenes"; for i in $(seq 0 149); do echo "s$i/scene.hdr s$i/labels.hdr s$i"; done; } >lists/all.txt
{ echo "# four scenes, the third truncated"; for i in 0 1 2 3; do echo "t$i/scene.hdr t$i/labels.hdr t$i"; done; } >lists/four.txt
for i in 0 1 2 3; do cp -r lists/s0 "lists/t$i"; done
truncate -s -64 lists/t2/scene.img
row 46.1 "mpiexec -n 2 hsipipe decode --scene-list lists/four.txt --out out46/cache --no-progress" error \
  "grep -m1 -o 'scene list [^)]*' last.out; test -e out46 && echo left: \$(find out46) || echo '; nothing made'"
row 46.2 "ulimit -n 64; mpiexec -n 2 hsipipe decode --scene-list lists/all.txt --out c46 --no-progress" "scene files:|error"
quiet hsipipe synth --out s46p --rows 30 --cols 30 --bands 20 --classes 3 --seed 5
quiet hsipipe decode --scene s46p/scene.hdr --labels s46p/labels.hdr --out c46p --no-progress
quiet hsipipe folds --cache c46p --k 2 --out f46p.json
quiet hsipipe train --cache c46p --folds f46p.json --fold 0 --epochs 1 $TR --out r46p
row 46.3 "mpiexec -n 2 hsipipe predict --run r46p --fold 0 --scene-list lists/four.txt --out maps46" error \
  "echo maps written: \$(ls maps46 2>/dev/null | grep -c _class.img)"
unset -f row

echo "| item | command | exit | message | after |"
echo "|---|---|---:|---|---|"
printf '%s\n' "${rows[@]}"
