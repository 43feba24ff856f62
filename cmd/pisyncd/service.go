package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"text/template"
)

// Service files for a workstation: a systemd user unit and a launchd agent.
// `pisyncd service systemd|launchd` prints one for this binary; `--install`
// writes it where the service manager looks and says how to start it.
var serviceTemplates = map[string]string{
	"systemd": `[Unit]
Description=pisyncd: pi coding-agent sessions as events, synced across machines
Documentation=https://github.com/pisyncd/pisyncd
After=network-online.target

[Service]
Type=simple
ExecStart={{.Exe}} run
Restart=on-failure
RestartSec=2
# SIGTERM stops it gracefully within PISYNC_SHUTDOWN_TIMEOUT (10s).
TimeoutStopSec=20
# Settings: PISYNC_* variables, e.g. PISYNC_HUB_URLS, in this file.
EnvironmentFile=-%h/.config/pisyncd/env
Environment=GOMEMLIMIT=512MiB
NoNewPrivileges=yes
PrivateTmp=yes

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
		<string>{{.Exe}}</string>
		<string>run</string>
	</array>
	<key>EnvironmentVariables</key>
	<dict>
		<key>GOMEMLIMIT</key>
		<string>512MiB</string>
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
	<string>{{.Home}}/Library/Logs/pisyncd.log</string>
</dict>
</plist>
`,
}

// serviceFile renders the service file of kind for the binary exe.
func serviceFile(kind, exe, home string) ([]byte, error) {
	text, ok := serviceTemplates[kind]
	if !ok {
		return nil, fmt.Errorf("%w: pisyncd service systemd|launchd [--install]", errUsage)
	}
	var b bytes.Buffer
	err := template.Must(template.New(kind).Parse(text)).Execute(&b, struct{ Exe, Home string }{exe, home})
	return b.Bytes(), err
}

func serviceCommand(args []string, stdout io.Writer) error {
	install := false
	var kind string
	for _, a := range args {
		switch a {
		case "--install", "-install":
			install = true
		default:
			if kind != "" {
				return fmt.Errorf("%w: pisyncd service systemd|launchd [--install]", errUsage)
			}
			kind = a
		}
	}
	if kind == "" {
		kind = "systemd"
		if runtime.GOOS == "darwin" {
			kind = "launchd"
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("service: %w", err)
	}
	if exe, err = filepath.EvalSymlinks(exe); err != nil {
		return fmt.Errorf("service: %w", err)
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return fmt.Errorf("service: %w", err)
	}
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
		next = "systemctl --user daemon-reload && systemctl --user enable --now pisyncd\n(settings: " + filepath.Join(home, ".config", "pisyncd", "env") + ", one PISYNC_NAME=value a line)"
	case "launchd":
		path = filepath.Join(home, "Library", "LaunchAgents", "io.pisyncd.plist")
		next = "launchctl load -w " + path
	}
	if _, err := os.Stat(path); err == nil {
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
	_, err = fmt.Fprintf(stdout, "wrote %s\nstart it with: %s\n", path, next)
	return err
}
