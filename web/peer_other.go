//go:build !linux

package web

import "net"

// socketOwner does not know the owner of a socket here: a cookie is then
// taken from any local program (docs/SECURITY.md).
func socketOwner(local, remote *net.TCPAddr) (int, bool) { return 0, false }
