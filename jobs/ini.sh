# jobs/ini.sh: reading hsipipe INI files in bash, as hsipipe reads them ("#" or ";" starts a comment line,
# "#" also ends a value). Sourced by scripts/submit.sh and jobs/lib.sh.

# ini_value FILE SECTION KEY: the key in [SECTION], else before any section (empty when absent).
ini_value() {
  awk -v sec="$2" -v key="$3" '
    /^[ \t]*[;#]/ {next}
    /^[ \t]*\[/ {s=$0; gsub(/[ \t\[\]]/, "", s); cur=s; next}
    { line=$0; sub(/#.*/, "", line); i=index(line, "="); if (!i) next
      kk=substr(line, 1, i-1); v=substr(line, i+1); gsub(/^[ \t]+|[ \t]+$/, "", kk); gsub(/^[ \t]+|[ \t]+$/, "", v)
      if (kk!=key) next
      if (cur==sec) {found=v} else if (cur=="" && top=="") {top=v} }
    END { if (found!="") print found; else if (top!="") print top }' "$1"
}

# ini_scenes FILE: the NAMEs of FILE's [scene.NAME] sections, one per line, in the file's order (array task i
# of jobs/predict.sbatch maps the i-th).
ini_scenes() {
  awk '/^[ \t]*\[scene\.[^]]*\][ \t]*$/ { s=$0; gsub(/^[ \t]*\[scene\.|\][ \t]*$/, "", s); if (!seen[s]++) print s }' "$1"
}
