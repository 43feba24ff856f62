package config

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

// clearSettings unsets every PISYNC_ and PISYNC_HUB_ setting and its bare
// name for the test, with HOME a folder of its own.
func clearSettings(t *testing.T) {
	t.Helper()
	t.Setenv("HOME", t.TempDir())
	for _, name := range settingNames() {
		for _, n := range []string{name, bareName(name)} {
			t.Setenv(n, "")
			os.Unsetenv(n)
		}
	}
}

// bareName is a setting's name without its prefix: what envconfig also
// read when the prefixed one was unset.
func bareName(name string) string {
	if b, ok := strings.CutPrefix(name, HubPrefix+"_"); ok {
		return b
	}
	return strings.TrimPrefix(name, Prefix+"_")
}

// TestBareNamesIgnored: a variable named like a setting without its
// prefix (LOG_LEVEL, NODE_ID, STATE_DIR, HTTP_ADDR, set for another
// program) changes nothing. Before, envconfig read each one when the
// PISYNC_ variable was unset: STATE_DIR moved the store, NODE_ID renamed
// the node, HTTP_ADDR turned the web view on, and LOG_LEVEL=bogus was
// refused as "PISYNC_LOG_LEVEL".
func TestBareNamesIgnored(t *testing.T) {
	clearSettings(t)
	want, wantHub := loadBoth(t, "with nothing set")
	for _, name := range settingNames() {
		t.Setenv(bareName(name), "bogus value")
	}
	got, gotHub := loadBoth(t, "with every bare name set")
	if !reflect.DeepEqual(got, want) {
		t.Errorf("with every bare name set:\n got %+v\nwant %+v", got, want)
	}
	if !reflect.DeepEqual(gotHub, wantHub) {
		t.Errorf("hub, with every bare name set:\n got %+v\nwant %+v", gotHub, wantHub)
	}
}

// loadBoth loads the daemon's and the hub's settings, failing the test
// (named by what) when either is refused.
func loadBoth(t *testing.T, what string) (*Config, *Hub) {
	t.Helper()
	c, err := Load()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	h, err := LoadHub()
	if err != nil {
		t.Fatalf("hub, %s: %v", what, err)
	}
	return c, h
}

// TestBlankMeansDefault: a setting set to nothing (an empty line of a
// service's environment file) takes its default, as if unset; before,
// PISYNC_SEARCH= turned search off and PISYNC_LOG_LEVEL= was refused.
// PISYNC_HUB_LISTEN= keeps its documented meaning: no client listener.
func TestBlankMeansDefault(t *testing.T) {
	clearSettings(t)
	want, wantHub := loadBoth(t, "with nothing set")
	for _, name := range settingNames() {
		t.Setenv(name, " ")
	}
	t.Setenv(HubPrefix+"_LISTEN", "")
	got, gotHub := loadBoth(t, "with every setting blank")
	if !reflect.DeepEqual(got, want) {
		t.Errorf("with every setting blank:\n got %+v\nwant %+v", got, want)
	}
	if !got.SearchOn() {
		t.Error("PISYNC_SEARCH= turned search off")
	}
	if gotHub.Listen != "" {
		t.Errorf("PISYNC_HUB_LISTEN= gave a client listener %q, want none", gotHub.Listen)
	}
	gotHub.Listen = wantHub.Listen
	if !reflect.DeepEqual(gotHub, wantHub) {
		t.Errorf("hub, with every setting blank:\n got %+v\nwant %+v", gotHub, wantHub)
	}
}
