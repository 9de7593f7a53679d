# Hidden check: run the agent's backup.sh on a docs/ this check makes (awkward names, one more
# than the workspace has), and judge backup/ against the names and contents the check holds in
# its own memory. Never against docs/ or any file read after the script ran: the script runs as
# the same user and could rewrite them; this shell's memory it cannot reach ($CONFINE).
set -euf
: "${CONFINE:?run this check through evalgate, which sets CONFINE}"
rm -rf -- "${CHECKS:-/nonexistent}"  # read already: nothing for the agent's script to rewrite
ws=$(pwd)
tmp=$(mktemp -d)
cp "$ws/backup.sh" "$tmp/"
cd "$tmp"
nl='
'
names="notes.txt${nl}meeting notes.txt${nl}todo list.txt${nl}new  file.txt"
mkdir docs
IFS=$nl
for name in $names; do
    printf 'the text of %s\n' "$name" > "docs/$name"
done
printf '\211PNG not text\n' > docs/diagram.png
unset IFS
# The agent's script runs confined ($CONFINE, unquoted): it cannot ptrace or patch this shell.
$CONFINE sh backup.sh
IFS=$nl
for name in $names; do
    f="backup/$name"
    if [ -L "$f" ] || [ ! -f "$f" ] || [ "$(cat -- "$f")" != "the text of $name" ]; then
        echo "not copied: docs/$name"
        exit 1
    fi
done
unset IFS
if [ -e backup/diagram.png ]; then echo "copied a non-.txt file"; exit 1; fi
n=$(ls -A backup | wc -l)
[ "$n" -eq 4 ] || { echo "backup/ holds $n files, expected 4"; exit 1; }
echo ok
