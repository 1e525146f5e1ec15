# icplay's CTF image: InterCode-CTF's tool set on Debian. It holds tools only: each episode
# copies its task's files to /ctf/<id> (InterCode's sets live outside the repository, and
# the bundled set's solution notes must never be inside), so the image does not change
# when tasks do.
#
# Build context: the repository root (`icplay images build ctf`, or
#   docker build -f docker/ctf.Dockerfile -t icplay-ctf:latest .)
FROM debian:bookworm-slim

ENV DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8

# InterCode's ctf.Dockerfile list (bash python3 psmisc bsdmainutils imagemagick dnsutils git
# wget gcc sleuthkit netcat unzip curl gdb poppler-utils, pip's pycryptodome) plus the tools
# the issue names: pycryptodome from Debian (python3-pycryptodome provides `Crypto`),
# binutils, file, xxd, exiftool (libimage-exiftool-perl), binwalk. Not installed: cron
# (no daemons in a sandbox) and pip (no network in an episode).
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
        bash coreutils findutils grep sed gawk procps psmisc bsdextrautils less \
        python3 python3-pycryptodome \
        gcc libc6-dev gdb binutils file xxd \
        unzip zip bzip2 xz-utils gzip tar \
        netcat-openbsd curl wget dnsutils git ca-certificates \
        sleuthkit poppler-utils imagemagick libimage-exiftool-perl binwalk \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/* /var/log/apt/* /var/log/dpkg.log

# Debian's pycryptodome is the `Cryptodome` package; CTF scripts import `Crypto` (the
# PyPI name), which this link provides without pip or network.
RUN ln -s Cryptodome /usr/lib/python3/dist-packages/Crypto \
 && python3 -c "from Crypto.Cipher import AES; from Crypto.Util.number import long_to_bytes"

# /ctf is a link into /opt: on icplay's images the root filesystem is read-only and /opt is
# one of the writable (sized tmpfs) folders, so the task's files can be copied in at the
# start of an episode, changed by the solver, and the container recycled afterwards.
# WORKDIR stays /: at container start /opt is still an empty tmpfs, and runc refuses a
# working directory behind a dangling link (the session shell cds to /ctf/<id> itself).
RUN mkdir -p /opt/ctf && ln -s /opt/ctf /ctf
WORKDIR /
CMD ["bash"]
