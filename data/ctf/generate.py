#!/usr/bin/env python3
"""Write the bundled CTF set's files (data/ctf/files/<id>/) from this script alone.

Run from anywhere: ``python3 data/ctf/generate.py``. Only the standard library (and git,
for one task) is used, every output is deterministic (fixed times, fixed seeds), so a
rerun rewrites the same bytes and ``git diff`` stays empty. The flags, and how to recover
each one, are in tasks.json and solutions/ -- neither is ever copied into a sandbox.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import gzip
import hashlib
import io
import os
import random
import shutil
import struct
import subprocess
import tarfile
import tempfile
import zipfile
import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
FILES = HERE / "files"
EPOCH = 1_700_000_000          # every timestamp in every archive
ZIP_DATE = (2023, 11, 14, 22, 13, 20)


def flag(name: str) -> str:
    return FLAGS[name]


FLAGS = {
    "base64-note": "icplay{b4s3_64_1s_n0t_encrypt10n}",
    "hex-dump": "icplay{h3x_t0_byt3s_w1th_xxd}",
    "rot13-memo": "icplay{r0t13_tw1c3_1s_n0th1ng}",
    "onion-layers": "icplay{p33l_3v3ry_l4y3r}",
    "binary-bits": "icplay{01101001_m34ns_i}",
    "caesar-shift": "icplay{sh1ft_by_s3v3n}",
    "vigenere-key": "icplay{vigenere_with_toolbox}",
    "xor-single-byte": "icplay{x0r_w1th_0n3_byt3}",
    "rsa-small-e": "icplay{cub3_r00t_n0_p4dd1ng}",
    "png-comment": "icplay{m3t4d4t4_t3lls_4ll}",
    "trailing-zip": "icplay{z1p_4ft3r_1end}",
    "nested-archives": "icplay{m4tryoshk4_4rch1v3s}",
    "wrong-extension": "icplay{f1l3_kn0ws_b3tt3r}",
    "git-history": "icplay{g1t_n3v3r_f0rg3ts}",
    "vault-binary": "icplay{str1ngs_0p3n_v4ults}",
    "elf-section": "icplay{s3ct10ns_h1d3_d4t4}",
    "fix-the-script": "icplay{f1x3d_th3_synt4x}",
    "license-check": "icplay{k3yg3n_r3v3rs3d}",
    "hash-pin": "icplay{pin_4821}",
}


def write(task: str, name: str, data: bytes | str, mode: int = 0o644) -> Path:
    path = FILES / task / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    os.chmod(path, mode)
    return path


def gz(data: bytes) -> bytes:
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0, filename="") as f:
        f.write(data)
    return out.getvalue()


def tar_of(members: list[tuple[str, bytes]], compression: str = "") -> bytes:
    out = io.BytesIO()
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name.rstrip("/"))
            info.mtime, info.uname, info.gname = EPOCH, "ctf", "ctf"
            if name.endswith("/"):   # a folder (git needs its empty refs/ folders)
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            else:
                info.size, info.mode = len(data), 0o644
                tar.addfile(info, io.BytesIO(data))
    data = raw.getvalue()
    if compression == "gz":
        return gz(data)
    if compression == "bz2":
        import bz2
        return bz2.compress(data, 9)
    out.write(data)
    return out.getvalue()


def zip_of(members: list[tuple[str, bytes]]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members:
            info = zipfile.ZipInfo(name, ZIP_DATE)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            z.writestr(info, data)
    return out.getvalue()


def png(width: int, height: int, pixel, text: dict[str, str] | None = None) -> bytes:
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    rows = b"".join(b"\0" + b"".join(bytes(pixel(x, y)) for x in range(width)) for y in range(height))
    out = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
    for key, value in (text or {}).items():
        out += chunk(b"tEXt", key.encode("latin-1") + b"\0" + value.encode("latin-1"))
    return out + chunk(b"IDAT", zlib.compress(rows, 9)) + chunk(b"IEND", b"")


def shift(text: str, k: int) -> str:
    out = []
    for c in text:
        if c.islower():
            out.append(chr((ord(c) - 97 + k) % 26 + 97))
        elif c.isupper():
            out.append(chr((ord(c) - 65 + k) % 26 + 65))
        else:
            out.append(c)
    return "".join(out)


# -- the tasks' files ---------------------------------------------------------------------


def base64_note() -> None:
    write("base64-note", "note.txt", base64.b64encode(f"Remember this for later: {flag('base64-note')}\n".encode())
          .decode() + "\n")


def hex_dump() -> None:
    data = f"The flag is {flag('hex-dump')}\n".encode()
    write("hex-dump", "dump.txt", "\n".join(data[i:i + 16].hex() for i in range(0, len(data), 16)) + "\n")


def rot13_memo() -> None:
    memo = ("Team memo\n\nThe quarterly review moved to Thursday.\nBring the badge you were given.\n"
            f"Access phrase for the archive: {flag('rot13-memo')}\n")
    write("rot13-memo", "memo.txt", codecs.encode(memo, "rot13"))


def onion_layers() -> None:
    data = flag("onion-layers").encode().hex().encode()      # hex
    data = base64.b32encode(data)                            # base32
    data = gz(data)                                          # gzip
    write("onion-layers", "layers.txt", base64.b64encode(data).decode() + "\n")


def binary_bits() -> None:
    write("binary-bits", "bits.txt", " ".join(f"{b:08b}" for b in flag("binary-bits").encode()) + "\n")


def caesar_shift() -> None:
    text = ("Caesar liked short messages. This one is for you:\n"
            f"{flag('caesar-shift')}\nBurn after reading.\n")
    write("caesar-shift", "cipher.txt", shift(text, 7))


def vigenere_key() -> None:
    key = "TOOLBOX"
    out, i = [], 0
    for c in flag("vigenere-key"):
        if c.isalpha():
            out.append(chr((ord(c) - 97 + ord(key[i % len(key)]) - 65) % 26 + 97))
            i += 1
        else:
            out.append(c)
    write("vigenere-key", "cipher.txt", "".join(out) + "\n")


def xor_single_byte() -> None:
    write("xor-single-byte", "secret.bin", bytes(b ^ 0x5C for b in flag("xor-single-byte").encode()))


def _is_prime(n: int, rng: random.Random) -> bool:
    if n < 2:
        return False
    for p in (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37):
        if n % p == 0:
            return n == p
    d, s = n - 1, 0
    while d % 2 == 0:
        d, s = d // 2, s + 1
    for _ in range(32):
        x = pow(rng.randrange(2, n - 1), d, n)
        if x in (1, n - 1):
            continue
        for _ in range(s - 1):
            x = pow(x, 2, n)
            if x == n - 1:
                break
        else:
            return False
    return True


def _prime(bits: int, rng: random.Random) -> int:
    while True:
        candidate = rng.getrandbits(bits) | (1 << (bits - 1)) | 1
        if candidate % 3 != 1 and _is_prime(candidate, rng):   # gcd(3, p-1) == 1, so e = 3 works
            return candidate


def rsa_small_e() -> None:
    rng = random.Random(1234)
    p, q = _prime(1024, rng), _prime(1024, rng)
    n, e = p * q, 3
    m = int.from_bytes(flag("rsa-small-e").encode(), "big")
    write("rsa-small-e", "public.txt", f"n = {n}\ne = {e}\n")
    write("rsa-small-e", "cipher.txt", f"c = {pow(m, e, n)}\n")


def png_comment() -> None:
    image = png(24, 24, lambda x, y: (x * 10, y * 10, 128),
                {"Title": "holiday", "Comment": f"do not share: {flag('png-comment')}"})
    write("png-comment", "holiday.png", image)


def trailing_zip() -> None:
    image = png(32, 16, lambda x, y: (255 - x * 8, 80, y * 16))
    write("trailing-zip", "sunset.png", image + zip_of([("flag.txt", f"{flag('trailing-zip')}\n".encode())]))


def nested_archives() -> None:
    inner = tar_of([("doll5/flag.txt", f"{flag('nested-archives')}\n".encode())], "bz2")
    middle = zip_of([("doll4.tar.bz2", inner), ("README", b"keep opening\n")])
    write("nested-archives", "doll.tar.gz", tar_of([("doll2/doll3.zip", middle)], "gz"))


def wrong_extension() -> None:
    report = ("Quarterly report\n================\nRevenue: up\nCosts: down\n"
              f"Auditor's note: {flag('wrong-extension')}\n")
    write("wrong-extension", "report.pdf", gz(report.encode()))


def git_history() -> None:
    """A project archive whose git history still holds a flag deleted from the files."""
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "project"
        repo.mkdir()
        env = {**os.environ, "GIT_AUTHOR_NAME": "dev", "GIT_AUTHOR_EMAIL": "dev@example.com",
               "GIT_COMMITTER_NAME": "dev", "GIT_COMMITTER_EMAIL": "dev@example.com",
               "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null"}

        def git(*args: str, when: int) -> None:
            subprocess.run(["git", "-c", "init.defaultBranch=main", *args], cwd=repo, check=True,
                           capture_output=True,
                           env={**env, "GIT_AUTHOR_DATE": f"{when} +0000", "GIT_COMMITTER_DATE": f"{when} +0000"})

        git("init", "-q", "--template=", when=EPOCH)
        (repo / "app.py").write_text("print('hello')\n")
        (repo / "config.ini").write_text(f"[secrets]\ntoken = {flag('git-history')}\n")
        git("add", "-A", when=EPOCH)
        git("commit", "-q", "-m", "first version", when=EPOCH)
        (repo / "config.ini").write_text("[secrets]\ntoken = CHANGEME\n")
        git("commit", "-q", "-am", "remove the token from the config", when=EPOCH + 60)
        (repo / "app.py").write_text("print('hello, world')\n")
        git("commit", "-q", "-am", "greet the world", when=EPOCH + 120)
        git("gc", "-q", "--aggressive", when=EPOCH + 180)
        for name in ("index", "logs", "COMMIT_EDITMSG", "ORIG_HEAD", "description"):
            path = repo / ".git" / name
            if path.is_dir():
                shutil.rmtree(path)
            elif path.exists():
                path.unlink()
        members = []
        for path in sorted(repo.rglob("*")):
            name = str(path.relative_to(repo.parent))
            members.append((name + "/", b"") if path.is_dir() else (name, path.read_bytes()))
        write("git-history", "project.tar.gz", tar_of(members, "gz"))


def c_string(data: bytes) -> str:
    return "{" + ", ".join(str(b) for b in data) + "}"


def vault_binary() -> None:
    """A binary (compiled by the task's setup; its source is removed before the solver
    starts) that prints the flag for the right password."""
    secret = flag("vault-binary").encode()
    source = f"""#include <stdio.h>
#include <string.h>
static const char password[] = "OPEN_SESAME_42";
static const unsigned char sealed[] = {c_string(bytes(b ^ 0x13 for b in secret))};
int main(int argc, char **argv) {{
    if (argc != 2) {{ fprintf(stderr, "usage: %s PASSWORD\\n", argv[0]); return 2; }}
    size_t n = strlen(argv[1]);
    if (n != strlen(password)) {{ puts("wrong password"); return 1; }}
    for (size_t i = 0; i < n; i++) {{
        char c = argv[1][i];
        if (c >= 'a' && c <= 'z') c -= 32;   /* the check ignores case */
        if (c != password[i]) {{ puts("wrong password"); return 1; }}
    }}
    for (size_t i = 0; i < sizeof sealed; i++) putchar(sealed[i] ^ 0x13);
    putchar('\\n');
    return 0;
}}
"""
    write("vault-binary", ".build/vault.c", source)


def elf_section() -> None:
    encoded = base64.b64encode(flag("elf-section").encode()).decode()
    source = f"""#include <stdio.h>
__attribute__((used, section(".icplay_note"))) static const char note[] = "{encoded}";
int main(void) {{
    puts("Nothing to see here.");
    return 0;
}}
"""
    write("elf-section", ".build/quiet.c", source)


def fix_the_script() -> None:
    data = [b ^ 0x2A for b in flag("fix-the-script").encode()]
    script = f"""#!/usr/bin/env python3
# Prints the flag... once it runs.
data = {data}
key = 0x2A

def decode(values)
    return "".join(chr(v ^ key) for v in values)

print(decode(data)
"""
    write("fix-the-script", "decode.py", script, 0o755)


def license_check() -> None:
    key = flag("license-check")[len("icplay{"):-1]
    table = [(ord(c) * 7 + 3) % 128 for c in key]
    script = f"""#!/usr/bin/env python3
\"\"\"License checker. Usage: python3 checker.py KEY\"\"\"
import sys

TABLE = {table}


def valid(key: str) -> bool:
    return len(key) == len(TABLE) and all((ord(c) * 7 + 3) % 128 == t for c, t in zip(key, TABLE))


if __name__ == "__main__":
    if len(sys.argv) != 2 or not valid(sys.argv[1]):
        print("invalid license key")
        sys.exit(1)
    print("valid! the flag is icplay{{" + sys.argv[1] + "}}")
"""
    write("license-check", "checker.py", script, 0o755)


def hash_pin() -> None:
    digest = hashlib.sha256(flag("hash-pin").encode()).hexdigest()
    write("hash-pin", "hash.txt", f"sha256(flag) = {digest}\nflag format: icplay{{pin_NNNN}} (four digits)\n")


MAKERS = [base64_note, hex_dump, rot13_memo, onion_layers, binary_bits, caesar_shift, vigenere_key,
          xor_single_byte, rsa_small_e, png_comment, trailing_zip, nested_archives, wrong_extension,
          git_history, vault_binary, elf_section, fix_the_script, license_check, hash_pin]


def main() -> None:
    if FILES.exists():
        shutil.rmtree(FILES)
    for make in MAKERS:
        make()
    print(f"wrote {sum(1 for p in FILES.rglob('*') if p.is_file())} files for {len(MAKERS)} tasks under {FILES}")


if __name__ == "__main__":
    main()
