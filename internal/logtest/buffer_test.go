package logtest

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// TestBufferConcurrentWrites writes from several goroutines while reading, and checks
// that every line arrives whole (run with -race).
func TestBufferConcurrentWrites(t *testing.T) {
	tests := []struct {
		name    string
		writers int
		lines   int
	}{
		{name: "one writer", writers: 1, lines: 50},
		{name: "eight writers", writers: 8, lines: 50},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b Buffer
			var wg sync.WaitGroup
			for w := range tt.writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range tt.lines {
						fmt.Fprintf(&b, "writer=%d line=%d\n", w, i)
						_ = b.String()
					}
				}()
			}
			wg.Wait()
			got := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
			if len(got) != tt.writers*tt.lines {
				t.Fatalf("got %d lines, want %d", len(got), tt.writers*tt.lines)
			}
			for _, l := range got {
				if !strings.HasPrefix(l, "writer=") || !strings.Contains(l, " line=") {
					t.Fatalf("torn line %q", l)
				}
			}
		})
	}
}
