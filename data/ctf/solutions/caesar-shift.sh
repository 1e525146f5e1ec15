# try all 26 shifts (in one python3: 26 of them took over the 10 s limit under load); the right one reads "icplay{"
python3 -c "
text = open('cipher.txt').read()
for k in range(26):
    print(''.join(chr((ord(c)-97+k)%26+97) if c.islower() else chr((ord(c)-65+k)%26+65) if c.isupper() else c for c in text))" | grep -o 'icplay{[^}]*}'
