package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/pisyncd/pisyncd/config"
)

func TestServiceFiles(t *testing.T) {
	unit, err := serviceFile("systemd", "/opt/bin/pisyncd", "/home/u")
	if err != nil || !bytes.Contains(unit, []byte("ExecStart=/opt/bin/pisyncd run\n")) || !bytes.Contains(unit, []byte("WantedBy=default.target")) || !bytes.Contains(unit, []byte("\nUMask=0077\n")) {
		t.Fatalf("systemd unit: %v\n%s", err, unit)
	}
	plist, err := serviceFile("launchd", "/opt/bin/pisyncd", "/Users/u")
	if err != nil || !bytes.Contains(plist, []byte("<string>/opt/bin/pisyncd</string>")) {
		t.Fatalf("launchd plist: %v\n%s", err, plist)
	}
	if err := xml.Unmarshal(plist, new(struct{})); err != nil {
		t.Fatalf("plist is not well-formed XML: %v", err)
	}
	// 077, as the hub's: launchd makes the log under the agent's umask,
	// and without one it was readable by every user of the Mac.
	if got := strings.Join(plistTop(t, plist)["Umask"], " "); got != "63" {
		t.Errorf("launchd plist Umask = %q, want 63 (077)", got)
	}
	if _, err := serviceFile("upstart", "x", "y"); err == nil {
		t.Error("unknown kind accepted")
	}
	home := t.TempDir()
	var out bytes.Buffer
	if err := writeService("systemd", "/opt/bin/pisyncd", home, true, setHere([]string{"HOME=/h", "PISYNC_STATE_DIR=/s", "PISYNC_HUB_URLS=x"}), &out); err != nil {
		t.Fatal(err)
	}
	// Settings of the shell the service will not see are named, with
	// where they go (a probe: the unit was written without a word).
	if want := "set in this shell, not in the service: PISYNC_HUB_URLS, PISYNC_STATE_DIR; put them in " + filepath.Join(home, ".config", "pisyncd", "env"); !strings.Contains(out.String(), want) {
		t.Errorf("install output %q, want it to say %q", out.String(), want)
	}
	p := filepath.Join(home, ".config", "systemd", "user", "pisyncd.service")
	if st, err := os.Stat(p); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("installed unit: %v %v", st, err)
	}
	if err := writeService("systemd", "/opt/bin/pisyncd", home, true, nil, &out); err == nil || !strings.Contains(err.Error(), "exists already") {
		t.Errorf("second install: %v", err)
	}
	// A link in the unit's place, dangling: not written through.
	os.Remove(p)
	target := filepath.Join(home, "elsewhere")
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
	if err := writeService("systemd", "/opt/bin/pisyncd", home, true, nil, &out); err == nil || !strings.Contains(err.Error(), "exists already") {
		t.Errorf("install over a dangling link: %v", err)
	}
	if _, err := os.Stat(target); err == nil {
		t.Error("the install wrote through a link in the unit's place")
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
	// The hub's likewise (`pisyncd hub service`).
	for kind, file := range map[string]string{
		"systemd": "../../deploy/systemd/pisyncd-hub.service", "launchd": "../../deploy/launchd/io.pisyncd.hub.plist",
	} {
		want, err := hubServiceFile(kind, "/usr/local/bin/pisyncd")
		if err != nil {
			t.Fatal(err)
		}
		if got, err := os.ReadFile(file); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s differs from `pisyncd hub service %s` (%v):\n%s\nwant:\n%s", file, kind, err, got, want)
		}
	}
}

// plistTop reads a plist's top dict: each key's value as text (a string's
// or an integer's), "true"/"false", or the element's name for an array
// or a dict, whose strings follow in order under key+"/".
func plistTop(t *testing.T, data []byte) map[string][]string {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(data))
	out := map[string][]string{}
	var key, elem string
	depth := 0
	for {
		tok, err := d.Token()
		if err != nil {
			if err.Error() == "EOF" {
				return out
			}
			t.Fatalf("plist: %v", err)
		}
		switch tk := tok.(type) {
		case xml.StartElement:
			depth++
			elem = tk.Name.Local
			switch {
			case depth == 3 && (elem == "true" || elem == "false" || elem == "array" || elem == "dict"):
				out[key] = append(out[key], elem)
			}
		case xml.EndElement:
			depth--
			elem = ""
		case xml.CharData:
			text := strings.TrimSpace(string(tk))
			switch {
			case text == "":
			case depth == 3 && elem == "key":
				key = text
			case depth == 3:
				out[key] = append(out[key], text)
			case depth > 3:
				out[key+"/"] = append(out[key+"/"], text)
			}
		}
	}
}

// TestHubService: `pisyncd hub service` prints a systemd system unit that
// runs the hub as a user of its own, with no privilege, over the state
// dir HUB.md uses; --install writes it once. (Before, the workstation had
// service files and the hub none: `hub service` was an unknown command.)
func TestHubService(t *testing.T) {
	unit, err := hubServiceFile("systemd", "/opt/bin/pisyncd")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"ExecStart=/opt/bin/pisyncd hub\n", "ExecReload=/bin/kill -HUP $MAINPID\n",
		"User=pisyncd-hub\n", "StateDirectory=pisyncd-hub\n", "Environment=PISYNC_HUB_STATE_DIR=/var/lib/pisyncd-hub\n",
		"NoNewPrivileges=yes\n", "CapabilityBoundingSet=\n", "ProtectSystem=strict\n", "WantedBy=multi-user.target\n",
		// As the workstation's: a setting the hub refuses is not
		// retried for ever, every 2 s.
		"\nStartLimitIntervalSec=60\nStartLimitBurst=5\n\n[Service]\n",
		// SECURITY.md tells the operator of a shared hub to cap it.
		"\n#MemoryMax=",
	} {
		if !bytes.Contains(unit, []byte(want)) {
			t.Errorf("hub unit lacks %q:\n%s", want, unit)
		}
	}
	dir := t.TempDir()
	var out bytes.Buffer
	if err := writeHubService("systemd", "/opt/bin/pisyncd", dir, true, &out); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "pisyncd-hub.service")
	if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, unit) {
		t.Fatalf("installed unit: %v\n%s", err, got)
	}
	if !strings.Contains(out.String(), "useradd --system") || !strings.Contains(out.String(), "systemctl daemon-reload && systemctl enable --now pisyncd-hub") {
		t.Errorf("install says:\n%s", out.String())
	}
	if err := writeHubService("systemd", "/opt/bin/pisyncd", dir, true, &out); err == nil || !strings.Contains(err.Error(), "exists already") {
		t.Errorf("second install: %v", err)
	}
	// Through the CLI: under go test the binary is a temporary build, so
	// it refuses as `pisyncd service` does, naming itself.
	code, stdout, stderr := mainIn(t, "hub", "service")
	if code != 1 || stdout != "" || !strings.Contains(stderr, "temporary build") || !strings.Contains(stderr, "run `pisyncd hub service` from there") {
		t.Errorf("hub service under go test: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if code, _, stderr := mainIn(t, "hub", "service", "upstart"); code != 2 || !strings.Contains(stderr, `unknown kind "upstart": systemd or launchd`) {
		t.Errorf("hub service upstart: exit %d, %q", code, stderr)
	}
	if code, _, stderr := mainIn(t, "hub", "service", "launchd", "systemd"); code != 2 || !strings.Contains(stderr, "one kind") {
		t.Errorf("hub service launchd systemd: exit %d, %q", code, stderr)
	}

	// The launchd daemon for a hub on macOS: a system daemon run as a
	// user of its own, with a umask keeping its files its own. (Before,
	// `hub service launchd` was refused: a hub had no launchd file.)
	plist, err := hubServiceFile("launchd", "/opt/bin/pisyncd")
	if err != nil {
		t.Fatal(err)
	}
	top := plistTop(t, plist)
	for k, want := range map[string]string{
		"Label": "io.pisyncd.hub", "ProgramArguments/": "/opt/bin/pisyncd hub", "UserName": "_pisyncd-hub", "GroupName": "_pisyncd-hub",
		"Umask": "63", "RunAtLoad": "true", "KeepAlive/": "SuccessfulExit", "EnvironmentVariables/": "PISYNC_HUB_STATE_DIR /usr/local/var/pisyncd-hub",
	} {
		if got := strings.Join(top[k], " "); got != want {
			t.Errorf("hub plist %s = %q, want %q", k, got, want)
		}
	}
	ld := t.TempDir()
	out.Reset()
	if err := writeHubService("launchd", "/opt/bin/pisyncd", ld, true, &out); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Join(ld, "io.pisyncd.hub.plist")); err != nil || st.Mode().Perm() != 0o644 {
		t.Fatalf("installed plist: %v %v", st, err)
	}
	if !strings.Contains(out.String(), "launchctl bootstrap system "+filepath.Join(ld, "io.pisyncd.hub.plist")) || !strings.Contains(out.String(), "launchctl kill HUP system/io.pisyncd.hub") {
		t.Errorf("launchd install says:\n%s", out.String())
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
	for _, c := range []struct{ kind, file, dir string }{
		{"systemd", "pisyncd-hub.service", "/var/lib/pisyncd-hub"},
		{"launchd", "io.pisyncd.hub.plist", "/usr/local/var/pisyncd-hub"},
	} {
		t.Run(c.kind, func(t *testing.T) { serviceStateDirNamed(t, c.kind, c.file, c.dir) })
	}
}

func serviceStateDirNamed(t *testing.T, kind, file, serviceDir string) {
	units := t.TempDir()
	wasUnit, wasLaunchd := hubUnitDir, hubLaunchdDir
	hubUnitDir, hubLaunchdDir = t.TempDir(), t.TempDir()
	if kind == "systemd" {
		hubUnitDir = units
	} else {
		hubLaunchdDir = units
	}
	t.Cleanup(func() { hubUnitDir, hubLaunchdDir = wasUnit, wasLaunchd })
	unit, err := hubServiceFile(kind, "/usr/local/bin/pisyncd")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(units, file), unit, 0o644); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(t.TempDir(), "hub-state")
	t.Setenv("PISYNC_HUB_STATE_DIR", state)
	t.Setenv("PISYNC_HUB_NODES_DIR", "")
	want := "keeps its state in " + serviceDir + ", and this command used " + state + ": for that hub, run it as sudo env PISYNC_HUB_STATE_DIR=" + serviceDir + " pisyncd hub ..."
	code, _, stderr := mainIn(t, "hub", "reload")
	if code != 1 || !strings.Contains(stderr, "no hub node runs here") || !strings.Contains(stderr, want) {
		t.Errorf("hub reload: exit %d, %s", code, stderr)
	}
	code, stdout, stderr := mainIn(t, "hub", "add-node", "laptop", "--out", filepath.Join(t.TempDir(), "laptop.nkey"))
	if code != 0 || !strings.Contains(stdout, "no hub node runs on this state dir, and the hub service installed here") || !strings.Contains(stdout, want) {
		t.Errorf("hub add-node: exit %d, %s%s", code, stdout, stderr)
	}
	// The service's own state dir: nothing to say.
	t.Setenv("PISYNC_HUB_STATE_DIR", serviceDir)
	cfg, err := config.LoadHub()
	if err != nil {
		t.Fatal(err)
	}
	if h := serviceStateDirHint(cfg); h != "" {
		t.Errorf("hint for the service's own state dir: %s", h)
	}
}

// TestServiceFilesQuoteOddPaths: a binary under a folder with a space, a
// '%', '$', '&' or '<' gets a unit whose ExecStart runs exactly it
// (systemd-analyze verify finds it, where it is installed), and with a
// quote or backslash too a plist that is XML naming exactly it; before,
// the unit split the path at its space and expanded "%h", and the plist
// was not XML. A unit for a path with a quote or backslash (systemd runs
// none) and any file for a path with a newline are refused, with the fix.
func TestServiceFilesQuoteOddPaths(t *testing.T) {
	base := t.TempDir()
	analyze, _ := exec.LookPath("systemd-analyze")
	if analyze == "" {
		t.Log("systemd-analyze is not installed: the units are checked against their expected text only")
	}
	for dir, want := range map[string]string{
		"plain":               "ExecStart=" + base + "/plain/pisyncd run\n",
		"we ird%h$x":          `ExecStart="` + base + `/we ird%%h$x/pisyncd" run` + "\n",
		`q"uo\te`:             "", // refused: systemd runs no such path
		"it's":                "", // refused
		"a&b<c>d":             `ExecStart="` + base + `/a&b<c>d/pisyncd" run` + "\n",
		"Application Support": `ExecStart="` + base + `/Application Support/pisyncd" run` + "\n",
	} {
		exe := filepath.Join(base, dir, "pisyncd")
		if err := os.MkdirAll(filepath.Dir(exe), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(exe, []byte("#!/bin/sh\nexit 0\n"), 0o700); err != nil {
			t.Fatal(err)
		}
		unit, err := serviceFile("systemd", exe, "/home/u")
		_, hubErr := hubServiceFile("systemd", exe)
		if want == "" {
			for _, err := range []error{err, hubErr} {
				if err == nil || !strings.Contains(err.Error(), "quote or a backslash") {
					t.Errorf("%q: unit %v, want it refused", dir, err)
				}
			}
		} else if err != nil || !bytes.Contains(unit, []byte(want)) {
			t.Errorf("%q: unit %v, want the line %q in\n%s", dir, err, want, unit)
		} else if hub, err := hubServiceFile("systemd", exe); err != nil || !bytes.Contains(hub, []byte(strings.Replace(want, " run\n", " hub\n", 1))) {
			t.Errorf("%q: hub unit %v, want the line %q", dir, err, want)
		}
		if analyze != "" && want != "" {
			file := filepath.Join(t.TempDir(), "pisyncd-odd.service")
			os.WriteFile(file, unit, 0o600)
			if out, err := exec.Command(analyze, "verify", file).CombinedOutput(); err != nil {
				t.Errorf("%q: systemd-analyze verify: %v\n%s", dir, err, out)
			}
		}
		home := filepath.Join(base, dir)
		plist, err := serviceFile("launchd", exe, home)
		var p struct {
			Dict struct {
				Strings []string `xml:"string"`
				Args    []string `xml:"array>string"`
			} `xml:"dict"`
		}
		if err == nil {
			err = xml.Unmarshal(plist, &p)
		}
		if err != nil || len(p.Dict.Args) != 2 || p.Dict.Args[0] != exe || !slices.Contains(p.Dict.Strings, home+"/Library/Logs/pisyncd.log") {
			t.Errorf("%q: plist %v %+v\n%s", dir, err, p, plist)
		}
		hubPlist, err := hubServiceFile("launchd", exe)
		if err == nil {
			err = xml.Unmarshal(hubPlist, new(struct{}))
		}
		if err != nil || !bytes.Contains(hubPlist, []byte(strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", "'", "&#39;", `"`, "&#34;").Replace(exe))) {
			t.Errorf("%q: hub plist %v\n%s", dir, err, hubPlist)
		}
	}
	if _, err := serviceFile("systemd", "/opt/a\nb/pisyncd", "/home/u"); err == nil || !strings.Contains(err.Error(), "control character") {
		t.Errorf("a path with a newline: %v, want it refused", err)
	}
}

// TestServiceKeepsTheLinkItRanBy: a binary run through a link (a package
// manager's bin/pisyncd into a folder of the version) puts the link in
// the service file, which outlives an upgrade that removes the folder; run
// by its own path, or by a link to another file, its own path. (Before,
// the version's folder was pinned, and the service broke at the upgrade.)
func TestServiceKeepsTheLinkItRanBy(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "Cellar", "pisyncd", "1.2", "bin", "pisyncd")
	os.MkdirAll(filepath.Dir(exe), 0o755)
	os.WriteFile(exe, []byte("binary"), 0o755)
	exe, _ = filepath.EvalSymlinks(exe)
	link := filepath.Join(dir, "bin", "pisyncd")
	os.MkdirAll(filepath.Dir(link), 0o755)
	if err := os.Symlink(exe, link); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "bin", "other")
	os.WriteFile(filepath.Join(dir, "elsewhere"), []byte("x"), 0o755)
	os.Symlink(filepath.Join(dir, "elsewhere"), other)
	onPath := func(name string) (string, error) {
		if name == "pisyncd" {
			return link, nil
		}
		return "", errors.New("not found")
	}
	for _, c := range []struct{ arg0, want string }{
		{link, link},      // run by the link's path
		{"pisyncd", link}, // found on the PATH
		{exe, exe},        // run by its own path
		{other, exe},      // a link to another file
		{"nowhere", exe},  // not on the PATH
	} {
		if got := linkInvoked(exe, c.arg0, onPath); got != c.want {
			t.Errorf("run as %s: %s, want %s", c.arg0, got, c.want)
		}
	}
}
