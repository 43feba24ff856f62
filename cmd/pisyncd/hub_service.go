package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"text/template"

	"github.com/pisyncd/pisyncd/config"
)

const hubServiceUsage = "pisyncd hub service [--install]"

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

[Service]
Type=simple
ExecStart={{.Exe}} hub
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

[Install]
WantedBy=multi-user.target
`

// hubServiceFile renders the hub's systemd unit for the binary exe.
func hubServiceFile(exe string) ([]byte, error) {
	var b bytes.Buffer
	err := template.Must(template.New("hub").Parse(hubServiceTemplate)).Execute(&b, struct{ Exe string }{exe})
	return b.Bytes(), err
}

func hubServiceCommand(args []string, stdout io.Writer) error {
	install := false
	for _, a := range args {
		switch {
		case a == "--install" || a == "-install":
			install = true
		case a == "-h" || a == "--help" || a == "-help":
			return &helpRequest{Usage: hubServiceUsage}
		case strings.HasPrefix(a, "-"):
			return &usageError{Msg: "hub service: flag provided but not defined: " + a, Usage: hubServiceUsage}
		default:
			return &usageError{Msg: fmt.Sprintf("hub service takes no arguments, got %q (a systemd unit is the only kind; elsewhere run pisyncd hub under your own supervisor, or in Docker: docs/CLUSTER.md)", a), Usage: hubServiceUsage}
		}
	}
	if install && runtime.GOOS != "linux" {
		return fmt.Errorf("hub service: --install writes a systemd unit, and this is %s: print it without --install, or run pisyncd hub under your own supervisor", runtime.GOOS)
	}
	exe, err := serviceExe("pisyncd hub service")
	if err != nil {
		return err
	}
	if dir, hidden := hiddenFromHub(exe); hidden {
		return fmt.Errorf("hub service: %s is under %s, which the unit hides from the hub (ProtectHome, PrivateTmp): the service would not find it. Install it first (sudo install -m 0755 %s /usr/local/bin/pisyncd) and run /usr/local/bin/pisyncd hub service", exe, dir, exe)
	}
	return writeHubService(exe, hubUnitDir, install, stdout)
}

// hubUnitDir is where `hub service --install` writes the hub's unit.
var hubUnitDir = "/etc/systemd/system"

// serviceStateDirHint says so when the hub unit installed here keeps its
// state in another folder than cfg's: the hub commands run in an
// operator's shell do not have the unit's environment, so `hub add-node`
// registered a node in the operator's own state dir, which the service
// never reads, and `hub reload` found no hub. "" otherwise.
func serviceStateDirHint(cfg *config.Hub) string {
	unit := filepath.Join(hubUnitDir, "pisyncd-hub.service")
	b, err := os.ReadFile(unit)
	if err != nil {
		return ""
	}
	const key = "Environment=" + config.HubPrefix + "_STATE_DIR="
	for line := range strings.Lines(string(b)) {
		dir, ok := strings.CutPrefix(strings.TrimSpace(line), key)
		if !ok || dir == "" || filepath.Clean(dir) == filepath.Clean(cfg.StateDir) {
			continue
		}
		return fmt.Sprintf("the hub service installed here (%s) keeps its state in %s, and this command used %s: for that hub, run it as sudo env %s_STATE_DIR=%s pisyncd hub ...", unit, dir, cfg.StateDir, config.HubPrefix, dir)
	}
	return ""
}

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

// writeHubService prints the hub's unit for exe or, with install, writes
// it into unitDir and says what else a start needs.
func writeHubService(exe, unitDir string, install bool, stdout io.Writer) error {
	data, err := hubServiceFile(exe)
	if err != nil {
		return err
	}
	if !install {
		_, err = stdout.Write(data)
		return err
	}
	path := filepath.Join(unitDir, "pisyncd-hub.service")
	if _, err := os.Stat(path); err == nil {
		return fmt.Errorf("hub service: %s exists already; remove it first or print the unit without --install", path)
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("hub service: %w", err)
	}
	// A system unit holds no secret: 0644, as systemd's own.
	if err := os.WriteFile(path, data, 0o644); err != nil {
		if errors.Is(err, os.ErrPermission) {
			return fmt.Errorf("hub service: %w; a system unit needs root: sudo %s hub service --install", err, exe)
		}
		return fmt.Errorf("hub service: %w", err)
	}
	_, err = fmt.Fprintf(stdout, "wrote %s\n"+
		"then, once: useradd --system --home-dir /var/lib/pisyncd-hub --shell /usr/sbin/nologin pisyncd-hub\n"+
		"settings in /etc/pisyncd-hub/env (one PISYNC_HUB_NAME=value a line; certificates readable by pisyncd-hub)\n"+
		"start it with: systemctl daemon-reload && systemctl enable --now pisyncd-hub\n"+
		"run the other hub commands as its user: sudo -u pisyncd-hub env PISYNC_HUB_STATE_DIR=/var/lib/pisyncd-hub %s hub add-node NAME\n", path, exe)
	return err
}
