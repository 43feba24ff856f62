# pisyncd:dev, FROM scratch: the statically linked binaries (/pisyncd, and
# /pisync, the lean client for one-shot commands on a file) and nothing else.
#
# Built by scripts/docker-build (make images), whose build context is a
# staged root file system (bin/rootfs), not this repository: scratch has no
# shell and no mkdir, so the empty directories the daemon needs (/tmp, and a
# home whose state the compose file keeps in a volume) are made there with
# their modes and copied in as they are.
FROM scratch
# The version scripts/docker-build linked into the binaries (-X main.version).
ARG VERSION=devel
LABEL org.opencontainers.image.version=$VERSION
COPY . /
ENV HOME=/home/pi TMPDIR=/tmp
WORKDIR /home/pi
ENTRYPOINT ["/pisyncd"]
CMD ["run"]
