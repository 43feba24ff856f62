//go:build docker

package docker

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// Services of docker-compose.yml.
var (
	hubs     = []string{"hub1", "hub2", "hub3"}
	stations = []string{"ws1", "ws2"}
)

// repoRoot is the module root: docker-compose.yml and scripts/ live there.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "docker-compose.yml")); err != nil {
		t.Fatalf("docker-compose.yml not found in %s: %v", root, err)
	}
	return root
}

// requireDocker skips the test unless docker, docker-compose and a reachable
// Docker daemon are present.
func requireDocker(t *testing.T) {
	t.Helper()
	for _, bin := range []string{"docker", "docker-compose"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s is not installed; skipping the multi-host Docker tests", bin)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		t.Skipf("the Docker daemon is unreachable (%v: %s); skipping the multi-host Docker tests", err, bytes.TrimSpace(out))
	}
}

var (
	buildOnce sync.Once
	buildErr  error
)

// buildImage builds bin/pisyncd and pisyncd:dev once per test binary, with
// the same script `make images` runs. PISYNC_DOCKER_NO_BUILD=1 uses the image
// as it is.
func buildImage(t *testing.T) {
	t.Helper()
	buildOnce.Do(func() {
		if os.Getenv("PISYNC_DOCKER_NO_BUILD") == "1" {
			return
		}
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, filepath.Join(repoRoot(t), "scripts", "docker-build"))
		cmd.Dir = repoRoot(t)
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("scripts/docker-build: %w\n%s", err, out)
			return
		}
		t.Logf("built pisyncd:dev in %v", time.Since(start).Round(time.Millisecond))
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
}

// stack is one docker-compose project: three hubs, two workstations, their
// sessions folders bind-mounted from a temporary folder on the host.
type stack struct {
	t       *testing.T
	root    string
	project string
	demo    string // PISYNC_DEMO_DIR: demo/ws1, demo/ws2
	env     []string
	ids     map[string]string
}

var nonAlnum = regexp.MustCompile(`[^a-z0-9]+`)

// openEnv turns the compose file's security off (an open hub, plain
// connections, no nkeys), as PISYNC_SECURE=0 scripts/demo does. The fault
// and latency tests run open so that they can read PI_HUB's replica state
// from the hubs' client port; TestSecure runs the file's secured default.
var openEnv = []string{
	"PISYNC_HUB_OPEN=true", "PISYNC_HUB_TLS_CERT=", "PISYNC_HUB_TLS_KEY=", "PISYNC_HUB_TLS_CA=",
	"PISYNC_HUB_SCHEME=nats", "PISYNC_HUB_CA=", "PISYNC_WS1_NKEY=", "PISYNC_WS2_NKEY=",
	"PISYNC_HUB_CLIENT_LISTEN=0.0.0.0:4222",
}

// newStack builds the image if needed, brings a fresh open stack up under
// a unique project name and tears it down (volumes included) when the test
// ends. It returns once every hub has PI_HUB and both daemons run.
func newStack(t *testing.T) *stack { return newStackEnv(t, openEnv...) }

// newStackEnv brings the stack up with compose variables extra on top of
// the file's defaults (secured: the pki service runs first).
func newStackEnv(t *testing.T, extra ...string) *stack {
	t.Helper()
	requireDocker(t)
	buildImage(t)
	suffix := make([]byte, 3)
	rand.Read(suffix)
	name := nonAlnum.ReplaceAllString(strings.ToLower(t.Name()), "")
	if len(name) > 20 {
		name = name[:20]
	}
	s := &stack{
		t: t, root: repoRoot(t), project: "pisynct" + name + hex.EncodeToString(suffix),
		demo: t.TempDir(), ids: map[string]string{},
	}
	for _, ws := range stations {
		if err := os.MkdirAll(filepath.Join(s.demo, ws), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s.env = append(os.Environ(),
		"PISYNC_DEMO_DIR="+s.demo,
		fmt.Sprintf("PISYNC_UID=%d", os.Getuid()),
		fmt.Sprintf("PISYNC_GID=%d", os.Getgid()),
		"PISYNC_IDLE_AFTER=300ms",
		"PISYNC_RESCAN_INTERVAL=1s",
	)
	s.env = append(s.env, extra...)
	t.Cleanup(s.down)

	start := time.Now()
	// Hubs first: a workstation that joins before PI_HUB exists has its
	// PI_ALL mirror retry with back-off, which only slows the first sync.
	s.compose(2*time.Minute, append([]string{"up", "-d", "--no-color"}, hubs...)...)
	upHubs := time.Since(start)
	for _, h := range hubs {
		s.waitLog(h, `msg="hub running"`, 1, 2*time.Minute)
	}
	hubsReady := time.Since(start)
	s.compose(2*time.Minute, append([]string{"up", "-d", "--no-color", "--no-deps"}, stations...)...)
	for _, ws := range stations {
		s.waitLog(ws, `msg="pisyncd running"`, 1, time.Minute)
	}
	t.Logf("stack %s up in %v (hub containers created %v, PI_HUB ready %v)", s.project,
		time.Since(start).Round(time.Millisecond), upHubs.Round(time.Millisecond), hubsReady.Round(time.Millisecond))
	return s
}

func (s *stack) down() {
	if s.t.Failed() || os.Getenv("PISYNC_DOCKER_LOGS") == "1" {
		for _, svc := range append(append([]string{}, hubs...), stations...) {
			out, _ := s.run(30*time.Second, "docker", "logs", "--tail", "80", s.id(svc))
			s.t.Logf("---- %s (last 80 lines)\n%s", svc, out)
		}
	}
	if os.Getenv("PISYNC_DOCKER_KEEP") == "1" {
		s.t.Logf("PISYNC_DOCKER_KEEP=1: leaving project %s up (docker-compose -p %s down -v)", s.project, s.project)
		return
	}
	start := time.Now()
	if out, err := s.run(2*time.Minute, "docker-compose", "-p", s.project, "down", "-v", "--remove-orphans", "-t", "5"); err != nil {
		s.t.Errorf("docker-compose down: %v\n%s", err, out)
	}
	s.t.Logf("stack %s down in %v", s.project, time.Since(start).Round(time.Millisecond))
}

// run runs a command in the repository root with the stack's environment.
func (s *stack) run(timeout time.Duration, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env = s.root, s.env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// compose runs docker-compose on this project and fails the test on error.
func (s *stack) compose(timeout time.Duration, args ...string) string {
	s.t.Helper()
	out, err := s.run(timeout, "docker-compose", append([]string{"-p", s.project}, args...)...)
	if err != nil {
		s.t.Fatalf("docker-compose %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// docker runs docker and fails the test on error.
func (s *stack) docker(timeout time.Duration, args ...string) string {
	s.t.Helper()
	out, err := s.run(timeout, "docker", args...)
	if err != nil {
		s.t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// id is a service's container id.
func (s *stack) id(svc string) string {
	if id, ok := s.ids[svc]; ok {
		return id
	}
	out, err := s.run(30*time.Second, "docker-compose", "-p", s.project, "ps", "-q", svc)
	id := strings.TrimSpace(out)
	if err != nil || id == "" {
		return s.project + "_" + svc + "_1"
	}
	s.ids[svc] = id
	return id
}

// network is the stack's private compose network.
func (s *stack) network() string { return s.project + "_pisync" }

// logs is everything a container wrote, across its restarts.
func (s *stack) logs(svc string) string {
	out, _ := s.run(30*time.Second, "docker", "logs", s.id(svc))
	return out
}

// waitLog waits until svc's log holds pattern at least n times.
func (s *stack) waitLog(svc, pattern string, n int, timeout time.Duration) {
	s.t.Helper()
	waitFor(s.t, timeout, func() (bool, string) {
		c := strings.Count(s.logs(svc), pattern)
		return c >= n, fmt.Sprintf("%s: %d of %d %q in its log", svc, c, n, pattern)
	})
}

// sessions is a workstation's sessions folder on the host.
func (s *stack) sessions(ws string) string { return filepath.Join(s.demo, ws) }

// status is `pisyncd status --json` of a running workstation.
type status struct {
	Tailer struct {
		LinesPublished uint64 `json:"linesPublished"`
		Malformed      uint64 `json:"malformedLines"`
		Collisions     uint64 `json:"entryCollisions"`
	} `json:"tailer"`
	Stream struct {
		Messages uint64 `json:"messages"`
	} `json:"stream"`
	Forwarder *struct {
		Forwarded uint64 `json:"forwarded"`
	} `json:"forwarder"`
	HubLinked  *bool `json:"hubLinked"`
	Replicator *struct {
		LinesWritten    uint64 `json:"linesWritten"`
		EntryCollisions uint64 `json:"entryCollisions"`
		ForkedSessions  uint64 `json:"forkedSessions"`
	} `json:"replicator"`
}

func (s *stack) status(ws string) (status, error) {
	var st status
	out, err := s.run(30*time.Second, "docker", "exec", s.id(ws), "/pisyncd", "status", "--json")
	if err != nil {
		return st, fmt.Errorf("%s: pisyncd status: %v: %s", ws, err, out)
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		return st, fmt.Errorf("%s: pisyncd status: %v: %s", ws, err, out)
	}
	return st, nil
}

// ip is a container's address on the stack's network.
func (s *stack) ip(svc string) string {
	s.t.Helper()
	out := s.docker(30*time.Second, "inspect", "-f", `{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}`, s.id(svc))
	f := strings.Fields(out)
	if len(f) == 0 {
		s.t.Fatalf("%s has no address", svc)
	}
	return f[0]
}

// waitFor polls cond every 20ms until it holds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, cond func() (bool, string)) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := start.Add(timeout)
	var why string
	for {
		var ok bool
		if ok, why = cond(); ok {
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", timeout, why)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
