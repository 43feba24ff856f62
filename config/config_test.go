package config

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"fmt"
	"github.com/pisyncd/pisyncd/session"
	"io/fs"
	"syscall"
)

func TestDefaults(t *testing.T) {
	home := func() (string, error) { return "/home/ann", nil }
	for _, tc := range []struct {
		env             map[string]string
		sessions, state string
	}{
		{nil, "/home/ann/.pi/agent/sessions", "/home/ann/.local/state/pisyncd"},
		{map[string]string{"PI_CODING_AGENT_DIR": "~/pi"}, "/home/ann/pi/sessions", "/home/ann/.local/state/pisyncd"},
		{map[string]string{"PI_CODING_AGENT_DIR": "/opt/pi", "XDG_STATE_HOME": "/var/st"}, "/opt/pi/sessions", "/var/st/pisyncd"},
		{map[string]string{"XDG_STATE_HOME": "relative"}, "/home/ann/.pi/agent/sessions", "/home/ann/.local/state/pisyncd"},
	} {
		var c Config
		if err := c.fillDefaults(func(k string) string { return tc.env[k] }, home); err != nil {
			t.Fatal(err)
		}
		if c.SessionsDir != tc.sessions || (c.StateDir != tc.state && !strings.Contains(c.StateDir, "Library")) {
			t.Errorf("env %v: sessions %q state %q, want %q %q", tc.env, c.SessionsDir, c.StateDir, tc.sessions, tc.state)
		}
	}
	var c Config
	err := c.fillDefaults(func(string) string { return "" }, func() (string, error) { return "", errors.New("no home") })
	if err == nil || !strings.Contains(err.Error(), "PISYNC_SESSIONS_DIR") {
		t.Errorf("no home: err %v, want a hint to set the dirs", err)
	}
}

// TestHomeInPaths: a path setting that begins with ~ is under the home
// folder, as a shell would have it: values in a systemd EnvironmentFile or
// a launchd plist reach pisyncd with the ~ unexpanded (before: a file not
// found, or a folder named ~ in the working directory).
func TestHomeInPaths(t *testing.T) {
	home := func() (string, error) { return "/home/ann", nil }
	c := Config{SessionsDir: "~/pi/sessions", StateDir: "~", HubNkey: "~/ann.nkey", HubCA: "~/ca.pem", HubCreds: "/etc/x~/c", StoreKeyFile: "~/.store-key"}
	if err := c.fillDefaults(func(string) string { return "" }, home); err != nil {
		t.Fatal(err)
	}
	for _, g := range []struct{ got, want string }{
		{c.SessionsDir, "/home/ann/pi/sessions"}, {c.StateDir, "/home/ann"}, {c.HubNkey, "/home/ann/ann.nkey"},
		{c.HubCA, "/home/ann/ca.pem"}, {c.HubCreds, "/etc/x~/c"}, {c.StoreKeyFile, "/home/ann/.store-key"},
	} {
		if g.got != g.want {
			t.Errorf("%q, want %q", g.got, g.want)
		}
	}
	// A relative path is refused, every path setting's (before
	// 2026-12-07 only the two folders': a store key file written from
	// one folder was missing from another, and the store locked).
	for _, bad := range []Config{
		{SessionsDir: "/s", StateDir: "/st", StoreKeyFile: "store.key"},
		{SessionsDir: "/s", StateDir: "/st", HubCA: "ca.pem"},
		{SessionsDir: "/s", StateDir: "/st", KeyFile: "./team.json"},
	} {
		if err := bad.fillDefaults(func(string) string { return "" }, home); err == nil || !strings.Contains(err.Error(), "is a relative path") {
			t.Errorf("%+v: %v", bad, err)
		}
	}
	agent := func(k string) string {
		if k == "PI_CODING_AGENT_DIR" {
			return "relagent"
		}
		return ""
	}
	if err := (&Config{StateDir: "/st"}).fillDefaults(agent, home); err == nil || !strings.Contains(err.Error(), "PI_CODING_AGENT_DIR") {
		t.Errorf("a relative PI_CODING_AGENT_DIR: %v", err)
	}
	// A shell's ~user is not expanded: refused, rather than a folder of
	// that name in the working directory.
	c = Config{SessionsDir: "~bob/sessions", StateDir: "/st"}
	if err := c.fillDefaults(func(string) string { return "" }, home); err == nil || !strings.Contains(err.Error(), "PISYNC_SESSIONS_DIR") || !strings.Contains(err.Error(), "full path") {
		t.Errorf("~bob: %v", err)
	}
	c = Config{SessionsDir: "/s", StateDir: "/st", HubNkey: "~/ann.nkey"}
	err := c.fillDefaults(func(string) string { return "" }, func() (string, error) { return "", errors.New("no home") })
	if err == nil || !strings.Contains(err.Error(), `PISYNC_HUB_NKEY "~/ann.nkey" begins with ~`) {
		t.Errorf("~ without a home: %v", err)
	}

	dir := t.TempDir()
	t.Setenv("HOME", dir)
	t.Setenv("PISYNC_HUB_STATE_DIR", "~/hub")
	t.Setenv("PISYNC_HUB_TLS_CERT", "~/certs/hub.pem")
	t.Setenv("PISYNC_HUB_TLS_KEY", "~/certs/hub-key.pem")
	h, err := LoadHub()
	if err != nil {
		t.Fatal(err)
	}
	if h.StateDir != filepath.Join(dir, "hub") || h.TLSCert != filepath.Join(dir, "certs", "hub.pem") || h.TLSKey != filepath.Join(dir, "certs", "hub-key.pem") || h.NodesDir != filepath.Join(dir, "hub", "nodes") {
		t.Errorf("the hub's paths: %+v", h)
	}
	t.Setenv("PISYNC_HUB_TLS_CA", "ca.pem")
	if _, err := LoadHub(); err == nil || !strings.Contains(err.Error(), "PISYNC_HUB_TLS_CA \"ca.pem\" is a relative path") {
		t.Errorf("a relative PISYNC_HUB_TLS_CA: %v", err)
	}
}

func TestLoadAndValidate(t *testing.T) {
	t.Setenv("PISYNC_SESSIONS_DIR", "/tmp/s")
	t.Setenv("PISYNC_STATE_DIR", "/tmp/st")
	c, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxLine != 64<<20 || c.Workers != 8 || c.LogLevel != "info" || c.MemoryBudget != DefaultMemoryBudget || DefaultMemoryBudget != 512<<20 {
		t.Errorf("defaults: %+v", c)
	}
	// Search is on by default, except with a store cipher (auto).
	if c.HubCompression != "auto" {
		t.Errorf("hub compression by default: %q, want auto", c.HubCompression)
	}
	if c.Search != "auto" || !c.SearchOn() {
		t.Errorf("search by default: %q, on %v; want auto, on", c.Search, c.SearchOn())
	}
	for k, v := range map[string]string{
		"PISYNC_NODE_ID":         "a.b",
		"PISYNC_LOG_LEVEL":       "loud",
		"PISYNC_LOG_FORMAT":      "xml",
		"PISYNC_HTTP_ADDR":       "0.0.0.0:9466",
		"PISYNC_LISTEN":          "192.168.1.2:4222",
		"PISYNC_MAX_LINE":        "1GiB",
		"PISYNC_WORKERS":         "0",
		"PISYNC_STATE_DIR":       "/tmp/s/state",
		"PISYNC_RESCAN_INTERVAL": "1ms",
		"PISYNC_MEMORY_BUDGET":   "64KiB",
		"PISYNC_HUB_COMPRESSION": "gzip",
		"PISYNC_IDLE_AFTER":      "0",
	} {
		t.Run(k, func(t *testing.T) {
			t.Setenv(k, v)
			if _, err := Load(); err == nil || !strings.Contains(err.Error(), k) {
				t.Errorf("%s=%s: err %v, want an error naming the variable", k, v, err)
			}
		})
	}
	// A line out of range: that alone, not the budget it would need
	// (raising the budget as told met the range error next).
	t.Run("line out of range", func(t *testing.T) {
		t.Setenv("PISYNC_MAX_LINE", "1GiB")
		if _, err := Load(); err == nil || !strings.Contains(err.Error(), "want 1KiB to 200MiB") || strings.Contains(err.Error(), "MEMORY_BUDGET") {
			t.Errorf("PISYNC_MAX_LINE=1GiB: %v", err)
		}
	})
	// A port out of range failed only at the listen, not naming the
	// variable.
	t.Run("same address", func(t *testing.T) {
		t.Setenv("PISYNC_HTTP_ADDR", "127.0.0.1:9466")
		t.Setenv("PISYNC_LISTEN", "127.0.0.1:9466")
		if _, err := Load(); err == nil || !strings.Contains(err.Error(), "PISYNC_HTTP_ADDR and PISYNC_LISTEN are both") {
			t.Errorf("one address for both: %v", err)
		}
	})
	// A host name in any case, as the message says localhost is taken
	// (a probe: LOCALHOST was refused).
	t.Run("LOCALHOST", func(t *testing.T) {
		t.Setenv("PISYNC_HTTP_ADDR", "LOCALHOST:9466")
		if _, err := Load(); err != nil {
			t.Errorf("LOCALHOST: %v", err)
		}
	})
	t.Run("port", func(t *testing.T) {
		t.Setenv("PISYNC_HTTP_ADDR", "127.0.0.1:99999")
		if _, err := Load(); err == nil || !strings.Contains(err.Error(), "PISYNC_HTTP_ADDR") || !strings.Contains(err.Error(), "65535") {
			t.Errorf("port 99999: %v", err)
		}
	})
	t.Setenv("PISYNC_MAX_STORE", "lots")
	if _, err := Load(); err == nil {
		t.Error("bad size accepted")
	}
}

// TestMemoryBudget: PISYNC_MEMORY_BUDGET must hold its reserve and four
// times PISYNC_MAX_LINE (the tailer's quarter of the rest fits the longest
// line); 0 is the default, 512MiB, which fits the default 64MiB line. An
// error names both variables, the minimum and the ways out.
func TestMemoryBudget(t *testing.T) {
	t.Setenv("PISYNC_SESSIONS_DIR", "/tmp/s")
	t.Setenv("PISYNC_STATE_DIR", "/tmp/st")
	for _, tc := range []struct {
		budget, maxLine string
		want            []string // in the error; nil: accepted
	}{
		{"", "", nil},
		{"0", "", nil},
		{"0", "64MiB", nil},
		{"320MiB", "16MiB", nil},
		{"319MiB", "16MiB", []string{"PISYNC_MEMORY_BUDGET 319MiB: want at least 320MiB", "4 × PISYNC_MAX_LINE (16MiB)", "raise PISYNC_MEMORY_BUDGET to 320MiB", "lower PISYNC_MAX_LINE to 16128KiB"}},
		{"", "100MiB", []string{"PISYNC_MEMORY_BUDGET 512MiB: want at least 656MiB", "reserve of 256MiB", "PISYNC_MAX_LINE (100MiB)", "lower PISYNC_MAX_LINE to 64MiB"}},
		{"0", "65MiB", []string{"(the default): want at least 516MiB"}},
		{"256MiB", "1KiB", []string{"want at least 262148KiB", "the rest: raise PISYNC_MEMORY_BUDGET to 262148KiB or more"}},
		{"64KiB", "", []string{"PISYNC_MEMORY_BUDGET 64KiB: want at least 512MiB"}},
	} {
		t.Run(tc.budget+"-"+tc.maxLine, func(t *testing.T) {
			for k, v := range map[string]string{"PISYNC_MEMORY_BUDGET": tc.budget, "PISYNC_MAX_LINE": tc.maxLine} {
				t.Setenv(k, v)
				if v == "" {
					os.Unsetenv(k) // unset: the default (t.Setenv restores it)
				}
			}
			_, err := Load()
			if tc.want == nil {
				if err != nil {
					t.Errorf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
	if err := (&Config{MaxLine: 64 << 20}).checkMemoryBudget(); err != nil {
		t.Errorf("a Config with no budget (the default): %v", err)
	}
	for budget, want := range map[ByteSize]int64{0: 256 << 20, 320 << 20: 64 << 20, 1 << 30: 768 << 20, 100 << 20: 1 << 20} {
		if got := WorkMemory(budget); got != want {
			t.Errorf("WorkMemory(%v) = %d, want %d", budget, got, want)
		}
	}
}

func TestByteSize(t *testing.T) {
	for in, want := range map[string]ByteSize{"123": 123, "64KiB": 64 << 10, "16MiB": 16 << 20, "2GiB": 2 << 30, "3M": 3 << 20, "1 GB": 1 << 30} {
		var b ByteSize
		if err := b.Decode(in); err != nil || b != want {
			t.Errorf("Decode(%q) = %d, %v; want %d", in, b, err, want)
		}
	}
	for _, bad := range []string{"", "x", "-1", "1.5GiB", "99999999999TiB"} {
		var b ByteSize
		if err := b.Decode(bad); err == nil {
			t.Errorf("Decode(%q) accepted", bad)
		}
	}
	if s := ByteSize(64 << 20).String(); s != "64MiB" {
		t.Errorf("String = %q", s)
	}
}

func TestNodeIDIsStableAndPrivate(t *testing.T) {
	dir := t.TempDir()
	c := &Config{StateDir: filepath.Join(dir, "state")}
	if err := c.EnsureNodeID(false); err != nil {
		t.Fatal(err)
	}
	first := c.NodeID
	c2 := &Config{StateDir: c.StateDir}
	if err := c2.EnsureNodeID(true); err != nil || c2.NodeID != first {
		t.Fatalf("second load: %q %v, want %q", c2.NodeID, err, first)
	}
	st, err := os.Stat(filepath.Join(c.StateDir, "node-id"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("node-id mode %v %v", st.Mode(), err)
	}
	if dst, _ := os.Stat(c.StateDir); dst.Mode().Perm() != 0o700 {
		t.Errorf("state dir mode %v", dst.Mode())
	}
	os.WriteFile(filepath.Join(c.StateDir, "node-id"), []byte("bad id!\n"), 0o600)
	if err := (&Config{StateDir: c.StateDir}).EnsureNodeID(false); err == nil {
		t.Error("invalid stored node id accepted")
	}
}

// TestNodeIDStaysWithItsStore: the id a state dir was first run under is
// kept in it, configured or generated, and another id over the same store
// is refused, naming both ids and the ways out. (Before, PISYNC_NODE_ID
// was never written down and never compared with the stored id: setting
// it on a machine that had run alone, as the hub set-up does, published
// every session a second time under the new id.)
func TestNodeIDStaysWithItsStore(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	c := &Config{StateDir: state}
	if err := c.EnsureNodeID(false); err != nil {
		t.Fatal(err)
	}
	generated := c.NodeID
	c = &Config{StateDir: state, NodeID: "ann-laptop"}
	err := c.EnsureNodeID(true)
	for _, want := range []string{`PISYNC_NODE_ID "ann-laptop"`, `belongs to node "` + generated + `"`, "publish every session again", "pisyncd hub add-node " + generated, "PISYNC_STATE_DIR"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("another id over the store: err %v, want it to say %q", err, want)
		}
	}
	if c := (&Config{StateDir: state, NodeID: generated}); c.EnsureNodeID(true) != nil || c.NodeID != generated {
		t.Errorf("the stored id, configured: %q", c.NodeID)
	}

	// A configured id is written down at its first start, and holds from then on.
	state2 := filepath.Join(t.TempDir(), "state")
	if err := (&Config{StateDir: state2, NodeID: "ws1"}).EnsureNodeID(false); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(state2, "node-id")); err != nil || string(b) != "ws1\n" {
		t.Fatalf("node-id after a start as ws1: %q %v", b, err)
	}
	if c := (&Config{StateDir: state2}); c.EnsureNodeID(true) != nil || c.NodeID != "ws1" {
		t.Errorf("unset after a start as ws1: %q, want ws1", c.NodeID)
	}
	if err := (&Config{StateDir: state2, NodeID: "ws2"}).EnsureNodeID(true); err == nil {
		t.Error("ws2 over ws1's store accepted")
	}

	// A store made before the id was kept with it, under a configured id:
	// without one, no new id is made up for it.
	state3 := t.TempDir()
	err = (&Config{StateDir: state3}).EnsureNodeID(true)
	if err == nil || !strings.Contains(err.Error(), "holds a store but no node-id file") {
		t.Errorf("a store without node-id, no id set: %v", err)
	}
	if _, err := os.Stat(filepath.Join(state3, "node-id")); !os.IsNotExist(err) {
		t.Errorf("a node-id was made up for it: %v", err)
	}
	if c := (&Config{StateDir: state3, NodeID: "old"}); c.EnsureNodeID(true) != nil || c.NodeID != "old" {
		t.Errorf("the same, with its id set: %q", c.NodeID)
	}
}

func TestUsageListsEveryVariable(t *testing.T) {
	var b strings.Builder
	if err := Usage(&b); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"PISYNC_SESSIONS_DIR", "PISYNC_STATE_DIR", "PISYNC_NODE_ID", "PISYNC_HTTP_ADDR", "PISYNC_LISTEN", "PISYNC_MAX_LINE", "PISYNC_MEMORY_BUDGET", "PISYNC_SHUTDOWN_TIMEOUT"} {
		if !strings.Contains(b.String(), v) {
			t.Errorf("usage lacks %s", v)
		}
	}
}

func TestRules(t *testing.T) {
	t.Setenv("PISYNC_SESSIONS_DIR", "/tmp/s")
	t.Setenv("PISYNC_STATE_DIR", "/tmp/st")
	c, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if c.Rules != "auto" || c.RuleSet() != session.RulesAuto {
		t.Errorf("default: %q (%v), want auto", c.Rules, c.RuleSet())
	}
	if err := (&Config{}).Validate(); err != nil && strings.Contains(err.Error(), "RULES") {
		t.Errorf("the zero Config's rules: %v", err)
	}
	for in, want := range map[string]session.RuleSet{"auto": session.RulesAuto, "seed": session.RulesSeed, "pi-1.6": session.RulesPi16, "Seed": session.RulesSeed, "PI-1.6": session.RulesPi16} {
		t.Setenv("PISYNC_RULES", in)
		c, err := Load()
		if err != nil || c.RuleSet() != want {
			t.Errorf("PISYNC_RULES=%s: %v, %v; want %v", in, c.RuleSet(), err, want)
		}
	}
	for _, bad := range []string{"pi-1.5", "Sead", " auto", "1.6.0"} {
		t.Setenv("PISYNC_RULES", bad)
		_, err := Load()
		if err == nil {
			t.Errorf("PISYNC_RULES=%q accepted", bad)
			continue
		}
		for _, part := range []string{"PISYNC_RULES", `"` + bad + `"`, "auto, seed or pi-1.6"} {
			if !strings.Contains(err.Error(), part) {
				t.Errorf("PISYNC_RULES=%q: error %q does not name %s", bad, err, part)
			}
		}
	}
}

func TestSearchOn(t *testing.T) {
	for _, tc := range []struct {
		search, cipher string
		want           bool
	}{
		{"auto", "", true}, {"auto", "off", true}, {"auto", " Off ", true}, {"auto", "aes", false}, {"auto", "AES", false},
		{"on", "aes", true}, {"off", "", false}, {"", "", false},
	} {
		c := Config{Search: tc.search, StoreCipher: tc.cipher}
		if got := c.SearchOn(); got != tc.want {
			t.Errorf("PISYNC_SEARCH=%q with cipher %q: on %v, want %v", tc.search, tc.cipher, got, tc.want)
		}
	}
	c := Config{Search: "yes", LogLevel: "info", LogFormat: "text"}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "PISYNC_SEARCH") {
		t.Errorf("PISYNC_SEARCH=yes: %v", err)
	}
}

// TestSettingMistakes: a value that does not convert names the variable,
// the value and what it should look like (before: envconfig's words,
// naming the Go field and type); a PISYNC_* variable that no setting
// reads is warned about, with the setting it is closest to.
func TestSettingMistakes(t *testing.T) {
	t.Setenv("PISYNC_SESSIONS_DIR", "/tmp/s")
	t.Setenv("PISYNC_STATE_DIR", "/tmp/st")
	for _, c := range []struct{ key, val, want string }{
		{"PISYNC_RESCAN_INTERVAL", "10", `PISYNC_RESCAN_INTERVAL "10": want a duration with its unit, such as 500ms, 10s or 2m`},
		{"PISYNC_MAX_STORE", "-5", `PISYNC_MAX_STORE "-5": want a size such as 512KiB, 64MiB or 2GiB`},
		// Well formed, too large (before: "want a size such as ...").
		{"PISYNC_MAX_STORE", "9000000TiB", `PISYNC_MAX_STORE "9000000TiB": too large: at most 4194304TiB`},
		{"PISYNC_MEMORY_BUDGET", "9223372036854775807", `PISYNC_MEMORY_BUDGET "9223372036854775807": too large: at most 4194304TiB`},
		{"PISYNC_MAX_STORE", "99999999999999999999", `PISYNC_MAX_STORE "99999999999999999999": too large: at most 4194304TiB`},
		{"PISYNC_HUB_INSECURE", "maybe", `PISYNC_HUB_INSECURE "maybe": want true or false`},
		{"PISYNC_WORKERS", "8x", `PISYNC_WORKERS "8x": want a whole number`},
		// Base 10: "010" was 8, "0x10" 16 (a probe).
		{"PISYNC_WORKERS", "0x10", `PISYNC_WORKERS "0x10": want a whole number`},
		{"PISYNC_WORKERS", "1_0", `PISYNC_WORKERS "1_0": want a whole number`},
		{"PISYNC_REMOTE_SESSIONS_PER_HOUR", "99999999999999999999", `PISYNC_REMOTE_SESSIONS_PER_HOUR "99999999999999999999": too large a number`},
		// Relative folders: a service and a shell found them in two places.
		{"PISYNC_STATE_DIR", "st", `PISYNC_STATE_DIR "st" is a relative path, which each command would find from the folder it runs in (/ for a service): give an absolute path (~/ is expanded)`},
		{"PISYNC_SESSIONS_DIR", "./s", `PISYNC_SESSIONS_DIR "./s" is a relative path, which each command would find from the folder it runs in (/ for a service): give an absolute path (~/ is expanded)`},
		// Short enough to cut into a line pi is still writing.
		{"PISYNC_IDLE_AFTER", "1ms", `PISYNC_IDLE_AFTER 1ms: want at least 100ms: a line pi leaves without its newline for 60 times this long is taken for a crash's and ended, and a slow writer's line would be cut`},
		// Past an hour; 60 times 50000h overflowed, and a partial line pi
		// was writing was ended at once (a probe).
		{"PISYNC_IDLE_AFTER", "50000h", `PISYNC_IDLE_AFTER 50000h0m0s: want at most 1h0m0s: remote lines wait for a file pi has not written for this long, so a session in use would get none`},
	} {
		t.Run(c.key, func(t *testing.T) {
			t.Setenv(c.key, c.val)
			if _, err := Load(); err == nil || err.Error() != c.want {
				t.Errorf("%s=%s: err %v, want %q", c.key, c.val, err, c.want)
			}
		})
	}
	t.Setenv("PISYNC_HUB_REPLICAS", "three")
	if _, err := LoadHub(); err == nil || err.Error() != `PISYNC_HUB_REPLICAS "three": want a whole number` {
		t.Errorf("the hub's: %v", err)
	}
	t.Setenv("PISYNC_HUB_REPLICAS", " 1 ") // spaces around a number, as around a size
	if c, err := LoadHub(); err != nil || c.Replicas != 1 {
		t.Errorf("PISYNC_HUB_REPLICAS=' 1 ': %v; want 1", err)
	}
	t.Setenv("PISYNC_HUB_REPLICAS", "01") // not octal: 010 was 8
	if c, err := LoadHub(); err != nil || c.Replicas != 1 {
		t.Errorf("PISYNC_HUB_REPLICAS=01: %v; want 1", err)
	}
	os.Unsetenv("PISYNC_HUB_REPLICAS") // t.Setenv puts it back
	// A hub store that can hold nothing, or 0 (before: nats-server's
	// 10 GiB, not the documented 64 GiB), is refused, as a workstation's.
	for _, c := range []struct{ key, val, want string }{
		{"PISYNC_HUB_MAX_STORE", "0", "PISYNC_HUB_MAX_STORE 0B: want at least 64MiB (the default is 64GiB)"},
		{"PISYNC_HUB_MAX_MEMORY", "1KiB", "PISYNC_HUB_MAX_MEMORY 1KiB: want at least 16MiB"},
		{"PISYNC_HUB_TEAM_MAX_STORE", "1KiB", "PISYNC_HUB_TEAM_MAX_STORE 1KiB, _MEMORY 0B: want at least 16MiB and 1MiB a team"},
		{"PISYNC_HUB_TEAM_MAX_STREAMS", "0", "PISYNC_HUB_TEAM_MAX_STREAMS 0: want at least 2 (a team's PI_HUB and PI_KEYS)"},
		{"PISYNC_HUB_TEAM_MAX_LINKS", "0", "PISYNC_HUB_TEAM_MAX_LINKS 0: want at least 1 (one a workstation of the team; the default is 256)"},
		// One address for two listeners (a probe: "taken by another program").
		{"PISYNC_HUB_LEAF_LISTEN", "127.0.0.1:4222", "PISYNC_HUB_LISTEN and PISYNC_HUB_LEAF_LISTEN are both 127.0.0.1:4222: each listener needs a port of its own"},
		{"PISYNC_HUB_HTTP_ADDR", "127.0.0.1:4222", "PISYNC_HUB_LISTEN and PISYNC_HUB_HTTP_ADDR are both 127.0.0.1:4222"},
		// The hub's metrics on loopback only, as a workstation's.
		{"PISYNC_HUB_HTTP_ADDR", "0.0.0.0:9467", `PISYNC_HUB_HTTP_ADDR: address "0.0.0.0:9467" is not a loopback address`},
	} {
		t.Setenv(c.key, c.val)
		if _, err := LoadHub(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s=%s: %v, want %q", c.key, c.val, err, c.want)
		}
		os.Unsetenv(c.key)
	}
	// The hub's log settings are checked and named as the hub's (before: a
	// bad format was taken as text, a bad level named PISYNC_LOG_LEVEL).
	t.Setenv("PISYNC_HUB_LOG_LEVEL", "loud")
	t.Setenv("PISYNC_HUB_LOG_FORMAT", "xml")
	_, err := LoadHub()
	for _, want := range []string{`PISYNC_HUB_LOG_LEVEL "loud": want debug, info, warn or error`, `PISYNC_HUB_LOG_FORMAT "xml": want text or json`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("the hub's log settings: %v, want %q", err, want)
		}
	}

	got := Unknown([]string{
		"PISYNC_HTTP_ADR=127.0.0.1:9466", "PISYNC_LOGLEVEL=debug", "PISYNC_SESSION_DIR=/x",
		"PISYNC_HTTP_ADDR=127.0.0.1:9466", "PISYNC_HUB_LISTEN=127.0.0.1:4222", "PISYNC_HUB_URLS=tls://h:7422",
		"PISYNC_FROBNICATE=1", "PATH=/bin", "PISYNCX=1",
	})
	want := []string{
		"PISYNC_FROBNICATE is set, but pisyncd has no such setting: it is ignored (`pisyncd help` lists the daemon's settings, `pisyncd hub help` the hub's)",
		"PISYNC_HTTP_ADR is set, but pisyncd has no such setting: it is ignored; did you mean PISYNC_HTTP_ADDR? (`pisyncd help` lists the daemon's settings, `pisyncd hub help` the hub's)",
		"PISYNC_LOGLEVEL is set, but pisyncd has no such setting: it is ignored; did you mean PISYNC_LOG_LEVEL? (`pisyncd help` lists the daemon's settings, `pisyncd hub help` the hub's)",
		"PISYNC_SESSION_DIR is set, but pisyncd has no such setting: it is ignored; did you mean PISYNC_SESSIONS_DIR? (`pisyncd help` lists the daemon's settings, `pisyncd hub help` the hub's)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("Unknown:\n got %q\nwant %q", got, want)
	}
}

// TestTrustedNodesNamedOnce: each bad entry is named once, and an empty one
// as the stray comma it is, not as "" three times.
func TestTrustedNodesNamedOnce(t *testing.T) {
	for v, want := range map[string]string{
		",,":        `PISYNC_TRUSTED_NODES: an empty name (a stray comma?): want`,
		"a,b.c,b.c": `PISYNC_TRUSTED_NODES: "b.c": want`,
		"x/y,,ws-a": `PISYNC_TRUSTED_NODES: "x/y", an empty name (a stray comma?): want`,
	} {
		t.Run(v, func(t *testing.T) {
			t.Setenv("PISYNC_SESSIONS_DIR", "/tmp/s")
			t.Setenv("PISYNC_STATE_DIR", "/tmp/st")
			t.Setenv("PISYNC_TRUSTED_NODES", v)
			_, err := Load()
			if err == nil || !strings.Contains(err.Error(), want) || strings.Count(err.Error(), "TRUSTED_NODES") != 1 {
				t.Errorf("PISYNC_TRUSTED_NODES=%q: %v; want one line holding %q", v, err, want)
			}
		})
	}
	t.Setenv("PISYNC_TRUSTED_NODES", "ws-a,*")
	if _, err := Load(); err != nil && strings.Contains(err.Error(), "TRUSTED") {
		t.Errorf("valid list refused: %v", err)
	}
}

// TestWriteHint: a folder setting this user may not write, or on a
// read-only file system, is named with how to mend it.
func TestWriteHint(t *testing.T) {
	if h := WriteHint(fmt.Errorf("mkdir /x: %w", fs.ErrPermission), "STATE_DIR"); !strings.Contains(h, "set PISYNC_STATE_DIR to a folder it owns") {
		t.Errorf("permission: %q", h)
	}
	if h := WriteHint(&fs.PathError{Op: "mkdir", Path: "/x", Err: syscall.EROFS}, "SESSIONS_DIR"); !strings.Contains(h, "read-only") || !strings.Contains(h, "PISYNC_SESSIONS_DIR") {
		t.Errorf("read-only: %q", h)
	}
	// A file in the path, and a link to nothing where the folder should
	// be: named, where "mkdir: not a directory" or "file exists" said
	// nothing of the setting (a probe).
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o600)
	if err := os.MkdirAll(filepath.Join(file, "sub"), 0o700); !strings.Contains(WriteHint(err, "STATE_DIR"), "a file stands where a folder of the path should be: set PISYNC_STATE_DIR") {
		t.Errorf("a file in the path: %v: %q", err, WriteHint(err, "STATE_DIR"))
	}
	dangling := filepath.Join(t.TempDir(), "link")
	os.Symlink(filepath.Join(t.TempDir(), "gone", "x"), dangling)
	if err := os.MkdirAll(dangling, 0o700); !strings.Contains(WriteHint(err, "SESSIONS_DIR"), "a link to nothing): set PISYNC_SESSIONS_DIR") {
		t.Errorf("a link to nothing: %v: %q", err, WriteHint(err, "SESSIONS_DIR"))
	}
	if h := WriteHint(errors.New("other"), "STATE_DIR"); h != "" {
		t.Errorf("another error: %q", h)
	}
}

// TestHubURLsWrittenByHand: a space after a comma and a trailing comma are
// how a list is written by hand, and a URL without its scheme is refused
// with the fix named (before: "first path segment in URL cannot contain
// colon", from the URL parser, for both).
func TestHubURLsWrittenByHand(t *testing.T) {
	t.Setenv("PISYNC_SESSIONS_DIR", "/tmp/s")
	t.Setenv("PISYNC_STATE_DIR", "/tmp/st")
	t.Setenv("PISYNC_HUB_URLS", "tls://a.example:7422, tls://b.example:7422 ,")
	c, err := Load()
	if err != nil || fmt.Sprint(c.HubURLs) != "[tls://a.example:7422 tls://b.example:7422]" {
		t.Fatalf("%v %v", c, err)
	}
	for _, bad := range []string{"127.0.0.1:7422", "hub.example:7422,tls://b:7422"} {
		t.Setenv("PISYNC_HUB_URLS", bad)
		if _, err := Load(); err == nil || !strings.Contains(err.Error(), "has no scheme: write tls://HOST:PORT") {
			t.Errorf("%s: %v", bad, err)
		}
	}
	t.Setenv("PISYNC_HUB_URLS", "ann:secret@hub.example:7422")
	if _, err := Load(); err == nil || strings.Contains(err.Error(), "secret") {
		t.Errorf("a password without a scheme: %v", err)
	}
}

// TestLogFormatEitherCase: PISYNC_LOG_FORMAT=JSON is taken, as
// PISYNC_LOG_LEVEL=DEBUG is, and the log is JSON.
func TestLogFormatEitherCase(t *testing.T) {
	t.Setenv("PISYNC_SESSIONS_DIR", "/tmp/s")
	t.Setenv("PISYNC_STATE_DIR", "/tmp/st")
	t.Setenv("PISYNC_LOG_FORMAT", "JSON")
	t.Setenv("PISYNC_LOG_LEVEL", "DEBUG")
	c, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	c.Logger(&b).Info("hello")
	if !strings.HasPrefix(b.String(), "{") {
		t.Errorf("the log is not JSON: %q", b.String())
	}
}

// TestWebHosts: PISYNC_WEB_HOSTS entries are trimmed, as a list written by
// hand has spaces (" b.example" was compared with the Host as it was, and
// the view answered 421), and an entry that can never match a Host is
// refused, named, with what is wanted: a scheme, a path, a port (the view
// compares the Host's name alone), a wildcard, an empty entry. They were
// all taken without a word (a config probe's finding).
func TestWebHosts(t *testing.T) {
	t.Setenv("PISYNC_SESSIONS_DIR", "/tmp/s")
	t.Setenv("PISYNC_STATE_DIR", "/tmp/st")
	t.Setenv("PISYNC_WEB_HOSTS", "a.example, b.example ,pi.example.,192.168.1.5, fd00::1,[fd00::2],pi_box")
	c, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a.example", "b.example", "pi.example.", "192.168.1.5", "fd00::1", "fd00::2", "pi_box"}; !slices.Equal(c.WebHosts, want) {
		t.Errorf("WebHosts %q, want %q", c.WebHosts, want)
	}
	for v, want := range map[string]string{
		"pi.example:24350": `"pi.example:24350" has a port`,
		"*":                `"*" is a wildcard`,
		"*.example":        `"*.example" is a wildcard`,
		"http://evil.com":  `"http://evil.com" has a scheme`,
		"evil.com/x":       `"evil.com/x" has a path`,
		"evil.com:80":      `"evil.com:80" has a port`,
		"192.168.1.5:80":   `"192.168.1.5:80" has a port`,
		"[fd00::1]:80":     `"[fd00::1]:80" has a port`,
		" , ":              "an empty name (a stray comma?)",
		"a.example,":       "an empty name (a stray comma?)",
		"a..example":       `"a..example" is not a host name`,
		"a example":        `"a example" is not a host name`,
	} {
		t.Setenv("PISYNC_WEB_HOSTS", v)
		_, err := Load()
		if err == nil || !strings.Contains(err.Error(), "PISYNC_WEB_HOSTS: ") || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "want comma-separated host names") {
			t.Errorf("PISYNC_WEB_HOSTS=%q: %v, want an error naming the variable and saying %s", v, err, want)
		}
	}
}

// TestNamesInAnyCase: every setting that takes one of a few names takes
// it in any case, as LOG_LEVEL=DEBUG, LOG_FORMAT=JSON and STORE_CIPHER=AES
// were taken while SEARCH=OFF, RULES=SEED and DELETE=Trash were refused;
// the daemon then reads the name in lower case.
func TestNamesInAnyCase(t *testing.T) {
	t.Setenv("PISYNC_SESSIONS_DIR", "/tmp/s")
	t.Setenv("PISYNC_STATE_DIR", "/tmp/st")
	for k, v := range map[string]string{
		"PISYNC_LOG_LEVEL": "DEBUG", "PISYNC_LOG_FORMAT": "JSON", "PISYNC_STORE_CIPHER": "AES",
		"PISYNC_SEARCH": "OFF", "PISYNC_RULES": "SEED", "PISYNC_DELETE": "Trash",
		"PISYNC_ENCRYPT": "On", "PISYNC_HUB_COMPRESSION": "Fast",
	} {
		t.Setenv(k, v)
	}
	c, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if c.Search != "off" || c.SearchOn() || c.RuleSet() != session.RulesSeed || c.Delete != "trash" || c.Encrypt != "on" || c.HubCompression != "fast" {
		t.Errorf("read as %+v", c)
	}
	// A wrong one is still quoted as written.
	t.Setenv("PISYNC_DELETE", "Bin")
	if _, err := Load(); err == nil || !strings.Contains(err.Error(), `PISYNC_DELETE "Bin": want trash or ignore`) {
		t.Errorf("PISYNC_DELETE=Bin: %v", err)
	}
}

// TestErrorsNameTheVariable: a setting's error names its PISYNC_
// variable, and is given when the settings are read, not when the part
// that uses it starts (a config probe's finding: "embedded: config: hub
// URL: ftp://x: ...", "path map \"foo\": ...", "hub credentials are set
// but PISYNC_HUB_URLS is not" with only PISYNC_HUB_CA set).
func TestErrorsNameTheVariable(t *testing.T) {
	t.Setenv("PISYNC_SESSIONS_DIR", "/tmp/s")
	t.Setenv("PISYNC_STATE_DIR", "/tmp/st")
	for _, c := range []struct {
		env  map[string]string
		want []string
	}{
		{map[string]string{"PISYNC_HUB_URLS": "ftp://x"}, []string{`PISYNC_HUB_URLS ftp://x: want tls://HOST:PORT`}},
		{map[string]string{"PISYNC_HUB_URLS": "tls://"}, []string{`PISYNC_HUB_URLS tls://: no host`}},
		// Run, and "invalid port" logged at every attempt, before (a probe).
		{map[string]string{"PISYNC_HUB_URLS": "nats://127.0.0.1:99999"}, []string{`PISYNC_HUB_URLS nats://127.0.0.1:99999: port 99999: want 1 to 65535`}},
		{map[string]string{"PISYNC_HUB_URLS": "nats://127.0.0.1:0"}, []string{`port 0: want 1 to 65535`}},
		{map[string]string{"PISYNC_HUB_URLS": "ftp://ann:secret@x"}, []string{`PISYNC_HUB_URLS ftp://REDACTED@x: want`}},
		{map[string]string{"PISYNC_HUB_URLS": "nats://ann:secret @127.0.0.1:1"}, []string{`PISYNC_HUB_URLS nats://REDACTED@127.0.0.1:1: `}},
		{map[string]string{"PISYNC_HUB_CA": "/x"}, []string{`PISYNC_HUB_CA is set but PISYNC_HUB_URLS is not`, "unset it"}},
		{map[string]string{"PISYNC_HUB_CA": "/x", "PISYNC_HUB_NKEY": "/y"}, []string{`PISYNC_HUB_CA and PISYNC_HUB_NKEY are set but PISYNC_HUB_URLS is not`}},
	} {
		t.Run(fmt.Sprint(c.env), func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			_, err := Load()
			for _, w := range c.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("err %v, want %q", err, w)
				}
			}
			if err != nil && strings.Contains(err.Error(), "secret") {
				t.Errorf("the password is in the error: %v", err)
			}
		})
	}
	// A state dir that cannot be made, or read (said "config: state
	// dir: mkdir /proc/x: ...").
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "file"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for st, want := range map[string]string{
		"/proc/x":                        "PISYNC_STATE_DIR: mkdir /proc/x: ",
		filepath.Join(dir, "file", "st"): "PISYNC_STATE_DIR: node id: open " + filepath.Join(dir, "file", "st", "node-id") + ": ",
	} {
		c := &Config{StateDir: st}
		if err := c.EnsureNodeID(false); err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("state dir %s: %v, want %q", st, err, want)
		}
	}
}

// TestListenOn4222: PISYNC_LISTEN takes 4222, NATS's usual port. Its help
// said "(not 4222, a hub's client port)", which read as a rule the daemon
// did not keep: 4222 is the default of a hub node's client listener
// (PISYNC_HUB_LISTEN), so the examples use 4223, but a workstation
// without a hub may use it, and a port a hub (or anything) holds is named
// at start (cmd/pisyncd inUse). The help now says that.
func TestListenOn4222(t *testing.T) {
	t.Setenv("PISYNC_SESSIONS_DIR", "/tmp/s")
	t.Setenv("PISYNC_STATE_DIR", "/tmp/st")
	t.Setenv("PISYNC_LISTEN", "127.0.0.1:4222")
	if _, err := Load(); err != nil {
		t.Fatalf("PISYNC_LISTEN=127.0.0.1:4222: %v", err)
	}
	var b strings.Builder
	if err := Usage(&b); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(b.String(), "\n") {
		if strings.HasPrefix(line, "PISYNC_LISTEN ") && (strings.Contains(line, "not 4222") || !strings.Contains(line, "hub node on the same machine")) {
			t.Errorf("the help of PISYNC_LISTEN: %s", line)
		}
	}
}
