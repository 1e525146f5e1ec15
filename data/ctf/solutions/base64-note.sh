# the note is base64: decode it and keep the flag
base64 -d note.txt | grep -o 'icplay{[^}]*}'
