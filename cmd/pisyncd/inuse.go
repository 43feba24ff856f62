package main

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
)

// listener is a setting that names an address to listen on.
type listener struct{ setting, addr string }

// inUse explains err when it says one of the listeners' addresses is
// taken: which setting names it and what to do (another NATS server on
// 4222 is a common case). The error is net.Listen's or, wrapped by the
// embedded server, nats-server's; both name the address. Any other error
// is returned as it is.
func inUse(err error, ls ...listener) error {
	if !errors.Is(err, syscall.EADDRINUSE) {
		return err
	}
	msg := err.Error()
	for _, l := range ls {
		if l.addr != "" && strings.Contains(msg, l.addr) {
			return fmt.Errorf("%s %s is taken: another program, or another pisyncd, listens there; set %s to a free address (%w)", l.setting, l.addr, l.setting, err)
		}
	}
	return err
}
