# Hidden check: run the agent's backup.sh on a fresh copy of docs/ with one more awkward name.
set -eu
: "${CONFINE:?run this check through evalgate, which sets CONFINE}"
rm -rf -- "${CHECKS:-/nonexistent}"  # read already: nothing for the agent's script to rewrite
ws=$(pwd)
tmp=$(mktemp -d)
cp -R "$ws/docs" "$ws/backup.sh" "$tmp/"
cd "$tmp"
printf 'added by the check\n' > "docs/new  file.txt"
# The agent's script runs confined ($CONFINE, unquoted): it cannot ptrace or patch this shell.
$CONFINE sh backup.sh
for f in docs/*.txt; do
    cmp "$f" "backup/$(basename "$f")" || { echo "not copied: $f"; exit 1; }
done
if [ -e backup/diagram.png ]; then echo "copied a non-.txt file"; exit 1; fi
n=$(ls backup | wc -l)
[ "$n" -eq 4 ] || { echo "backup/ holds $n files, expected 4"; exit 1; }
echo ok
