package testenv_test

import (
	"testing"
	"time"

	"github.com/larkline/larkline/internal/testenv"
)

func TestClockMovesOnlyWhenTold(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name string
		move func(*testenv.Clock)
		want time.Time
	}{
		{"untouched", func(*testenv.Clock) {}, t0},
		{"advance", func(c *testenv.Clock) { c.Advance(90 * time.Second) }, t0.Add(90 * time.Second)},
		{"set back", func(c *testenv.Clock) { c.Set(t0.Add(-time.Hour)) }, t0.Add(-time.Hour)},
		{"set then advance", func(c *testenv.Clock) { c.Set(t0.Add(time.Hour)); c.Advance(time.Minute) }, t0.Add(61 * time.Minute)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := testenv.NewClock(t0)
			tt.move(c)
			if got := c.Now(); !got.Equal(tt.want) {
				t.Fatalf("Now() = %s, want %s", got, tt.want)
			}
		})
	}
}
