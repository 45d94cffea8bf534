package testenv_test

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/larkline/larkline/internal/testenv"
)

// fatalRecorder is a testing.TB whose Fatalf records the message and ends the
// goroutine, as the real one does.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Helper() {}

func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// failure runs wait on a fatalRecorder and returns what it failed with ("" when
// it returned).
func failure(wait func(testing.TB)) string {
	f := &fatalRecorder{}
	done := make(chan struct{})
	go func() { defer close(done); wait(f) }()
	<-done
	return f.msg
}

func TestEventually(t *testing.T) {
	const within = 20 * time.Millisecond
	for _, tt := range []struct {
		name string
		wait func(testing.TB)
		want string // prefix of the failure; "" for none
	}{
		{"holds on the third poll", func(tb testing.TB) {
			n := 0
			testenv.Eventually(tb, time.Minute, "three polls", func() bool { n++; return n == 3 })
		}, ""},
		{"never holds", func(tb testing.TB) {
			testenv.Eventually(tb, within, "the impossible", func() bool { return false })
		}, "timed out after 20ms waiting for the impossible"},
		{"nil on the third poll", func(tb testing.TB) {
			n := 0
			testenv.EventuallyNil(tb, time.Minute, "three polls", func() error {
				if n++; n < 3 {
					return errors.New("not yet")
				}
				return nil
			})
		}, ""},
		{"never nil says the last state", func(tb testing.TB) {
			n := 0
			testenv.EventuallyNil(tb, within, "the group", func() error { n++; return fmt.Errorf("poll %d: lag 7", n) })
		}, "timed out after 20ms waiting for the group: poll "},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := failure(tt.wait)
			if tt.want == "" && got != "" || !strings.HasPrefix(got, tt.want) {
				t.Fatalf("failed with %q, want %q", got, tt.want)
			}
			if strings.Contains(got, "condition false") {
				t.Fatalf("Eventually leaks its internal error: %q", got)
			}
		})
	}
}
