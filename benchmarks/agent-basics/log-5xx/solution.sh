awk '$9 ~ /^5[0-9][0-9]$/ { print $1 }' access.log | sort -u | wc -l | tr -d ' ' > answer.txt
