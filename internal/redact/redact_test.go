package redact

import (
	"strings"
	"testing"
)

func TestURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"tls://hub.lan:7422", "tls://hub.lan:7422"},
		{"tls://ann:s3cret@hub.lan:7422", "tls://REDACTED@hub.lan:7422"},
		{"nats://tok3n@hub.lan:7422", "nats://REDACTED@hub.lan:7422"},
		{"nats://user:p%40ss@h:1", "nats://REDACTED@h:1"},
		{"nats://user:pa/ss@h:1", "nats://REDACTED@h:1"},     // does not parse as a URL
		{"nats://user:p@ss word@h:1", "nats://REDACTED@h:1"}, // neither
		{"user:pass@h:1", "REDACTED@h:1"},                    // no scheme
		{"nats-route://pisyncd-route:abc@hub2:6222", "nats-route://REDACTED@hub2:6222"},
		{"", ""},
	} {
		got := URL(tc.in)
		if got != tc.want {
			t.Errorf("URL(%q) = %q, want %q", tc.in, got, tc.want)
		}
		for _, secret := range []string{"s3cret", "tok3n", "pass", "p%40ss", "pa/ss", "abc", "ss word"} {
			if strings.Contains(got, secret) {
				t.Errorf("URL(%q) = %q still holds %q", tc.in, got, secret)
			}
		}
	}
	if got := URLs([]string{"tls://a:b@h:1", "tls://h:2"}); strings.Join(got, ",") != "tls://REDACTED@h:1,tls://h:2" {
		t.Errorf("URLs = %q", got)
	}
	if URLs(nil) != nil {
		t.Error("URLs(nil) is not nil")
	}
}
