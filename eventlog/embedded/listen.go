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
