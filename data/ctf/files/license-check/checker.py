#!/usr/bin/env python3
"""License checker. Usage: python3 checker.py KEY"""
import sys

TABLE = [112, 104, 82, 84, 104, 5, 28, 33, 104, 61, 104, 33, 40, 104, 63]


def valid(key: str) -> bool:
    return len(key) == len(TABLE) and all((ord(c) * 7 + 3) % 128 == t for c, t in zip(key, TABLE))


if __name__ == "__main__":
    if len(sys.argv) != 2 or not valid(sys.argv[1]):
        print("invalid license key")
        sys.exit(1)
    print("valid! the flag is icplay{" + sys.argv[1] + "}")
