#!/usr/bin/env python3
# Prints the flag... once it runs.
data = [67, 73, 90, 70, 75, 83, 81, 76, 27, 82, 25, 78, 117, 94, 66, 25, 117, 89, 83, 68, 94, 30, 82, 87]
key = 0x2A

def decode(values)
    return "".join(chr(v ^ key) for v in values)

print(decode(data)
