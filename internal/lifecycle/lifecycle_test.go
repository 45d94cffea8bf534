package lifecycle

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

var errPartClosed = errors.New("part: closed")

func TestStateRules(t *testing.T) {
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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New("part", tt.rule, errPartClosed)
			var ends []func()
			for i, st := range tt.steps {
				switch st.op {
				case "begin":
					_, end, err := s.Begin(context.Background())
					if !errors.Is(err, st.want) || (st.want == nil) != (err == nil) {
						t.Fatalf("step %d: Begin() = %v, want %v", i, err, st.want)
					}
					if errors.Is(err, ErrAlreadyRunning) && !strings.HasPrefix(err.Error(), "part: ") {
						t.Errorf("step %d: error %q does not name the part", i, err)
					}
					if err == nil {
						ends = append(ends, end)
					}
				case "end":
					ends[len(ends)-1]()
					if s.Running() {
						t.Fatalf("step %d: Running after end", i)
					}
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
	if _, _, err := s.Begin(context.Background()); err == nil || err.Error() != "part: closed" {
		t.Fatalf("Begin after Close = %v", err)
	}
}

// TestCloseEndsAndWaits: Close ends the context of Run and of entered calls, and
// returns only after each has ended; Enter after Close is refused.
func TestCloseEndsAndWaits(t *testing.T) {
	s := New("part", Once, errPartClosed)
	runCtx, endRun, err := s.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	callCtx, leave, err := s.Enter(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	var mu sync.Mutex
	note := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); <-runCtx.Done(); note("run ended"); endRun() }()
	go func() { defer wg.Done(); <-callCtx.Done(); note("call ended"); leave() }()
	if runCtx.Err() != nil || callCtx.Err() != nil {
		t.Fatal("contexts ended before Close")
	}
	if !s.Close() {
		t.Fatal("first Close reported not first")
	}
	note("close returned")
	wg.Wait()
	if len(order) != 3 || order[2] != "close returned" {
		t.Fatalf("order = %v, want both ends before Close returned", order)
	}
	if _, _, err := s.Enter(context.Background()); !errors.Is(err, errPartClosed) {
		t.Fatalf("Enter after Close = %v", err)
	}
	if s.Running() || !s.Closed() {
		t.Fatalf("Running=%v Closed=%v after Close", s.Running(), s.Closed())
	}
}

// TestParentContextEndsRun: the context Begin returns ends with its parent, and end
// (called twice) releases the part so a later Close does not wait.
func TestParentContextEndsRun(t *testing.T) {
	s := New("part", OneAtATime, errPartClosed)
	parent, cancel := context.WithCancel(context.Background())
	ctx, end, err := s.Begin(parent)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	<-ctx.Done()
	end()
	end()
	closed := make(chan bool)
	go func() { closed <- s.Close() }()
	select {
	case first := <-closed:
		if !first {
			t.Fatal("Close not first")
		}
	case <-time.After(10 * time.Second): // a deadline for a hang, not a wait
		t.Fatal("Close waited for a Run that had ended")
	}
}

// TestConcurrentBeginClose: under -race, Begin, Enter and Close from many goroutines
// never leave Close waiting on a call it did not see, nor admit one after it.
func TestConcurrentBeginClose(t *testing.T) {
	for range 50 {
		s := New("part", OneAtATime, errPartClosed)
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, end, err := s.Enter(context.Background())
				if err != nil {
					return
				}
				<-ctx.Done()
				end()
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, end, err := s.Begin(context.Background())
			if err != nil {
				return
			}
			<-ctx.Done()
			end()
		}()
		s.Close()
		wg.Wait()
		if _, _, err := s.Begin(context.Background()); !errors.Is(err, errPartClosed) {
			t.Fatalf("Begin after Close = %v", err)
		}
	}
}
