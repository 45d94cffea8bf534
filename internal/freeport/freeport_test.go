package freeport

import (
	"errors"
	"net"
	"testing"
)

func TestReserveComesFromOutsideTheEphemeralRange(t *testing.T) {
	eLo, eHi := ephemeralRange()
	seen := map[int]bool{}
	var held []*Port
	t.Cleanup(func() {
		for _, p := range held {
			_ = p.Release()
		}
	})
	for range 50 {
		p, err := Reserve()
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, p)
		if n := p.Number(); n >= eLo && n <= eHi {
			t.Fatalf("port %d is in the kernel's ephemeral range [%d, %d]", n, eLo, eHi)
		}
		if seen[p.Number()] {
			t.Fatalf("port %d handed out twice while held", p.Number())
		}
		seen[p.Number()] = true
		ln, err := net.Listen("tcp", p.Addr())
		if err != nil {
			t.Fatalf("binding the reserved %s: %v", p.Addr(), err)
		}
		_ = ln.Close()
	}
}

// TestReserveSkipsHeldAndBusyPorts: of three candidate ports, one held by another
// lock (another process) and one with a listener, only the third is handed out, then
// none; a release makes it available again.
func TestReserveSkipsHeldAndBusyPorts(t *testing.T) {
	ports, err := ReserveN(3) // three ports nothing else uses, as candidates
	if err != nil {
		t.Fatal(err)
	}
	candidates := make([]int, len(ports))
	for i, p := range ports {
		candidates[i] = p.Number()
		_ = p.Release()
	}
	dir := t.TempDir()
	held, err := reserveFrom(dir, candidates[:1])
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release()
	ln, err := net.Listen("tcp", ports[1].Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()

	third, err := reserveFrom(dir, candidates)
	if err != nil || third.Number() != candidates[2] {
		t.Fatalf("reserved %v, %v; want %d (held %d, busy %d)", third, err, candidates[2], candidates[0], candidates[1])
	}
	if _, err := reserveFrom(dir, candidates); !errors.Is(err, ErrExhausted) {
		t.Fatalf("a fourth reservation = %v, want ErrExhausted", err)
	}
	if err := third.Release(); err != nil {
		t.Fatal(err)
	}
	if err := third.Release(); err != nil {
		t.Fatalf("second Release = %v", err)
	}
	again, err := reserveFrom(dir, candidates)
	if err != nil || again.Number() != candidates[2] {
		t.Fatalf("after the release: %v, %v; want port %d again", again, err, candidates[2])
	}
	_ = again.Release()
}
