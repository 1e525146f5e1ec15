python3 -c "print(''.join(chr(int(b, 2)) for b in open('bits.txt').read().split()))"
