package embedded

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/pisyncd/pisyncd/eventlog"
)

// loopbackAddr parses Config.Listen into the host and port for
// server.Options. Only loopback hosts pass: other local users can reach
// loopback too, which is why the listener also requires credentials, but
// nothing off the machine can.
func loopbackAddr(listen string) (host string, port int, err error) {
	h, p, err := net.SplitHostPort(listen)
	if err != nil {
		return "", 0, fmt.Errorf("listen %q: %w", listen, err)
	}
	switch {
	case h == "localhost":
		// Bind the address, not the name: /etc/hosts decides what
		// "localhost" resolves to, and we promise loopback.
		h = "127.0.0.1"
	case h == "":
		return "", 0, fmt.Errorf("listen %q: empty host would bind every interface; use 127.0.0.1", listen)
	default:
		ip := net.ParseIP(h)
		if ip == nil || !ip.IsLoopback() {
			return "", 0, fmt.Errorf("listen %q: host must be loopback (127.0.0.0/8, ::1 or localhost)", listen)
		}
	}
	n, err := strconv.Atoi(p)
	if err != nil || n < 0 || n > 65535 {
		return "", 0, fmt.Errorf("listen %q: bad port %q", listen, p)
	}
	if n == 0 {
		// nats-server reads port 0 as "the default 4222"; -1 asks the
		// kernel for a free one, which is what 0 means everywhere else.
		n = server.RANDOM_PORT
	}
	return h, n, nil
}

// A local subscriber reads through an account of its own, readAccount,
// which holds nothing and can reach nothing but what the daemon's account
// ($G) exports to it: each stored message of eventlog.LiveStreams
// (PI_LOCAL, PI_ALL and the projections' bucket) as it is stored, and
// direct gets of those streams, which the daemon's ReadRelay answers. It
// has no JetStream and so no consumer API: a consumer's
// deliver subject is published by the server, past any publish
// permission, and a reader who could create one could write into the
// daemon's streams (a push consumer delivering on pi.evt.<node>.…), fill a
// stream's consumer slots, or hold server memory with deliveries it never
// read. A publish in readAccount reaches only readAccount: nothing a reader
// sends lands in a stream.
const (
	readAccount = "PISYNC_READ"
	// daemonAlias names $G in the accounts block parsed below, where
	// nats-server reserves "$G"; the parsed account is renamed.
	daemonAlias = "PISYNC_DAEMON"

	// Limits of readAccount, all its connections together: a reader
	// cannot open connections or subscriptions without end. A connection
	// that does not read what it asked for is closed by the server at
	// max_pending (64 MiB) as a slow consumer.
	readMaxConns   = 16
	readMaxSubs    = 1024
	readMaxPayload = 4096 // a direct get request is ~100 bytes
)

// listenerAccounts returns the two accounts of a workstation with a
// listener: $G, the daemon's, with JetStream and its exports to
// readAccount, and readAccount with its imports and limits. They are
// written as a config block and parsed, because the JetStream of $G
// beside another account can only be enabled that way.
func listenerAccounts() (daemon, read *server.Account, err error) {
	var exports, imports strings.Builder
	for _, r := range eventlog.LiveStreams {
		// Direct gets go to the ReadRelay, under the names a reader
		// would use with JetStream. A batch get answers with several
		// messages; a get by subject (get.<stream>.<subject>) with one.
		relay, get := readGetPrefix+"."+r.Stream, "$JS.API.DIRECT.GET."+r.Stream
		fmt.Fprintf(&exports, "{stream: %q, accounts: [%s]}\n", r.Live, readAccount)
		fmt.Fprintf(&exports, "{service: %q, response: stream, accounts: [%s]}\n", relay, readAccount)
		fmt.Fprintf(&exports, "{service: %q, accounts: [%s]}\n", relay+".>", readAccount)
		fmt.Fprintf(&imports, "{stream: {account: %s, subject: %q}, to: %q}\n", daemonAlias, r.Live, r.Subjects)
		fmt.Fprintf(&imports, "{service: {account: %s, subject: %q}, to: %q}\n", daemonAlias, relay, get)
		fmt.Fprintf(&imports, "{service: {account: %s, subject: %q}, to: %q}\n", daemonAlias, relay+".>", get+".>")
	}
	conf := fmt.Sprintf(`accounts {
  %s { jetstream: enabled, exports: [
%s] }
  %s { limits: {max_connections: %d, max_subscriptions: %d, max_payload: %d}, imports: [
%s] }
}`, daemonAlias, exports.String(), readAccount, readMaxConns, readMaxSubs, readMaxPayload, imports.String())
	var o server.Options
	if err := o.ProcessConfigString(conf); err != nil {
		return nil, nil, fmt.Errorf("listener accounts: %w", err)
	}
	for _, a := range o.Accounts {
		switch a.Name {
		case daemonAlias:
			a.Name = server.DEFAULT_GLOBAL_ACCOUNT
			daemon = a
		case readAccount:
			read = a
		}
	}
	if daemon == nil || read == nil {
		return nil, nil, fmt.Errorf("listener accounts: %d parsed, want %s and %s", len(o.Accounts), daemonAlias, readAccount)
	}
	return daemon, read, nil
}

// listenerPermissions keep a reader to the direct gets of the streams it
// reads and to subscribing to their subjects and its own inbox. What it
// publishes stays in readAccount, so the allow list is about the other
// readers: without it one could publish a forged line on pi.evt.> that
// another reader takes for the daemon's. (A direct get's reply subject
// is the requester's choice, and nats-server checks no permission on it:
// a reader can have a genuine stored message delivered on another's
// subject, once more or early. A reader keeps the sequence it is at and
// fills a gap by direct get; examples/notify-go does.)
func listenerPermissions() *server.Permissions {
	var pub, sub []string
	for _, r := range eventlog.LiveStreams {
		pub = append(pub, "$JS.API.DIRECT.GET."+r.Stream, "$JS.API.DIRECT.GET."+r.Stream+".>")
		sub = append(sub, r.Subjects)
	}
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: pub},
		Subscribe: &server.SubjectPermission{Allow: append(sub, "_INBOX.>")},
	}
}
