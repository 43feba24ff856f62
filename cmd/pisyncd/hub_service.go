package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"text/template"

	"github.com/pisyncd/pisyncd/config"
)

const hubServiceUsage = "pisyncd hub service [systemd|launchd] [--install]"

// A hub node is a server's, not a person's: a systemd system unit (not a
// user unit, as `pisyncd service` writes for a workstation) running it as
// a user of its own that owns nothing but the store, in
// /var/lib/pisyncd-hub, where docs/HUB.md puts it. The rest of the system
// is read-only to it; it needs no capability (7422, 6222 and 4222 are not
// privileged ports). `pisyncd hub service` prints it; deploy/systemd holds
// the one for /usr/local/bin.
const hubServiceTemplate = `[Unit]
Description=pisyncd hub: the NATS JetStream node pisyncd workstations join as leaf nodes
Documentation=https://github.com/pisyncd/pisyncd/blob/main/docs/HUB.md
Wants=network-online.target
After=network-online.target
# Five failed starts within a minute and systemd stops trying (its
# default window, 10 s, is shorter than five starts 2 s apart, so a
# setting the hub refuses was retried for ever); journalctl -u
# pisyncd-hub says why.
StartLimitIntervalSec=60
StartLimitBurst=5

[Service]
Type=simple
ExecStart={{unitWord .Exe}} hub
# SIGHUP reads the registered nodes again, as pisyncd hub reload does.
ExecReload=/bin/kill -HUP $MAINPID
Restart=on-failure
RestartSec=2
# SIGTERM stops it gracefully; its store is synced on every write.
TimeoutStopSec=20
# A user of its own: useradd --system --home-dir /var/lib/pisyncd-hub --shell /usr/sbin/nologin pisyncd-hub
User=pisyncd-hub
Group=pisyncd-hub
# The store, the registered nodes and the control socket: /var/lib/pisyncd-hub, 0700.
StateDirectory=pisyncd-hub
StateDirectoryMode=0700
Environment=PISYNC_HUB_STATE_DIR=/var/lib/pisyncd-hub
# Settings: PISYNC_HUB_* variables, e.g. PISYNC_HUB_NAME and the TLS files, in this file.
EnvironmentFile=-/etc/pisyncd-hub/env
UMask=0077
# A hub shared by teams that do not trust each other: cap its memory, so
# that links asking for much and reading nothing end in the hub's restart
# (the workstations link again and nothing is lost), not in the host out
# of memory (docs/SECURITY.md). One 210 MB session sent and copied at once
# peaked at about 550 MB (docs/HUB.md); GOMEMLIMIT under the cap has Go
# collect before it is reached.
#MemoryMax=2G
#Environment=GOMEMLIMIT=1536MiB
NoNewPrivileges=yes
CapabilityBoundingSet=
ProtectSystem=strict
ProtectHome=yes
PrivateTmp=yes
PrivateDevices=yes
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectControlGroups=yes
# AF_NETLINK: nats-server lists the interfaces to advertise its addresses.
RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK
RestrictNamespaces=yes
RestrictSUIDSGID=yes
RestrictRealtime=yes
ProtectClock=yes
ProtectKernelLogs=yes
ProtectHostname=yes
RemoveIPC=yes
LockPersonality=yes
MemoryDenyWriteExecute=yes
SystemCallArchitectures=native
# The system calls a service needs, no others: a flaw in the hub, whose
# leaf port faces the network, cannot reach mount, reboot, kexec, bpf,
# ptrace or a module. A call outside the set fails with EPERM rather than
# killing the hub (Go's runtime asks for some it can do without).
SystemCallFilter=@system-service
SystemCallFilter=~@privileged
SystemCallErrorNumber=EPERM

[Install]
WantedBy=multi-user.target
`

// hubLaunchdTemplate is the hub's launchd daemon for macOS: a system
// daemon (in /Library/LaunchDaemons, loaded at boot, not at a login) run
// as a user of its own, _pisyncd-hub, with a umask that keeps what it
// writes its own. launchd makes no folder, so the state dir is made
// beforehand (docs/HUB.md); `launchctl kill HUP system/io.pisyncd.hub` is
// the reload.
const hubLaunchdTemplate = `<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0">
<dict>
	<key>Label</key>
	<string>io.pisyncd.hub</string>
	<key>ProgramArguments</key>
	<array>
		<string>{{xmlText .Exe}}</string>
		<string>hub</string>
	</array>
	<key>UserName</key>
	<string>_pisyncd-hub</string>
	<key>GroupName</key>
	<string>_pisyncd-hub</string>
	<key>Umask</key>
	<integer>63</integer>
	<key>EnvironmentVariables</key>
	<dict>
		<key>PISYNC_HUB_STATE_DIR</key>
		<string>/usr/local/var/pisyncd-hub</string>
		<!-- PISYNC_HUB_* settings go here, e.g. PISYNC_HUB_NAME and the TLS files. -->
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
	<string>/usr/local/var/log/pisyncd-hub.log</string>
</dict>
</plist>
`

// hubServiceFile renders the hub's service file of kind (systemd or
// launchd) for the binary exe.
func hubServiceFile(kind, exe string) ([]byte, error) {
	text, ok := map[string]string{"systemd": hubServiceTemplate, "launchd": hubLaunchdTemplate}[kind]
	if !ok {
		return nil, &usageError{Msg: fmt.Sprintf("hub service: unknown kind %q (systemd or launchd)", kind), Usage: hubServiceUsage}
	}
	if err := servicePath("hub service: the binary's path", exe); err != nil {
		return nil, err
	}
	if kind == "systemd" {
		if err := unitPath("hub service: the binary's path", exe); err != nil {
			return nil, err
		}
	}
	var b bytes.Buffer
	err := template.Must(template.New(kind).Funcs(serviceFuncs).Parse(text)).Execute(&b, struct{ Exe string }{exe})
	return b.Bytes(), err
}

func hubServiceCommand(args []string, stdout io.Writer) error {
	kind, install, err := serviceArgs("hub service", hubServiceUsage, args)
	if err != nil {
		return err
	}
	if install && (kind != nativeService() || runtime.GOOS != "linux" && runtime.GOOS != "darwin") {
		return fmt.Errorf("hub service: --install writes a %s file, and this is %s, whose service manager would not read it: print it without --install, or run pisyncd hub under your own supervisor", kind, runtime.GOOS)
	}
	// The file itself, not a link: the unit hides home folders from the
	// hub, and a link in /usr/local/bin may point into one.
	exe, err := serviceExe("pisyncd hub service", false)
	if err != nil {
		return err
	}
	if dir, hidden := hiddenFromHub(exe); hidden && kind == "systemd" {
		return fmt.Errorf("hub service: %s is under %s, which the unit hides from the hub (ProtectHome, PrivateTmp): the service would not find it. Install it first (sudo install -m 0755 %s /usr/local/bin/pisyncd) and run /usr/local/bin/pisyncd hub service", exe, dir, exe)
	}
	dir := hubUnitDir
	if kind == "launchd" {
		dir = hubLaunchdDir
	}
	return writeHubService(kind, exe, dir, install, stdout)
}

// hubUnitDir and hubLaunchdDir are where `hub service --install` writes
// the hub's systemd unit and launchd daemon.
var (
	hubUnitDir    = "/etc/systemd/system"
	hubLaunchdDir = "/Library/LaunchDaemons"
)

// serviceStateDirHint says so when the hub service installed here (its
// systemd unit or launchd daemon) keeps its state in another folder than
// cfg's: the hub commands run in an operator's shell do not have the
// service's environment, so `hub add-node` registered a node in the
// operator's own state dir, which the service never reads, and `hub
// reload` found no hub. "" otherwise.
func serviceStateDirHint(cfg *config.Hub) string {
	for _, f := range []struct {
		path string
		dir  *regexp.Regexp // its first group: the state dir the file sets
	}{
		{filepath.Join(hubUnitDir, "pisyncd-hub.service"), unitStateDir},
		{filepath.Join(hubLaunchdDir, "io.pisyncd.hub.plist"), plistStateDir},
	} {
		b, err := os.ReadFile(f.path)
		if err != nil {
			continue
		}
		m := f.dir.FindSubmatch(b)
		if m == nil || filepath.Clean(string(m[1])) == filepath.Clean(cfg.StateDir) {
			continue
		}
		return fmt.Sprintf("the hub service installed here (%s) keeps its state in %s, and this command used %s: for that hub, run it as sudo env %s_STATE_DIR=%s pisyncd hub ...", f.path, m[1], cfg.StateDir, config.HubPrefix, m[1])
	}
	return ""
}

// The state dir a hub's systemd unit and launchd daemon set.
var (
	unitStateDir  = regexp.MustCompile(`(?m)^\s*Environment=` + config.HubPrefix + `_STATE_DIR=(\S+)\s*$`)
	plistStateDir = regexp.MustCompile(`<key>` + config.HubPrefix + `_STATE_DIR</key>\s*<string>([^<]+)</string>`)
)

// hiddenFromHub reports the folder of exe that the unit's sandbox hides
// from the hub's process (ProtectHome, PrivateTmp), if there is one: a
// binary built in a checkout under /home, or run from /tmp.
func hiddenFromHub(exe string) (string, bool) {
	for _, dir := range []string{"/home/", "/root/", "/run/user/", "/tmp/", "/var/tmp/"} {
		if strings.HasPrefix(exe, dir) {
			return strings.TrimSuffix(dir, "/"), true
		}
	}
	return "", false
}

// writeHubService prints the hub's service file of kind for exe or, with
// install, writes it into dir and says what else a start needs.
func writeHubService(kind, exe, dir string, install bool, stdout io.Writer) error {
	data, err := hubServiceFile(kind, exe)
	if err != nil {
		return err
	}
	if !install {
		_, err = stdout.Write(data)
		return err
	}
	name := "pisyncd-hub.service"
	if kind == "launchd" {
		name = "io.pisyncd.hub.plist"
	}
	path := filepath.Join(dir, name)
	if _, err := os.Stat(path); err == nil {
		return fmt.Errorf("hub service: %s exists already; remove it first or print the file without --install", path)
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("hub service: %w", err)
	}
	// A system service file holds no secret: 0644, as the system's own
	// (launchd refuses a daemon's file that others may write).
	if err := os.WriteFile(path, data, 0o644); err != nil {
		if errors.Is(err, os.ErrPermission) {
			return fmt.Errorf("hub service: %w; a system service needs root: sudo %s hub service --install", err, exe)
		}
		return fmt.Errorf("hub service: %w", err)
	}
	if kind == "launchd" {
		_, err = fmt.Fprintf(stdout, "wrote %s\n"+
			"then, once: make the user _pisyncd-hub and its state dir, /usr/local/var/pisyncd-hub, 0700, and /usr/local/var/log (docs/HUB.md, \"As a service\")\n"+
			"settings in its EnvironmentVariables (PISYNC_HUB_NAME, the TLS files, readable by _pisyncd-hub)\n"+
			"start it with: launchctl bootstrap system %s\n"+
			"reload it (SIGHUP) with: launchctl kill HUP system/io.pisyncd.hub\n"+
			"run the other hub commands with its state dir: sudo env PISYNC_HUB_STATE_DIR=/usr/local/var/pisyncd-hub %s hub add-node NAME\n", path, path, exe)
		return err
	}
	_, err = fmt.Fprintf(stdout, "wrote %s\n"+
		"then, once: useradd --system --home-dir /var/lib/pisyncd-hub --shell /usr/sbin/nologin pisyncd-hub\n"+
		"settings in /etc/pisyncd-hub/env (one PISYNC_HUB_NAME=value a line; certificates readable by pisyncd-hub)\n"+
		"start it with: systemctl daemon-reload && systemctl enable --now pisyncd-hub\n"+
		"run the other hub commands with its state dir: sudo env PISYNC_HUB_STATE_DIR=/var/lib/pisyncd-hub %s hub add-node NAME\n", path, exe)
	return err
}
