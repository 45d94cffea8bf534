package goka

import (
	"testing"
	"time"
)

// TestRejoinWait: a session that ran for the spacing or longer rejoins at once; a
// shorter one waits out the rest of the spacing (larkline patch, D48).
func TestRejoinWait(t *testing.T) {
	for _, c := range []struct {
		ran, want time.Duration
	}{
		{0, 5 * time.Second},
		{time.Second, 4 * time.Second},
		{4999 * time.Millisecond, time.Millisecond},
		{5 * time.Second, 0},
		{40 * time.Second, 0},
	} {
		if got := rejoinWait(c.ran); got != c.want {
			t.Errorf("rejoinWait(%s) = %s, want %s", c.ran, got, c.want)
		}
	}
}
