package main

import (
	"bytes"
	"encoding/xml"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/pisyncd/pisyncd/config"
)

func TestServiceFiles(t *testing.T) {
	unit, err := serviceFile("systemd", "/opt/bin/pisyncd", "/home/u")
	if err != nil || !bytes.Contains(unit, []byte("ExecStart=/opt/bin/pisyncd run\n")) || !bytes.Contains(unit, []byte("WantedBy=default.target")) {
		t.Fatalf("systemd unit: %v\n%s", err, unit)
	}
	plist, err := serviceFile("launchd", "/opt/bin/pisyncd", "/Users/u")
	if err != nil || !bytes.Contains(plist, []byte("<string>/opt/bin/pisyncd</string>")) {
		t.Fatalf("launchd plist: %v\n%s", err, plist)
	}
	if err := xml.Unmarshal(plist, new(struct{})); err != nil {
		t.Fatalf("plist is not well-formed XML: %v", err)
	}
	if _, err := serviceFile("upstart", "x", "y"); err == nil {
		t.Error("unknown kind accepted")
	}
	home := t.TempDir()
	var out bytes.Buffer
	if err := writeService("systemd", "/opt/bin/pisyncd", home, true, &out); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(home, ".config", "systemd", "user", "pisyncd.service")
	if st, err := os.Stat(p); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("installed unit: %v %v", st, err)
	}
	if err := writeService("systemd", "/opt/bin/pisyncd", home, true, &out); err == nil || !strings.Contains(err.Error(), "exists already") {
		t.Errorf("second install: %v", err)
	}
}

// TestServiceRefusesGoRun: under `go run` (or `go test`) the binary lives
// in a go-build folder Go deletes; a unit pointing there would start
// nothing, so `pisyncd service` refuses and says how to build one to keep.
// (Before, it printed and installed such a unit without a word.)
func TestServiceRefusesGoRun(t *testing.T) {
	for exe, want := range map[string]bool{
		"/tmp/go-build3319326371/b001/exe/pisyncd":                 true,
		"/home/u/.cache/go-build/ab/go-build123/b001/pisyncd.test": true,
		"/home/u/.local/bin/pisyncd":                               false,
		"/usr/local/bin/pisyncd":                                   false,
		"/home/u/src/go-builder/pisyncd":                           false,
	} {
		if got := temporaryBuild(exe); got != want {
			t.Errorf("temporaryBuild(%s) = %v, want %v", exe, got, want)
		}
	}
	// This test's own binary is such a build.
	exe, _ := os.Executable()
	exe, _ = filepath.EvalSymlinks(exe)
	if !temporaryBuild(exe) {
		t.Fatalf("the test binary %s is not in a go-build folder: run it with go test", exe)
	}
	t.Setenv("HOME", t.TempDir())
	var out bytes.Buffer
	err := serviceCommand([]string{"systemd", "--install"}, &out)
	if err == nil || !strings.Contains(err.Error(), "temporary build") || !strings.Contains(err.Error(), "go build -o") {
		t.Errorf("service under go test: %v", err)
	}
	if out.Len() != 0 {
		t.Errorf("printed a unit anyway:\n%s", out.String())
	}
}

// TestDeployedServiceFiles: the files in deploy/ are what `pisyncd
// service` prints for a binary in /usr/local/bin, so the two never drift
// apart (they had: a fix to one is a fix to both).
func TestDeployedServiceFiles(t *testing.T) {
	for kind, c := range map[string]struct{ file, home string }{
		"systemd": {"../../deploy/systemd/pisyncd.service", "/home/YOU"},
		"launchd": {"../../deploy/launchd/io.pisyncd.plist", "/Users/YOU"},
	} {
		want, err := serviceFile(kind, "/usr/local/bin/pisyncd", c.home)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(c.file)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from `pisyncd service %s`:\n%s\nwant:\n%s", c.file, kind, got, want)
		}
	}
	// The hub's unit likewise (`pisyncd hub service`).
	want, err := hubServiceFile("/usr/local/bin/pisyncd")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile("../../deploy/systemd/pisyncd-hub.service"); err != nil || !bytes.Equal(got, want) {
		t.Errorf("deploy/systemd/pisyncd-hub.service differs from `pisyncd hub service` (%v):\n%s\nwant:\n%s", err, got, want)
	}
}

// TestHubService: `pisyncd hub service` prints a systemd system unit that
// runs the hub as a user of its own, with no privilege, over the state
// dir HUB.md uses; --install writes it once. (Before, the workstation had
// service files and the hub none: `hub service` was an unknown command.)
func TestHubService(t *testing.T) {
	unit, err := hubServiceFile("/opt/bin/pisyncd")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"ExecStart=/opt/bin/pisyncd hub\n", "ExecReload=/bin/kill -HUP $MAINPID\n",
		"User=pisyncd-hub\n", "StateDirectory=pisyncd-hub\n", "Environment=PISYNC_HUB_STATE_DIR=/var/lib/pisyncd-hub\n",
		"NoNewPrivileges=yes\n", "CapabilityBoundingSet=\n", "ProtectSystem=strict\n", "WantedBy=multi-user.target\n",
	} {
		if !bytes.Contains(unit, []byte(want)) {
			t.Errorf("hub unit lacks %q:\n%s", want, unit)
		}
	}
	dir := t.TempDir()
	var out bytes.Buffer
	if err := writeHubService("/opt/bin/pisyncd", dir, true, &out); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "pisyncd-hub.service")
	if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, unit) {
		t.Fatalf("installed unit: %v\n%s", err, got)
	}
	if !strings.Contains(out.String(), "useradd --system") || !strings.Contains(out.String(), "systemctl daemon-reload && systemctl enable --now pisyncd-hub") {
		t.Errorf("install says:\n%s", out.String())
	}
	if err := writeHubService("/opt/bin/pisyncd", dir, true, &out); err == nil || !strings.Contains(err.Error(), "exists already") {
		t.Errorf("second install: %v", err)
	}
	// Through the CLI: under go test the binary is a temporary build, so
	// it refuses as `pisyncd service` does, naming itself.
	code, stdout, stderr := mainIn(t, "hub", "service")
	if code != 1 || stdout != "" || !strings.Contains(stderr, "temporary build") || !strings.Contains(stderr, "run `pisyncd hub service` from there") {
		t.Errorf("hub service under go test: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if code, _, stderr := mainIn(t, "hub", "service", "launchd"); code != 2 || !strings.Contains(stderr, "hub service takes no arguments") {
		t.Errorf("hub service launchd: exit %d, %q", code, stderr)
	}
	// A binary the unit's sandbox hides from the hub is refused.
	for exe, hidden := range map[string]bool{
		"/home/ann/go/bin/pisyncd": true, "/root/pisyncd": true, "/tmp/pisyncd": true, "/var/tmp/x/pisyncd": true,
		"/run/user/1000/pisyncd": true, "/usr/local/bin/pisyncd": false, "/opt/pisyncd/pisyncd": false, "/homes/pisyncd": false,
	} {
		if _, got := hiddenFromHub(exe); got != hidden {
			t.Errorf("hiddenFromHub(%s) = %v, want %v", exe, got, hidden)
		}
	}
}

// TestServiceInstallsOnlyNative: --install writes only this system's kind
// (before, `service launchd --install` on Linux wrote a plist into
// ~/Library and said to run launchctl); printing either stays.
func TestServiceInstallsOnlyNative(t *testing.T) {
	other := "launchd"
	if runtime.GOOS == "darwin" {
		other = "systemd"
	}
	home := t.TempDir()
	t.Setenv("HOME", home)
	var out bytes.Buffer
	err := serviceCommand([]string{other, "--install"}, &out)
	if err == nil || !strings.Contains(err.Error(), "is not this system's service manager") {
		t.Fatalf("%s --install on %s: %v", other, runtime.GOOS, err)
	}
	if entries, _ := os.ReadDir(home); len(entries) != 0 {
		t.Errorf("it wrote into the home: %v", entries)
	}
}

// TestHubCommandsNameTheServiceStateDir: the hub commands run in an
// operator's shell have none of the installed unit's environment. `hub
// add-node` registered the node in the operator's own state dir, which
// the service never reads, and said only to reload; `hub reload` found no
// hub. Both now name the service's state dir and the command to run.
func TestHubCommandsNameTheServiceStateDir(t *testing.T) {
	units := t.TempDir()
	was := hubUnitDir
	hubUnitDir = units
	t.Cleanup(func() { hubUnitDir = was })
	unit, err := hubServiceFile("/usr/local/bin/pisyncd")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(units, "pisyncd-hub.service"), unit, 0o644); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(t.TempDir(), "hub-state")
	t.Setenv("PISYNC_HUB_STATE_DIR", state)
	t.Setenv("PISYNC_HUB_NODES_DIR", "")
	want := "keeps its state in /var/lib/pisyncd-hub, and this command used " + state + ": for that hub, run it as sudo env PISYNC_HUB_STATE_DIR=/var/lib/pisyncd-hub pisyncd hub ..."
	code, _, stderr := mainIn(t, "hub", "reload")
	if code != 1 || !strings.Contains(stderr, "no hub node runs here") || !strings.Contains(stderr, want) {
		t.Errorf("hub reload: exit %d, %s", code, stderr)
	}
	code, stdout, stderr := mainIn(t, "hub", "add-node", "laptop", "--out", filepath.Join(t.TempDir(), "laptop.nkey"))
	if code != 0 || !strings.Contains(stdout, "no hub node runs on this state dir, and the hub service installed here") || !strings.Contains(stdout, want) {
		t.Errorf("hub add-node: exit %d, %s%s", code, stdout, stderr)
	}
	// The service's own state dir: nothing to say.
	t.Setenv("PISYNC_HUB_STATE_DIR", "/var/lib/pisyncd-hub")
	cfg, err := config.LoadHub()
	if err != nil {
		t.Fatal(err)
	}
	if h := serviceStateDirHint(cfg); h != "" {
		t.Errorf("hint for the service's own state dir: %s", h)
	}
}
