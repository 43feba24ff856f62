package main

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"text/template"

	"github.com/pisyncd/pisyncd/config"
)

const serviceUsage = "pisyncd service [systemd|launchd] [--install]"

// Service files for a workstation: a systemd user unit and a launchd agent.
// `pisyncd service systemd|launchd` prints one for this binary; `--install`
// writes it where the service manager looks and says how to start it.
var serviceTemplates = map[string]string{
	"systemd": `[Unit]
Description=pisyncd: pi coding-agent sessions as events, synced across machines
Documentation=https://github.com/pisyncd/pisyncd
# Five failed starts within a minute and systemd stops trying (its
# default window, 10 s, is shorter than five starts 2 s apart, so a
# setting the daemon refuses was retried for ever).
StartLimitIntervalSec=60
StartLimitBurst=5

[Service]
Type=simple
ExecStart={{unitWord .Exe}} run
Restart=on-failure
RestartSec=2
# SIGTERM stops it gracefully within PISYNC_SHUTDOWN_TIMEOUT (10s by
# default). Keep this above it: a PISYNC_SHUTDOWN_TIMEOUT set past it in
# the settings file below gets the daemon killed mid-stop.
TimeoutStopSec=20
# A setting it refuses exits 1 too: systemd stops trying after five starts
# (StartLimitBurst above), and journalctl --user -u pisyncd says why.
# Settings: PISYNC_* variables, e.g. PISYNC_HUB_URLS, in this file.
EnvironmentFile=-%h/.config/pisyncd/env
# No PrivateTmp: in a user unit it needs user namespaces, which many
# systems restrict (the unit then fails to start, 226/NAMESPACE).
NoNewPrivileges=yes
# What the daemon makes is its user's alone (it sets its files' modes
# itself; this covers what it does not), as the launchd agent's Umask.
UMask=0077

[Install]
WantedBy=default.target
`,
	"launchd": `<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0">
<dict>
	<key>Label</key>
	<string>io.pisyncd</string>
	<key>ProgramArguments</key>
	<array>
		<string>{{xmlText .Exe}}</string>
		<string>run</string>
	</array>
	<!-- 077: the log below is made readable by its user alone (launchd
	     creates it under the agent's umask, 022 by default), as the state
	     and session files the daemon writes are. -->
	<key>Umask</key>
	<integer>63</integer>
	<key>EnvironmentVariables</key>
	<dict>
		<!-- PISYNC_* settings go here, e.g. PISYNC_HUB_URLS. -->
	</dict>
	<key>RunAtLoad</key>
	<true/>
	<key>KeepAlive</key>
	<dict>
		<key>SuccessfulExit</key>
		<false/>
	</dict>
	<key>ExitTimeOut</key>
	<integer>20</integer>
	<key>StandardErrorPath</key>
	<string>{{xmlText .Home}}/Library/Logs/pisyncd.log</string>
</dict>
</plist>
`,
}

// temporaryBuild reports whether exe is a binary `go run` (or `go test`)
// built into a temporary go-build folder, removed when it exits.
func temporaryBuild(exe string) bool {
	for _, part := range strings.Split(filepath.ToSlash(exe), "/") {
		// go-build (the cache) or go-build<digits> (a work folder).
		if rest, ok := strings.CutPrefix(part, "go-build"); ok && strings.Trim(rest, "0123456789") == "" {
			return true
		}
	}
	return false
}

// serviceExe is the path of this binary for a service file that cmd
// prints: not a temporary build, which Go deletes. With keepLink, the link
// it was run by, where it was run by one (linkInvoked).
func serviceExe(cmd string, keepLink bool) (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("service: %w", err)
	}
	if exe, err = filepath.EvalSymlinks(exe); err != nil {
		return "", fmt.Errorf("service: %w", err)
	}
	if temporaryBuild(exe) {
		return "", fmt.Errorf("service: this pisyncd is a temporary build (%s, from `go run`), which Go deletes: a service would point at nothing; build it first (go build -o ~/.local/bin/pisyncd ./cmd/pisyncd) and run `%s` from there", exe, cmd)
	}
	if keepLink {
		exe = linkInvoked(exe, os.Args[0], exec.LookPath)
	}
	return exe, nil
}

// linkInvoked is the path this binary was run by (arg0, found on the PATH
// by lookPath when it names no folder) when that path is a link to exe:
// a package manager's bin/pisyncd pointing into a folder of the version
// (Homebrew, mise). The link outlives an upgrade, which removes that
// folder, and with it the binary a service pinned to exe ran. Otherwise
// exe.
func linkInvoked(exe, arg0 string, lookPath func(string) (string, error)) string {
	p := arg0
	if !strings.ContainsRune(p, filepath.Separator) {
		var err error
		if p, err = lookPath(p); err != nil {
			return exe
		}
	}
	p, err := filepath.Abs(p)
	if err != nil {
		return exe
	}
	if fi, err := os.Lstat(p); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		return exe
	}
	if real, err := filepath.EvalSymlinks(p); err != nil || real != exe {
		return exe
	}
	return p
}

// serviceFile renders the service file of kind for the binary exe.
func serviceFile(kind, exe, home string) ([]byte, error) {
	text, ok := serviceTemplates[kind]
	if !ok {
		return nil, &usageError{Msg: fmt.Sprintf("service: unknown kind %q", kind), Usage: serviceUsage}
	}
	if err := servicePath("service: the binary's path", exe); err != nil {
		return nil, err
	}
	if kind == "systemd" {
		if err := unitPath("service: the binary's path", exe); err != nil {
			return nil, err
		}
	}
	if err := servicePath("service: the home folder", home); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	err := template.Must(template.New(kind).Funcs(serviceFuncs).Parse(text)).Execute(&b, struct{ Exe, Home string }{exe, home})
	return b.Bytes(), err
}

func serviceCommand(args []string, stdout io.Writer) error {
	kind, install, err := serviceArgs("service", serviceUsage, args)
	if err != nil {
		return err
	}
	if native := nativeService(); install && kind != native {
		return fmt.Errorf("service: %s is not this system's service manager (%s): --install would write a file nothing reads; install %s, or print the %s file without --install", kind, runtime.GOOS, native, kind)
	}
	exe, err := serviceExe("pisyncd service", true)
	if err != nil {
		return err
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return fmt.Errorf("service: %w", err)
	}
	return writeService(kind, exe, home, install, setHere(os.Environ()), stdout)
}

// serviceArgs reads `[systemd|launchd] [--install]` for command cmd: the
// kind, this system's own when not given, and whether to install it.
func serviceArgs(cmd, usage string, args []string) (kind string, install bool, err error) {
	for _, a := range args {
		switch {
		case a == "--install" || a == "-install":
			install = true
		case a == "-h" || a == "--help" || a == "-help":
			return "", false, &helpRequest{Usage: usage}
		case strings.HasPrefix(a, "-"):
			return "", false, &usageError{Msg: cmd + ": flag provided but not defined: " + a, Usage: usage}
		case a != "systemd" && a != "launchd":
			return "", false, &usageError{Msg: fmt.Sprintf("%s: unknown kind %q: systemd or launchd (elsewhere run pisyncd under your own supervisor)", cmd, a), Usage: usage}
		case kind != "":
			return "", false, &usageError{Msg: fmt.Sprintf("%s: one kind, got %q and %q", cmd, kind, a), Usage: usage}
		default:
			kind = a
		}
	}
	return cmp.Or(kind, nativeService()), install, nil
}

// nativeService is the kind of service file this system's manager reads.
func nativeService() string {
	if runtime.GOOS == "darwin" {
		return "launchd"
	}
	return "systemd"
}

// setHere names the daemon's settings environ sets (PISYNC_*): a service
// does not see them.
func setHere(environ []string) []string {
	var set []string
	for _, kv := range environ {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, config.Prefix+"_") {
			set = append(set, name)
		}
	}
	slices.Sort(set)
	return set
}

// writeService prints the service file of kind for exe or, with install,
// writes it where the service manager looks, and says which settings set
// here (set) the service will not see.
func writeService(kind, exe, home string, install bool, set []string, stdout io.Writer) error {
	data, err := serviceFile(kind, exe, home)
	if err != nil {
		return err
	}
	if !install {
		_, err = stdout.Write(data)
		return err
	}
	var path, next string
	switch kind {
	case "systemd":
		path = filepath.Join(home, ".config", "systemd", "user", "pisyncd.service")
		// A user's units run while the user is logged in, unless lingering
		// is on: without it the daemon stopped at logout and did not start
		// at boot, unsaid (a newcomer probe, 2026-12-07).
		next = "systemctl --user daemon-reload && systemctl --user enable --now pisyncd\n(settings: " + filepath.Join(home, ".config", "pisyncd", "env") + ", one PISYNC_NAME=value a line;\n to keep it running after you log out and start it at boot: loginctl enable-linger)"
	case "launchd":
		path = filepath.Join(home, "Library", "LaunchAgents", "io.pisyncd.plist")
		next = "launchctl load -w " + path
	}
	// Lstat: a link left in the file's place (dangling, say) was
	// written through, to wherever it pointed.
	if _, err := os.Lstat(path); err == nil {
		return fmt.Errorf("service: %s exists already; remove it first or print the file without --install", path)
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("service: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("service: %w", err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("service: %w", err)
	}
	if _, err = fmt.Fprintf(stdout, "wrote %s\nstart it with: %s\n", path, next); err != nil || len(set) == 0 {
		return err
	}
	// The unit was written with none of them: a service started with
	// another state dir, or no hub, unsaid (a probe).
	where := "put them in " + filepath.Join(home, ".config", "pisyncd", "env") + " (NAME=value, a line each) before starting it"
	if kind == "launchd" {
		where = "add them to the plist's EnvironmentVariables before loading it"
	}
	_, err = fmt.Fprintf(stdout, "set in this shell, not in the service: %s; %s\n", strings.Join(set, ", "), where)
	return err
}
