printf 'Hello, evalgate!\n' > hello.txt
