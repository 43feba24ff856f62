# pisyncd: build, demo cluster, tests. Everything here needs only Go and
# Docker (docker-compose v1 or the compose plugin); images are FROM scratch,
# nothing is pulled.
#
#   make               bin/pisyncd, bin/pisync and the image pisyncd:dev
#   make binary        bin/pisyncd and bin/pisync (the lean client) only
#   make images        the same as make (the binaries are part of the image build)
#   make up / down     the demo: docker-compose up -d (hubs first) / down -v
#   make demo          up, then write a session on ws1 and show it on ws2
#   make test          scripts/test: go test -race ./..., then what skipped and why
#   make test-docker   the multi-host tests (test/docker, build tag docker)

COMPOSE ?= $(shell command -v docker-compose >/dev/null 2>&1 && echo docker-compose || echo docker compose)
PISYNC_DEMO_DIR ?= ./demo
export PISYNC_DEMO_DIR

.PHONY: all binary images up down demo logs status test test-docker clean

all: images

binary:
	scripts/docker-build --binary-only

images:
	scripts/docker-build

up:
	scripts/demo up

down:
	scripts/demo down

demo:
	scripts/demo

logs:
	$(COMPOSE) logs --tail=50

status:
	$(COMPOSE) exec -T ws1 /pisyncd status
	$(COMPOSE) exec -T ws2 /pisyncd status

test:
	scripts/test -count=1

test-docker:
	go test -tags docker -count=1 -timeout 20m -v ./test/docker/

clean:
	rm -rf bin
