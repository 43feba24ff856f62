package main

import (
	"bytes"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	t.Setenv("HOME", home)
	var out bytes.Buffer
	if err := serviceCommand([]string{"systemd", "--install"}, &out); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(home, ".config", "systemd", "user", "pisyncd.service")
	if st, err := os.Stat(p); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("installed unit: %v %v", st, err)
	}
	if err := serviceCommand([]string{"systemd", "--install"}, &out); err == nil || !strings.Contains(err.Error(), "exists already") {
		t.Errorf("second install: %v", err)
	}
}
