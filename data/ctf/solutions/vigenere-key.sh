python3 -c "
key, out, i = 'TOOLBOX', [], 0
for c in open('cipher.txt').read().strip():
    if c.isalpha():
        out.append(chr((ord(c) - 97 - (ord(key[i % len(key)]) - 65)) % 26 + 97)); i += 1
    else:
        out.append(c)
print(''.join(out))"
