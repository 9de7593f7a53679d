sed -i 's/^port = 80$/port = 8080/' app.ini
printf '\n[logging]\nlevel = debug\n' >> app.ini
