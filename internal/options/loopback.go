package options

import (
	"net"
	"strings"
)

// LoopbackHost reports whether host (a name or an IP, without port; brackets allowed)
// stays on this machine: "localhost" (and names under it), a loopback IP, or a Unix
// socket path. Transport rules (issue #29) let plaintext through only to such hosts.
func LoopbackHost(host string) bool {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	switch {
	case strings.HasPrefix(host, "/"):
		return true // a Unix socket
	case strings.EqualFold(host, "localhost"), strings.HasSuffix(strings.ToLower(host), ".localhost"):
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
