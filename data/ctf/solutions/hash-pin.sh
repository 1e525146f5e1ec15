python3 -c "
import hashlib; target = open('hash.txt').read().split('= ')[1].split()[0]
print(next(f for f in (f'icplay{{pin_{n:04d}}}' for n in range(10000)) if hashlib.sha256(f.encode()).hexdigest() == target))"
