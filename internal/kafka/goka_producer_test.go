package kafka

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/IBM/sarama"
	"github.com/lovoo/goka"
)

// fakeGokaProducer hands out promises the test finishes by hand.
type fakeGokaProducer struct {
	mu       sync.Mutex
	finishes []goka.PromiseFinisher
}

func (f *fakeGokaProducer) Emit(topic, key string, value []byte) *goka.Promise {
	return f.EmitWithHeaders(topic, key, value, nil)
}

func (f *fakeGokaProducer) EmitWithHeaders(string, string, []byte, goka.Headers) *goka.Promise {
	p, finish := goka.NewPromiseWithFinisher()
	f.mu.Lock()
	f.finishes = append(f.finishes, finish)
	f.mu.Unlock()
	return p
}

func (f *fakeGokaProducer) Close() error { return nil }

func TestHaltingProducer(t *testing.T) {
	broker := errors.New("produce failed")
	for _, tc := range []struct {
		name string
		// results by emit index, applied in the order listed (index, failed)
		order []struct {
			i    int
			fail bool
		}
		want []string // the result each emit resolves with, by index
	}{
		{"acked in order", []struct {
			i    int
			fail bool
		}{{0, false}, {1, false}, {2, false}}, []string{"ok", "ok", "ok"}},
		{"acked out of order resolve in emit order", []struct {
			i    int
			fail bool
		}{{2, false}, {1, false}, {0, false}}, []string{"ok", "ok", "ok"}},
		{"one failed produce followed by acked ones halts", []struct {
			i    int
			fail bool
		}{{0, false}, {1, true}, {2, false}, {3, false}}, []string{"ok", "failed", "halted", "halted"}},
		{"a later ack before the earlier failure is held, then halted", []struct {
			i    int
			fail bool
		}{{2, false}, {3, false}, {1, true}, {0, false}}, []string{"ok", "failed", "halted", "halted"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inner := &fakeGokaProducer{}
			h := newHaltingProducer(inner)
			n := len(tc.want)
			var mu sync.Mutex
			var resolved []int
			got := make([]string, n)
			for i := range n {
				h.Emit("topic", fmt.Sprint(i), nil).Then(func(err error) {
					mu.Lock()
					defer mu.Unlock()
					resolved = append(resolved, i)
					switch {
					case errors.Is(err, ErrProducerHalted):
						got[i] = "halted"
					case errors.Is(err, broker):
						got[i] = "failed"
					case err != nil:
						got[i] = err.Error()
					default:
						got[i] = "ok"
					}
				})
			}
			for _, r := range tc.order {
				var err error
				if r.fail {
					err = broker
				}
				inner.finishes[r.i](&sarama.ProducerMessage{}, err)
			}
			mu.Lock()
			defer mu.Unlock()
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("results %v, want %v", got, tc.want)
			}
			for k, i := range resolved {
				if k != i {
					t.Fatalf("resolved in order %v, want emit order", resolved)
				}
			}
		})
	}
}
