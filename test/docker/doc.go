// Package docker holds pisyncd's multi-host tests: the three hub nodes and
// two workstations of the top-level docker-compose.yml, each in its own
// container, driven from the host. They need Docker and docker-compose and
// run only with the build tag:
//
//	go test -tags docker -count=1 -v ./test/docker/
//
// Without Docker they skip. docs/CLUSTER.md describes the stack, the fault
// tests and the figures they measure.
package docker
