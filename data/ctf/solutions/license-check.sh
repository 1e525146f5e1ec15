# invert (ord(c) * 7 + 3) % 128: 7 * 55 = 385 = 1 (mod 128), so ord(c) = (t - 3) * 55 % 128
python3 -c "
import re; table = eval(re.search(r'TABLE = (\[.*\])', open('checker.py').read()).group(1))
print(''.join(chr((t - 3) * 55 % 128) for t in table))" > /tmp/key && python3 checker.py "$(cat /tmp/key)" | grep -o 'icplay{[^}]*}'
