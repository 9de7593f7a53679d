cat > backup.sh <<'SH'
#!/bin/sh
# Copy every .txt file from docs/ into backup/.
mkdir -p backup
for f in docs/*.txt; do
    [ -e "$f" ] || continue
    cp "$f" backup/
done
SH
