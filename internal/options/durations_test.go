package options

import (
	"errors"
	"fmt"
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

func TestProblems(t *testing.T) {
	sentinel := errors.New("stage: invalid options")
	var p Problems
	if err := p.Err(sentinel); err != nil {
		t.Fatalf("no problems: Err = %v, want nil", err)
	}
	p.Add("PageSize", 60, "must be between 1 and %d", 50)
	p.Add("Window", 7*time.Minute, "must divide an hour evenly")
	err := fmt.Errorf("building stage: %w", p.Err(sentinel))
	if !errors.Is(err, sentinel) {
		t.Fatalf("%v does not match its sentinel", err)
	}
	want := "building stage: stage: invalid options: PageSize 60: must be between 1 and 50; Window 7m0s: must divide an hour evenly"
	if err.Error() != want {
		t.Fatalf("text %q\nwant %q", err.Error(), want)
	}
	got := ProblemsOf(err)
	if len(got) != 2 || got[0].Field != "PageSize" || got[0].Value != 60 || got[1].Field != "Window" {
		t.Fatalf("ProblemsOf = %+v", got)
	}
	if ProblemsOf(errors.New("broker down")) != nil {
		t.Fatal("an error without problems reported some")
	}
}

// A configuration's problem names its key, the value as given and where it came
// from; the parts it lacks are left out.
func TestProblemKeyed(t *testing.T) {
	for _, tc := range []struct {
		p    Problem
		want string
	}{
		{Problem{Field: "log.level", Value: `"loud"`, Source: "f.yaml:3", Message: "must be info"}, `log.level = "loud" (f.yaml:3): must be info`},
		{Problem{Field: "kafka.brokers", Value: "", Source: "default", Message: "must be set"}, `kafka.brokers (default): must be set`},
		{Problem{Field: "LARKLINE_X", Source: "environment", Message: "names no key"}, `LARKLINE_X (environment): names no key`},
		{Problem{Field: "windows", Message: "no brokers"}, `windows: no brokers`},
	} {
		if got := tc.p.Keyed(); got != tc.want {
			t.Errorf("Keyed = %q, want %q", got, tc.want)
		}
	}
}
