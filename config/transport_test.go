package config

import (
	"strings"
	"testing"
)

// TestHubTransportDowngrade: credentials for the hub (an nkey, a .creds
// file, or a user in the URL) with a plain nats:// URL to another machine
// are refused, naming the URL (redacted) and both ways out; a tls:// URL, a
// CA (which makes the connection TLS), loopback, no credentials, or
// PISYNC_HUB_INSECURE=true pass.
func TestHubTransportDowngrade(t *testing.T) {
	base := func() Config {
		return Config{SessionsDir: "/tmp/s", StateDir: "/tmp/st", LogLevel: "info", LogFormat: "text",
			Delete: "trash", RescanInterval: 10e9, MaxLine: 1 << 20, MaxStore: 1 << 30, MaxMemory: 1 << 28,
			Workers: 1, ShutdownTimeout: 1e9}
	}
	for _, tc := range []struct {
		name    string
		edit    func(*Config)
		refused bool
	}{
		{"nkey over nats to a remote host", func(c *Config) { c.HubURLs, c.HubNkey = []string{"nats://hub.lan:7422"}, "/k" }, true},
		{"creds over nats to an IP", func(c *Config) { c.HubURLs, c.HubCreds = []string{"nats://10.0.0.5:7422"}, "/c" }, true},
		{"password in a nats URL", func(c *Config) { c.HubURLs = []string{"nats://ann:s3cret@hub.lan:7422"} }, true},
		{"one plain URL among tls ones", func(c *Config) {
			c.HubURLs, c.HubNkey = []string{"tls://h1:7422", "nats://h2:7422"}, "/k"
		}, true},
		{"ws is plain too", func(c *Config) { c.HubURLs, c.HubNkey = []string{"ws://hub.lan:7422"}, "/k" }, true},
		{"tls", func(c *Config) { c.HubURLs, c.HubNkey = []string{"tls://hub.lan:7422"}, "/k" }, false},
		{"nats with a CA (dialled with TLS)", func(c *Config) {
			c.HubURLs, c.HubNkey, c.HubCA = []string{"nats://hub.lan:7422"}, "/k", "/ca.pem"
		}, false},
		{"loopback", func(c *Config) {
			c.HubURLs, c.HubNkey = []string{"nats://127.0.0.1:7422", "nats://localhost:7422"}, "/k"
		}, false},
		{"no credentials (open hub)", func(c *Config) { c.HubURLs = []string{"nats://hub.lan:7422"} }, false},
		{"insecure, explicitly", func(c *Config) {
			c.HubURLs, c.HubNkey, c.HubInsecure = []string{"nats://hub.lan:7422"}, "/k", true
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base()
			tc.edit(&c)
			err := c.Validate()
			if !tc.refused {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			msg := err.Error()
			for _, want := range []string{"PISYNC_HUB_URLS", "plain text", "tls://", "PISYNC_HUB_CA", "PISYNC_HUB_INSECURE=true"} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q does not mention %q", msg, want)
				}
			}
			if strings.Contains(msg, "s3cret") {
				t.Errorf("error %q prints the password", msg)
			}
		})
	}
}
