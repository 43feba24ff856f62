package embedded

import (
	"fmt"
	"net"
	"strconv"

	"github.com/nats-io/nats-server/v2/server"
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

// listenerPermissions make the listener's user a reader. Local subscribers
// read the streams and the projections, live or stored; they may not
// write, delete or reconfigure anything (the daemon's data), nor publish a
// line into a stream, nor act as this node towards the hub.
//
// Allowed: subscribing to the streams' subjects, the buckets' and the
// reader's own inbox (_INBOX.>, nats.go's default; see below); the
// JetStream API calls that read
// (account, stream and consumer info, stream names and lists, message and
// direct gets), creating, pulling from and deleting consumers to read
// with (the nats CLI and nats.go's ordered consumers and KV watchers
// create theirs through CONSUMER.CREATE), acks and flow control replies.
// Denied by omission: everything else, notably STREAM.CREATE, UPDATE,
// DELETE, PURGE and MSG.DELETE, publishing on pi.>, $KV.> or $O.>, and the
// hub's API; named again in the deny list, with the legacy
// CONSUMER.DURABLE.CREATE.
//
// CONSUMER.CREATE also updates an existing consumer of the same name, and
// CONSUMER.DELETE and MSG.NEXT act on any consumer they name: a reader
// that knew the names of the daemon's consumers could change, drain or
// delete them (a forwarder told to skip lines). So the names stay secret:
// consumer names and lists are not allowed, nor subscribing to the
// JetStream API, its advisories or the daemon's own inbox, where the names
// travel. The daemon's consumers have random names; a reader's own
// consumers it names itself.
func listenerPermissions(nodeID string) *server.Permissions {
	var allow, deny []string
	for _, api := range []string{"$JS.API.", "$JS." + Domain(nodeID) + ".API."} {
		allow = append(allow,
			api+"INFO",
			api+"STREAM.NAMES",
			api+"STREAM.LIST",
			api+"STREAM.INFO.*",
			api+"STREAM.MSG.GET.*",
			api+"DIRECT.GET.>",
			api+"CONSUMER.CREATE.>",
			api+"CONSUMER.INFO.*.*",
			api+"CONSUMER.MSG.NEXT.*.*",
			api+"CONSUMER.DELETE.*.*",
		)
		deny = append(deny,
			api+"STREAM.CREATE.>", api+"STREAM.UPDATE.>", api+"STREAM.DELETE.>", api+"STREAM.PURGE.>",
			api+"STREAM.MSG.DELETE.>", api+"STREAM.SNAPSHOT.>", api+"STREAM.RESTORE.>",
			api+"CONSUMER.DURABLE.CREATE.>", api+"CONSUMER.NAMES.>", api+"CONSUMER.LIST.>",
		)
	}
	allow = append(allow, "$JS.ACK.>", "$JS.FC.>")
	deny = append(deny, "pi.>", "$KV.>", "$O.>", "$JS."+HubDomain+".>")
	return &server.Permissions{
		Publish: &server.SubjectPermission{Allow: allow, Deny: deny},
		// Subscribing to named subjects alone: a subscription to ">" was
		// given the daemon's own deliveries (routed on its inbox, but
		// checked against the deny list by their stream subjects), whose
		// reply subjects name its consumers.
		Subscribe: &server.SubjectPermission{
			Allow: []string{"_INBOX.>", "pi.>", "$KV.>"},
			Deny:  []string{"$JS.API.>", "$JS.*.API.>", "$JS.EVENT.>", InboxPrefix(nodeID) + ".>"},
		},
	}
}
