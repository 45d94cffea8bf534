package testenv_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/larkline/larkline/internal/testenv"
)

func TestClockMovesOnlyWhenTold(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	done, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tt := range []struct {
		name string
		move func(*testenv.Clock)
		want time.Time
	}{
		{"untouched", func(*testenv.Clock) {}, t0},
		{"advance", func(c *testenv.Clock) { c.Advance(90 * time.Second) }, t0.Add(90 * time.Second)},
		{"set back", func(c *testenv.Clock) { c.Set(t0.Add(-time.Hour)) }, t0.Add(-time.Hour)},
		{"set then advance", func(c *testenv.Clock) { c.Set(t0.Add(time.Hour)); c.Advance(time.Minute) }, t0.Add(61 * time.Minute)},
		{"sleep", func(c *testenv.Clock) { _ = c.Sleep(context.Background(), 2*time.Second) }, t0.Add(2 * time.Second)},
		{"sleep on a done context", func(c *testenv.Clock) { _ = c.Sleep(done, 2*time.Second) }, t0},
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

func TestClockSleepRecordsTheWaits(t *testing.T) {
	c := testenv.NewClock(time.Time{})
	if err := c.Sleep(context.Background(), time.Second); err != nil {
		t.Fatal(err)
	}
	if err := c.Sleep(context.Background(), 3*time.Second); err != nil {
		t.Fatal(err)
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Sleep(done, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep on a done context = %v, want context.Canceled", err)
	}
	if got, want := c.Sleeps(), []time.Duration{time.Second, 3 * time.Second}; !slices.Equal(got, want) {
		t.Fatalf("Sleeps() = %v, want %v", got, want)
	}
}
