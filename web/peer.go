package web

import (
	"context"
	"net"
	"sync"
)

// A browser sends the view's cookie to every port of the host, not only
// the daemon's: cookies are kept by host name alone. Any other user of the
// machine can listen on a loopback port, and a page of any site can send
// the browser there (a redirect, a link): the cookie came along (a local
// audit on 2026-12-03 read it so with chromium, then the whole view with
// it). So the cookie is not the token (it is useless in a header), and it
// is taken only on a connection whose other end is a socket of the
// daemon's own user: where the system says whose it is (Linux,
// /proc/net/tcp), a cookie replayed by another user's program is refused.

type connKey struct{}

// peer is one connection's ends; its owner is looked up once, when a
// request on it first presents the cookie.
type peer struct {
	local, remote net.Addr
	once          sync.Once
	uid           int
	known         bool
}

// ConnContext is an http.Server's ConnContext for the view's listener: it
// keeps each connection's addresses, by which the guard asks whose program
// sent a cookie.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, &peer{local: c.LocalAddr(), remote: c.RemoteAddr()})
}

// peerUID is the user owning the client's end of the request's connection,
// and whether it is known (not without ConnContext, nor where the system
// does not say).
func peerUID(ctx context.Context) (int, bool) {
	p, _ := ctx.Value(connKey{}).(*peer)
	if p == nil {
		return 0, false
	}
	p.once.Do(func() { p.uid, p.known = addrOwner(p.local, p.remote) })
	return p.uid, p.known
}

// addrOwner is the user owning the client's end (remote) of the TCP
// connection whose server end is local, and whether the system says.
func addrOwner(local, remote net.Addr) (int, bool) {
	l, lok := local.(*net.TCPAddr)
	r, rok := remote.(*net.TCPAddr)
	if !lok || !rok {
		return 0, false
	}
	return socketOwner(r, l)
}
