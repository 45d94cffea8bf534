package freeport

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ErrExhausted: every port of the range is reserved or in use.
var ErrExhausted = errors.New("freeport: no free port left in the range")

// Port is a reserved loopback port. Release it when the server that used it is
// gone; a process that exits releases its ports.
type Port struct {
	n    int
	lock *os.File
}

// Number is the port number.
func (p *Port) Number() int { return p.n }

// Addr is the port on 127.0.0.1, as host:port.
func (p *Port) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(p.n)) }

// Release gives the port back; it is safe to call more than once.
func (p *Port) Release() error {
	if p == nil || p.lock == nil {
		return nil
	}
	f := p.lock
	p.lock = nil
	return unlock(f)
}

// Reserve returns a port nobody listens on, held for this process.
func Reserve() (*Port, error) {
	lo, hi := portRange()
	span := hi - lo
	start := rand.IntN(span)
	candidates := make([]int, span)
	for i := range candidates {
		candidates[i] = lo + (start+i)%span
	}
	p, err := reserveFrom(filepath.Join(os.TempDir(), "larkline-freeport"), candidates)
	if errors.Is(err, ErrExhausted) {
		return nil, fmt.Errorf("%w [%d, %d)", err, lo, hi)
	}
	return p, err
}

// reserveFrom reserves the first of candidates that no lock in dir holds and
// nothing listens on.
func reserveFrom(dir string, candidates []int) (*Port, error) {
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, fmt.Errorf("freeport: creating the lock directory: %w", err)
	}
	for _, n := range candidates {
		f, ok, err := tryLock(filepath.Join(dir, strconv.Itoa(n)))
		if err != nil {
			return nil, fmt.Errorf("freeport: locking port %d: %w", n, err)
		}
		if !ok {
			continue // another larkline process holds it
		}
		if ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(n))); err == nil {
			_ = ln.Close()
			return &Port{n: n, lock: f}, nil
		}
		_ = unlock(f) // something else listens there
	}
	return nil, ErrExhausted
}

// ReserveN reserves n distinct ports; on an error none stays reserved.
func ReserveN(n int) ([]*Port, error) {
	ports := make([]*Port, 0, n)
	for range n {
		p, err := Reserve()
		if err != nil {
			for _, q := range ports {
				_ = q.Release()
			}
			return nil, err
		}
		ports = append(ports, p)
	}
	return ports, nil
}

// defaultLow is the start of the range when the kernel's ephemeral range is below
// it or unknown.
const defaultLow = 20000

// portRange is [lo, hi): below the kernel's ephemeral range when there is room
// there, above it otherwise.
func portRange() (lo, hi int) {
	eLo, eHi := ephemeralRange()
	switch {
	case eLo-defaultLow >= 1000:
		return defaultLow, eLo
	case 65536-(eHi+1) >= 1000:
		return eHi + 1, 65536
	default: // the kernel uses almost every port: share its range
		return 1024, 65536
	}
}

// ephemeralRange reads the kernel's range for port-0 listeners and outgoing
// connections (Linux; IANA's 49152–65535 elsewhere).
func ephemeralRange() (lo, hi int) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			l, err1 := strconv.Atoi(f[0])
			h, err2 := strconv.Atoi(f[1])
			if err1 == nil && err2 == nil && 0 < l && l <= h && h < 65536 {
				return l, h
			}
		}
	}
	return 49152, 65535
}
