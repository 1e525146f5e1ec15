#!/usr/bin/env bash
# Provision what icplay's Docker, Podman and bwrap sandboxes need on a Debian/Ubuntu machine:
#   1. apt packages (docker.io, podman, bubblewrap, debootstrap, tmux, git, ca-certificates, and
#      the host tools the bundled Bash tasks use on bwrap: tree gawk jq file hashdeep procps), if missing;
#   2. a Docker daemon: `dockerd` started in the background when `docker info` fails;
#   3. the base image debian:bookworm-slim: pulled if possible, else built locally with
#      debootstrap (for machines without access to a container registry);
#   4. the same base image in Podman's storage, copied from Docker's (`docker save | podman
#      load`: no registry needed). Podman needs no daemon: icplay starts its API service.
# Idempotent: run it as often as you like; it only does what is missing and says what it did.
#
# Settings (environment):
#   DOCKERD_LOG        dockerd's log file            (default /var/log/icplay-dockerd.log)
#   DOCKERD_ARGS       extra arguments for dockerd   (default none)
#   DOCKERD_WAIT       seconds to wait for dockerd   (default 60)
#   BASE_IMAGE         the base image to provide     (default debian:bookworm-slim)
#   BASE_SUITE         Debian suite for debootstrap  (default bookworm)
#   DEBIAN_MIRROR      mirror for debootstrap        (default: apt's configured Debian mirror)
#   PULL_TIMEOUT       seconds for `docker pull`     (default 20)
set -euo pipefail

DOCKERD_LOG=${DOCKERD_LOG:-/var/log/icplay-dockerd.log}
DOCKERD_ARGS=${DOCKERD_ARGS:-}
DOCKERD_WAIT=${DOCKERD_WAIT:-60}
BASE_IMAGE=${BASE_IMAGE:-debian:bookworm-slim}
BASE_SUITE=${BASE_SUITE:-bookworm}
PULL_TIMEOUT=${PULL_TIMEOUT:-20}

DID=()
log() { echo "provision-docker: $*" >&2; }
did() { DID+=("$*"); log "$*"; }
die() { log "ERROR: $*"; exit 1; }

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || die "not root and no sudo: run this script as root"
    SUDO=(sudo -n)
fi
export PATH="$PATH:/usr/sbin:/sbin"

# ---------------------------------------------------------------- 1. apt packages
# package -> a command that proves it is installed (empty: ask dpkg). Probing commands
# rather than packages leaves a docker-ce or hand-installed daemon alone.
declare -A PROBE=(
    [docker.io]=dockerd [podman]=podman [bubblewrap]=bwrap [debootstrap]=debootstrap
    [tmux]=tmux [git]=git [ca-certificates]=
    [tree]=tree [gawk]=gawk [jq]=jq [file]=file [hashdeep]=md5deep [procps]=ps
    [chromium]=chromium [chromium-driver]=chromedriver
)
missing=()
# The tools after ca-certificates are what the bundled Bash tasks use: on the bwrap sandbox
# they come from the host's /usr. Chromium and its driver: the tests of the HTML study report
# and of the browser seat open them in a real headless browser (Selenium drives it).
for pkg in docker.io podman bubblewrap debootstrap tmux git ca-certificates tree gawk jq file hashdeep procps \
           chromium chromium-driver; do
    probe=${PROBE[$pkg]}
    if [ -n "$probe" ]; then
        command -v "$probe" >/dev/null 2>&1 || missing+=("$pkg")
    elif ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$pkg")
    fi
done
if [ ! -e /usr/share/keyrings/debian-archive-keyring.gpg ]; then
    missing+=(debian-archive-keyring)   # debootstrap of Debian on a non-Debian host
fi
if [ ${#missing[@]} -gt 0 ]; then
    log "installing apt packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    "${SUDO[@]}" apt-get -o DPkg::Lock::Timeout=600 update -qq
    "${SUDO[@]}" apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends \
        "${missing[@]}" >/dev/null
    did "installed apt packages: ${missing[*]}"
else
    log "apt packages present"
fi

# ---------------------------------------------------------------- 2. the Docker daemon
docker_up() { "${SUDO[@]}" docker info >/dev/null 2>&1; }

if docker_up; then
    log "Docker daemon answers"
else
    if pgrep -x dockerd >/dev/null 2>&1; then
        log "dockerd is running but does not answer yet; waiting"
    elif [ -d /run/systemd/system ] && command -v systemctl >/dev/null \
            && "${SUDO[@]}" systemctl start docker 2>/dev/null; then
        did "started Docker with systemctl"
    else
        "${SUDO[@]}" mkdir -p "$(dirname "$DOCKERD_LOG")"
        # setsid + nohup: the daemon survives the end of this script and of its terminal.
        # The redirections happen inside the (possibly sudo'ed) shell, so the log may be
        # a root-owned file.
        # shellcheck disable=SC2016,SC2086
        "${SUDO[@]}" sh -c 'setsid nohup dockerd "$@" >>"$0" 2>&1 </dev/null &' "$DOCKERD_LOG" $DOCKERD_ARGS
        did "started dockerd in the background (log: $DOCKERD_LOG)"
    fi
    for ((i = 0; i < DOCKERD_WAIT; i++)); do
        docker_up && break
        sleep 1
    done
    if ! docker_up; then
        tail -n 20 "$DOCKERD_LOG" >&2 2>/dev/null || true
        die "the Docker daemon did not answer within ${DOCKERD_WAIT}s; see $DOCKERD_LOG"
    fi
    log "Docker daemon answers after ${i}s"
fi

# ---------------------------------------------------------------- 3. the base image
apt_uris() {
    # Every URI of apt's configuration, one-line (.list) or deb822 (.sources) style.
    local files=(/etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources)
    grep -hsE '^[[:space:]]*(deb[[:space:]]|URIs:)' "${files[@]}" 2>/dev/null \
        | grep -oE '(https?|file)://[^[:space:]]+' || true
}
apt_mirror() { apt_uris | grep -E '/debian/?$' | head -n 1; }
security_mirror() { apt_uris | grep -E '/debian-security/?$' | head -n 1; }

build_base_image() {
    local mirror security rootfs
    mirror=${DEBIAN_MIRROR:-$(apt_mirror)}
    mirror=${mirror:-http://deb.debian.org/debian}
    security=$(security_mirror)
    rootfs=$(mktemp -d /var/tmp/icplay-rootfs.XXXXXX)
    # shellcheck disable=SC2064
    trap "${SUDO[*]} rm -rf '$rootfs'" EXIT
    log "building $BASE_IMAGE with debootstrap ($BASE_SUITE from $mirror); takes a few minutes"
    if ! "${SUDO[@]}" debootstrap --variant=minbase "$BASE_SUITE" "$rootfs" "$mirror" >/dev/null; then
        tail -n 20 "$rootfs/debootstrap/debootstrap.log" >&2 2>/dev/null || true
        die "debootstrap failed"
    fi

    # Make it look like the official slim image: later apt-get installs skip docs, man
    # pages and locales; apt caches are cleaned; apt sources in deb822 form.
    "${SUDO[@]}" tee "$rootfs/etc/dpkg/dpkg.cfg.d/docker" >/dev/null <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
EOF
    "${SUDO[@]}" tee "$rootfs/etc/apt/apt.conf.d/docker-clean" >/dev/null <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
    echo 'Acquire::Languages "none";' | "${SUDO[@]}" tee "$rootfs/etc/apt/apt.conf.d/docker-no-languages" >/dev/null
    {
        printf 'Types: deb\nURIs: %s\nSuites: %s %s-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
            "$mirror" "$BASE_SUITE" "$BASE_SUITE"
        if [ -n "$security" ]; then
            printf '\nTypes: deb\nURIs: %s\nSuites: %s-security\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
                "$security" "$BASE_SUITE"
        fi
    } | "${SUDO[@]}" tee "$rootfs/etc/apt/sources.list.d/debian.sources" >/dev/null
    "${SUDO[@]}" rm -f "$rootfs/etc/apt/sources.list"
    "${SUDO[@]}" sh -c "cd '$rootfs' && rm -rf var/lib/apt/lists/* var/cache/apt/* \
        var/cache/debconf/*-old var/log/*.log var/log/apt/* usr/share/doc/*/changelog* \
        usr/share/man/* usr/share/info/* debootstrap tmp/* \
        && find usr/share/locale -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} + \
        && find usr/share/doc -mindepth 1 ! -type d ! -name copyright -delete \
        && find usr/share/doc -mindepth 1 -type d -empty -delete \
        && : > etc/hostname && : > etc/resolv.conf"

    "${SUDO[@]}" tar -C "$rootfs" --numeric-owner -c . | "${SUDO[@]}" docker import \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'CMD ["bash"]' \
        --message "icplay ci/provision-docker.sh: debootstrap --variant=minbase $BASE_SUITE $mirror" \
        - "$BASE_IMAGE" >/dev/null
    "${SUDO[@]}" rm -rf "$rootfs"
    trap - EXIT
}

if "${SUDO[@]}" docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
    log "image $BASE_IMAGE present"
elif timeout "$PULL_TIMEOUT" "${SUDO[@]}" docker pull -q "$BASE_IMAGE" >/dev/null 2>&1; then
    did "pulled $BASE_IMAGE"
else
    log "cannot pull $BASE_IMAGE (no registry reachable within ${PULL_TIMEOUT}s)"
    start=$SECONDS
    build_base_image
    size=$("${SUDO[@]}" docker image inspect -f '{{.Size}}' "$BASE_IMAGE" | awk '{printf "%.0f MB", $1 / 1e6}')
    did "built $BASE_IMAGE locally with debootstrap in $((SECONDS - start))s ($size)"
fi

# ---------------------------------------------------------------- 4. the base image for Podman
if "${SUDO[@]}" podman image exists "$BASE_IMAGE" 2>/dev/null; then
    log "image $BASE_IMAGE present in Podman"
else
    "${SUDO[@]}" docker save "$BASE_IMAGE" | "${SUDO[@]}" podman load -q >/dev/null \
        || die "could not copy $BASE_IMAGE from Docker to Podman (docker save | podman load)"
    did "copied $BASE_IMAGE from Docker to Podman"
fi

if [ ${#DID[@]} -eq 0 ]; then
    echo "provision-docker: nothing to do; Docker, Podman and $BASE_IMAGE are ready"
else
    echo "provision-docker: done:"
    printf '  - %s\n' "${DID[@]}"
fi
