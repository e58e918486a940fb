#!/usr/bin/env bash
# hsipipe stage on real caches (made by synth + decode), without Slurm: copy once, reuse, concurrent
# callers wait on the lock and reuse, corrupted / truncated / incomplete copies are detected and
# replaced, a corrupt source or a bad DEST is refused with nothing left behind.
source "$(dirname "$0")/common.sh"
need_commands synth decode stage

W=$(mktemp -d "${TMPDIR:-/tmp}/hsipipe-stage-test.XXXXXX")
trap 'rm -rf "$W"' EXIT
H=$HSIPIPE_BIN

"$H" synth --out "$W/scene" --rows 24 --cols 20 --bands 12 --seed 3 >/dev/null
"$H" decode --scene "$W/scene/scene.hdr" --labels "$W/scene/labels.hdr" --layout pixel --dtype float32 \
  --backend npy --out "$W/cache" --no-progress >/dev/null
[[ -f $W/cache/manifest.json && -f $W/cache/samples.npy ]] || fail "decode did not produce an npy cache"

same_tree() {  # same_tree A B: same files with the same bytes (B may hold stage.json in addition)
  local f
  (cd "$1" && find . -type f | sort) | while read -r f; do
    cmp -s "$1/$f" "$2/$f" || { echo "differs: $f"; return 1; }
  done
}

# 1. First call copies, verifies and publishes.
D=$W/local/a/cache
out=$("$H" stage "$W/cache" "$D")
echo "$out"
grep -q "copied to $D" <<<"$out" || fail "first stage did not copy"
grep -q "data checksum $(sed -n 's/.*"data_checksum": *"\([0-9a-f]*\)".*/\1/p' "$W/cache/manifest.json") ok" <<<"$out" \
  || fail "stage did not report the manifest's data checksum"
same_tree "$W/cache" "$D" || fail "the copy differs from the source"
[[ -f $D/stage.json ]] || fail "no stage record"
ls "$W/local/a" | grep -q 'tmp-' && fail "temporary directory left behind"
ok "copy"

# 2. Second call reuses the valid copy and writes nothing.
before=$(stat -c %Y.%i "$D/samples.npy")
out=$("$H" stage "$W/cache" "$D")
grep -q "reused the valid copy at $D" <<<"$out" || fail "second stage did not reuse: $out"
[[ $(stat -c %Y.%i "$D/samples.npy") == "$before" ]] || fail "reuse rewrote samples.npy"
ok "reuse"

# 3. Concurrent callers on a fresh DEST: while someone holds the lock both wait; then exactly one
#    copies and the other reuses that copy.
D2=$W/local/b/cache
mkdir -p "$W/local/b"
flock "$D2.lock" sleep 2 &
holder=$!
sleep 0.3
"$H" stage "$W/cache" "$D2" >"$W/s1.log" 2>&1 &
p1=$!
"$H" stage "$W/cache" "$D2" >"$W/s2.log" 2>&1 &
p2=$!
wait "$p1" || fail "concurrent stage 1 failed: $(cat "$W/s1.log")"
wait "$p2" || fail "concurrent stage 2 failed: $(cat "$W/s2.log")"
wait "$holder"
cat "$W/s1.log" "$W/s2.log"
grep -q "waiting for $D2.lock" "$W/s1.log" || fail "stage 1 did not wait for the held lock"
grep -q "waiting for $D2.lock" "$W/s2.log" || fail "stage 2 did not wait for the held lock"
[[ $(cat "$W/s1.log" "$W/s2.log" | grep -c "copied to $D2") == 1 ]] || fail "not exactly one copy"
[[ $(cat "$W/s1.log" "$W/s2.log" | grep -c "reused the valid copy at $D2") == 1 ]] || fail "not exactly one reuse"
same_tree "$W/cache" "$D2" || fail "concurrent copy differs from the source"
ok "lock: one copy, one reuse"

# 4. A corrupted byte (same size, same mtime) in the samples of the copy is detected and replaced.
off=$(( $(stat -c %s "$D/samples.npy") - 5 ))
mtime=$(stat -c %y "$D/samples.npy")
flip_byte "$D/samples.npy" "$off"
touch -d "$mtime" "$D/samples.npy"
cmp -s "$W/cache/samples.npy" "$D/samples.npy" && fail "test bug: corruption did not happen"
out=$("$H" stage "$W/cache" "$D")
echo "$out"
grep -q "samples.npy: content changed since it was staged" <<<"$out" || fail "corruption not named"
grep -q "replaced the invalid copy at $D" <<<"$out" || fail "corrupted copy not replaced"
same_tree "$W/cache" "$D" || fail "replaced copy differs from the source"
ok "corrupted samples replaced"

# 5. Corruption of the labels (covered by the data checksum and the record), a truncated file, a
#    missing file and a foreign manifest are all replaced; a copy holding a file a cache does not (a user's)
#    is refused, naming it, and nothing is deleted.
flip_byte "$D/labels.npy" $(( $(stat -c %s "$D/labels.npy") - 1 ))
grep -q "replaced the invalid copy" <<<"$("$H" stage "$W/cache" "$D")" || fail "corrupted labels not replaced"
truncate -s -4 "$D/coords.npy"
grep -q "coords.npy: .* bytes, staged" <<<"$("$H" stage "$W/cache" "$D")" || fail "truncated coords not detected"
rm "$D/labels.npy"
grep -q "labels.npy: missing" <<<"$("$H" stage "$W/cache" "$D")" || fail "missing labels not detected"
echo x >"$D/extra.bin"
out=$("$H" stage "$W/cache" "$D" 2>&1) && fail "a copy holding a user's file was replaced: $out"
grep -q "holds 1 file that a cache does not (extra.bin)" <<<"$out" || fail "stray file not named: $out"
[[ -e $D/extra.bin ]] || fail "the user's file was deleted"
rm "$D/extra.bin"
rm "$D/stage.json"
grep -q "stage.json: missing" <<<"$("$H" stage "$W/cache" "$D")" || fail "copy without record accepted"
sed -i 's/"n_samples"/"n_samples" /' "$D/manifest.json"
grep -q "differs from the source's manifest" <<<"$("$H" stage "$W/cache" "$D")" || fail "foreign manifest accepted"
same_tree "$W/cache" "$D" || fail "copy differs from the source after the replacements"
grep -q "reused the valid copy" <<<"$("$H" stage "$W/cache" "$D")" || fail "final copy not reused"
ok "labels, truncation, missing, stray file refused, missing record, foreign manifest"

# 6. Leftovers of a crashed stage (DEST.tmp-*) are removed under the lock.
mkdir -p "$D.tmp-deadhost-999" && echo junk >"$D.tmp-deadhost-999/samples.npy"
out=$("$H" stage "$W/cache" "$D")
grep -q "removing leftover $D.tmp-deadhost-999" <<<"$out" || fail "leftover not removed: $out"
[[ ! -e $D.tmp-deadhost-999 ]] || fail "leftover still there"
ok "leftovers"

# 7. A corrupt SOURCE is refused (its copy fails the data checksum): exit 5, nothing at DEST.
cp -r "$W/cache" "$W/badcache"
flip_byte "$W/badcache/samples.npy" $(( $(stat -c %s "$W/badcache/samples.npy") - 9 ))
set +e
out=$("$H" stage "$W/badcache" "$W/local/c/cache" 2>&1)
rc=$?
set -e
echo "$out"
[[ $rc == 5 ]] || fail "corrupt source: exit $rc, expected 5 (StaleError)"
grep -q "fails its data checksum" <<<"$out" || fail "corrupt source: message does not say why"
[[ -z $(ls -A "$W/local/c" | grep -v '^cache.lock$' || true) ]] || fail "corrupt source left files: $(ls -A "$W/local/c")"
ok "corrupt source refused"

# 8. Not a cache; DEST inside the source; a missing argument.
mkdir -p "$W/empty"
set +e
"$H" stage "$W/empty" "$W/local/d/cache" >"$W/e.log" 2>&1; rc1=$?
"$H" stage "$W/cache" "$W/cache/inner" >"$W/f.log" 2>&1; rc2=$?
"$H" stage "$W/cache" >"$W/g.log" 2>&1; rc3=$?
set -e
[[ $rc1 != 0 && ! -e $W/local/d/cache ]] || fail "a directory without manifest was staged"
grep -q "manifest" "$W/e.log" || fail "no manifest: message does not say so: $(cat "$W/e.log")"
[[ $rc2 == 2 ]] && grep -q "overlap" "$W/f.log" || fail "DEST inside CACHE: exit $rc2 $(cat "$W/f.log")"
[[ $rc3 == 2 ]] || fail "missing DEST: exit $rc3"
ok "bad arguments refused"

# 9. DEST holding someone else's files (neither a cache nor a staged copy) is refused and left alone.
mkdir -p "$W/mine/sub" && echo precious >"$W/mine/important.txt" && echo x >"$W/plainfile"
set +e
"$H" stage "$W/cache" "$W/mine" >"$W/h.log" 2>&1; rc1=$?
"$H" stage "$W/cache" "$W/plainfile" >"$W/i.log" 2>&1; rc2=$?
set -e
[[ $rc1 == 2 && $(cat "$W/mine/important.txt") == precious && -d $W/mine/sub ]] || fail "a user's folder at DEST: exit $rc1 $(cat "$W/h.log")"
grep -q "is not a cache or a staged copy" "$W/h.log" || fail "a user's folder at DEST: message $(cat "$W/h.log")"
[[ $rc2 == 2 && $(cat "$W/plainfile") == x ]] || fail "a plain file at DEST: exit $rc2 $(cat "$W/i.log")"
ok "a DEST that is not a cache or a copy is refused, untouched"
echo "PASS"
