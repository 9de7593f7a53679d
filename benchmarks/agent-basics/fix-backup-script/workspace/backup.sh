#!/bin/sh
# Copy every .txt file from docs/ into backup/.
mkdir -p backup
for f in $(ls docs/*.txt); do
    cp $f backup/
done
