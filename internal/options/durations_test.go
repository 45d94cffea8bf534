package options

import (
	"testing"
	"time"
)

func TestDurations(t *testing.T) {
	tests := []struct {
		name    string
		a, b    time.Duration
		wantA   time.Duration
		wantB   time.Duration
		wantErr string
	}{
		{name: "zero takes the default", wantA: time.Second, wantB: time.Minute},
		{name: "set values are kept", a: 3 * time.Second, b: 2 * time.Hour, wantA: 3 * time.Second, wantB: 2 * time.Hour},
		{name: "negative is an error naming the option", a: 0, b: -time.Second, wantA: time.Second, wantB: -time.Second, wantErr: "B -1s is negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := tt.a, tt.b
			err := Durations(Duration{"A", &a, time.Second}, Duration{"B", &b, time.Minute})
			if got := errText(err); got != tt.wantErr {
				t.Fatalf("error %q, want %q", got, tt.wantErr)
			}
			if a != tt.wantA || b != tt.wantB {
				t.Fatalf("A=%s B=%s, want %s %s", a, b, tt.wantA, tt.wantB)
			}
		})
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
