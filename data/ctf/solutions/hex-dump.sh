# plain hex, 16 bytes a line: xxd -r -p turns it back into bytes
xxd -r -p dump.txt | grep -o 'icplay{[^}]*}'
