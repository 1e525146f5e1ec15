# try all 26 shifts; the right one reads "icplay{"
for k in $(seq 0 25); do python3 -c "
import sys; k=int(sys.argv[1])
print(''.join(chr((ord(c)-97+k)%26+97) if c.islower() else chr((ord(c)-65+k)%26+65) if c.isupper() else c for c in open('cipher.txt').read()))" $k; done | grep -o 'icplay{[^}]*}'
