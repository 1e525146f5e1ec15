# e = 3 and m**3 < n: c is m**3 over the integers, so m is c's integer cube root
python3 -c "
c = int(open('cipher.txt').read().split('=')[1])
lo, hi = 0, 1 << (c.bit_length() // 3 + 2)
while lo < hi:
    mid = (lo + hi) // 2
    lo, hi = (mid + 1, hi) if mid ** 3 < c else (lo, mid)
print(lo.to_bytes((lo.bit_length() + 7) // 8, 'big').decode())"
