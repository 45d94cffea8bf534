package lifecycle

import (
	"errors"
	"strings"
	"testing"
)

var errPartClosed = errors.New("part: closed")

func TestState(t *testing.T) {
	type step struct {
		op   string // begin, end, close
		want error  // for begin
		// first is the wanted answer of close.
		first bool
	}
	tests := []struct {
		name  string
		rule  Rule
		steps []step
	}{
		{"once: second Run refused, even after the first returned", Once, []step{
			{op: "begin"}, {op: "begin", want: ErrAlreadyRunning}, {op: "end"}, {op: "begin", want: ErrAlreadyRunning},
			{op: "close", first: true}, {op: "begin", want: errPartClosed}, {op: "close", first: false},
		}},
		{"one at a time: again after the previous returned", OneAtATime, []step{
			{op: "begin"}, {op: "begin", want: ErrAlreadyRunning}, {op: "end"}, {op: "begin"}, {op: "end"},
			{op: "close", first: true}, {op: "begin", want: errPartClosed},
		}},
		{"closed before any Run", Once, []step{
			{op: "close", first: true}, {op: "begin", want: errPartClosed}, {op: "close"},
		}},
		{"closed while running: Run refused, running kept until End", OneAtATime, []step{
			{op: "begin"}, {op: "close", first: true}, {op: "begin", want: errPartClosed}, {op: "end"}, {op: "begin", want: errPartClosed},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New("part", tt.rule, errPartClosed)
			for i, st := range tt.steps {
				switch st.op {
				case "begin":
					err := s.Begin()
					if !errors.Is(err, st.want) || (st.want == nil) != (err == nil) {
						t.Fatalf("step %d: Begin() = %v, want %v", i, err, st.want)
					}
					if errors.Is(err, ErrAlreadyRunning) && !strings.HasPrefix(err.Error(), "part: ") {
						t.Errorf("step %d: error %q does not name the part", i, err)
					}
				case "end":
					s.End()
				case "close":
					if got := s.Close(); got != st.first {
						t.Fatalf("step %d: Close() = %v, want %v", i, got, st.first)
					}
				}
			}
		})
	}
}

func TestNewWithoutAClosedError(t *testing.T) {
	s := New("part", Once, nil)
	s.Close()
	if err := s.Begin(); err == nil || err.Error() != "part: closed" {
		t.Fatalf("Begin after Close = %v", err)
	}
}
