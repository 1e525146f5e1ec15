# icplay's Python (MBPP) task image: Debian's python3 and nothing else. The interpreter
# server and client are written into /tmp/.icplay-python by icplay at the start of each
# episode, so this image never needs rebuilding when they change.
#
# Build context: the repository root (`icplay images build python`, or
#   docker build -f docker/python.Dockerfile -t icplay-python:latest .)
FROM debian:bookworm-slim

ENV DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8 PYTHONDONTWRITEBYTECODE=1

RUN apt-get update \
 && apt-get install -y --no-install-recommends bash coreutils procps python3 \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/* /var/log/apt/* /var/log/dpkg.log

WORKDIR /root
CMD ["bash"]
