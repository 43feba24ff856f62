package web

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"

	"golang.org/x/sys/unix"
)

// diagOwner asks the kernel (NETLINK_SOCK_DIAG, the interface ss uses)
// for the user owning the TCP socket whose local end is local and whose
// remote end is remote: one exact lookup, where /proc/net/tcp is the
// whole table, read and scanned at every question. With another user's
// program holding 10,000 loopback connections, each question read about
// 1.5 MB, and the owner's own view slowed to seconds (a local probe,
// 2026-12-06). Any user may ask. found is false when no socket a program
// holds has these ends; err when the kernel gave no answer (an older
// kernel, a sandbox without netlink), and the tables are to be read.
func diagOwner(local, remote *net.TCPAddr) (uid int, found bool, err error) {
	for _, family := range []byte{unix.AF_INET, unix.AF_INET6} {
		// An IPv4 client of a dual-stack listener has an IPv6 socket.
		req, ok := diagRequest(family, local, remote)
		if !ok {
			continue
		}
		if uid, found, err = diagAsk(req); err != nil || found {
			return uid, found, err
		}
	}
	return 0, false, nil
}

// diagAsk sends one request and reads the owner from the answer.
func diagAsk(req []byte) (int, bool, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return 0, false, err
	}
	defer unix.Close(fd)
	// The kernel answers at once: a reply that never comes must not hold
	// an accept, so the read waits a second at most.
	tv := unix.Timeval{Sec: 1}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return 0, false, err
	}
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return 0, false, err
	}
	buf := make([]byte, 4096)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return 0, false, err
	}
	return diagReply(req, buf[:n])
}

// The layouts of linux/inet_diag.h and linux/netlink.h, in bytes.
const (
	nlmsgLen     = 16          // struct nlmsghdr
	diagReqLen   = 8 + 48      // struct inet_diag_req_v2 (its inet_diag_sockid at 8)
	diagMsgID    = 4           // inet_diag_msg.id's offset
	diagMsgUID   = 4 + 48 + 12 // inet_diag_msg.idiag_uid's offset
	diagMsgLen   = diagMsgUID + 8
	diagAllState = 0xffffffff
	diagNoCookie = 0xffffffff // INET_DIAG_NOCOOKIE: no cookie to match
	tcpListen    = 10         // TCP_LISTEN in inet_diag_msg.idiag_state
)

// diagRequest is one inet_diag_req_v2 message asking for the TCP socket
// of family with these ends; false when they have no form in it.
func diagRequest(family byte, local, remote *net.TCPAddr) ([]byte, bool) {
	l, r := local.IP.To4(), remote.IP.To4()
	if family == unix.AF_INET6 {
		l, r = local.IP.To16(), remote.IP.To16()
	}
	if l == nil || r == nil {
		return nil, false
	}
	b := make([]byte, nlmsgLen+diagReqLen)
	ne := binary.NativeEndian
	ne.PutUint32(b[0:], uint32(len(b)))
	ne.PutUint16(b[4:], unix.SOCK_DIAG_BY_FAMILY)
	ne.PutUint16(b[6:], unix.NLM_F_REQUEST) // one socket, not a dump
	req := b[nlmsgLen:]
	req[0], req[1] = family, unix.IPPROTO_TCP
	ne.PutUint32(req[4:], diagAllState)
	id := req[8:]
	// The socket's own end is the source, its peer the destination;
	// ports and addresses in network order.
	binary.BigEndian.PutUint16(id[0:], uint16(local.Port))
	binary.BigEndian.PutUint16(id[2:], uint16(remote.Port))
	copy(id[4:20], l)
	copy(id[20:36], r)
	ne.PutUint32(id[40:], diagNoCookie)
	ne.PutUint32(id[44:], diagNoCookie)
	return b, true
}

// diagReply reads the owner from the kernel's answer to req: one
// inet_diag_msg, or an error message (ENOENT: no such socket).
//
// Only a socket with exactly the ends asked for, held by a program, has
// an owner here. The kernel's lookup falls back to a listening socket on
// the asked source's address and port, which would name the listener's
// owner for a connection gone by then; and a socket no program holds any
// more (TIME_WAIT, an orphan) has no inode, and uid 0 in the answer.
func diagReply(req, b []byte) (int, bool, error) {
	ne := binary.NativeEndian
	if len(b) < nlmsgLen || int(ne.Uint32(b[0:])) > len(b) {
		return 0, false, errors.New("sock_diag: a reply cut short")
	}
	switch ne.Uint16(b[4:]) {
	case unix.NLMSG_ERROR:
		if len(b) >= nlmsgLen+4 && unix.Errno(-int32(ne.Uint32(b[nlmsgLen:]))) == unix.ENOENT {
			return 0, false, nil
		}
		return 0, false, errors.New("sock_diag: the kernel refused the question")
	case unix.SOCK_DIAG_BY_FAMILY:
	default:
		return 0, false, errors.New("sock_diag: an unexpected reply")
	}
	if len(b) < nlmsgLen+diagMsgLen {
		return 0, false, errors.New("sock_diag: a reply cut short")
	}
	msg := b[nlmsgLen:]
	asked := req[nlmsgLen+8:]
	if msg[0] != req[nlmsgLen] || msg[1] == tcpListen || !bytes.Equal(msg[diagMsgID:diagMsgID+36], asked[:36]) {
		return 0, false, nil
	}
	if ne.Uint32(msg[diagMsgUID+4:]) == 0 {
		return 0, false, nil // no inode: no program holds it
	}
	return int(ne.Uint32(msg[diagMsgUID:])), true, nil
}
