package backoff

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestJitter(t *testing.T) {
	tests := []struct {
		name string
		d    time.Duration
	}{
		{name: "zero", d: 0},
		{name: "one", d: 1},
		{name: "two", d: 2},
		{name: "odd", d: 7},
		{name: "a second", d: time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			low, high := tt.d/2, tt.d
			if tt.d <= 1 {
				low = tt.d
			}
			for range 200 {
				if got := Jitter(tt.d); got < low || got > high {
					t.Fatalf("Jitter(%v) = %v, outside [%v, %v]", tt.d, got, low, high)
				}
			}
		})
	}
}

func TestSleep(t *testing.T) {
	done, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		d    time.Duration
		want error
	}{
		{name: "elapses", ctx: context.Background(), d: time.Millisecond, want: nil},
		{name: "no wait", ctx: context.Background(), d: 0, want: nil},
		{name: "negative", ctx: context.Background(), d: -time.Second, want: nil},
		{name: "ended context wins over a long wait", ctx: done, d: time.Hour, want: context.Canceled},
		{name: "ended context and no wait", ctx: done, d: 0, want: context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := Sleep(tt.ctx, tt.d); !errors.Is(err, tt.want) {
				t.Fatalf("Sleep(%v) = %v, want %v", tt.d, err, tt.want)
			}
		})
	}
}
