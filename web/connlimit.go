package web

import (
	"net"
	"os"
	"sync"
	"time"
)

// LimitListener bounds the connections l holds open to total, the last
// reserved of which only programs of this process's user may take (where
// the system says whose a connection is: Linux). Every user of the machine
// reaches a loopback port; with one bound for all, another user's program
// holding it with idle connections kept the daemon's own user out of the
// view and its /healthz. Past total a new connection waits to be accepted;
// in the reserve, another user's is closed at once. Whose a connection is
// costs a question to the kernel (a read of /proc/net/tcp where it gives
// no answer), so it is asked only in the reserve.
//
// A write that waits longer than stall for the client to read (0: for
// ever) fails, and the request writing it ends: an answer is written while
// what it was read from is held (a whole session's read slot, a context
// query's, a stream reader's buffer), and two clients that stopped reading
// held every whole-session read of the web view, and 190 the daemon's
// memory at twice its budget, for as long as they stayed (a probe,
// 2026-12-07). Each write sets its own deadline, so a stream quiet for
// longer (a tail, the view's events) is not cut.
func LimitListener(l net.Listener, total, reserved int, stall time.Duration) net.Listener {
	return &ownerListener{Listener: l, slots: make(chan struct{}, total), open: total - reserved, uid: os.Getuid(), stall: stall}
}

type ownerListener struct {
	net.Listener
	slots chan struct{} // one per open connection
	open  int           // connections anyone may hold; the rest are this user's
	uid   int
	stall time.Duration
}

func (l *ownerListener) Accept() (net.Conn, error) {
	for {
		l.slots <- struct{}{}
		c, err := l.Listener.Accept()
		if err != nil {
			<-l.slots
			return nil, err
		}
		if len(l.slots) > l.open {
			if uid, ok := addrOwner(c.LocalAddr(), c.RemoteAddr()); ok && uid != l.uid {
				c.Close() // the reserve is this user's
				<-l.slots
				continue
			}
		}
		return &ownedConn{Conn: c, release: func() { <-l.slots }, stall: l.stall}, nil
	}
}

// ownedConn gives its slot back once, at its first Close, and bounds each
// write's wait for the client by stall.
type ownedConn struct {
	net.Conn
	once    sync.Once
	release func()
	stall   time.Duration
}

func (c *ownedConn) Write(p []byte) (int, error) {
	if c.stall > 0 {
		c.Conn.SetWriteDeadline(time.Now().Add(c.stall))
	}
	return c.Conn.Write(p)
}

func (c *ownedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
