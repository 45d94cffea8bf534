package windows

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"

	"github.com/IBM/sarama"
	"github.com/lovoo/goka"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/larkline/larkline/internal/kafka"
	"github.com/larkline/larkline/schemas"
)

// TestRestartReason: the errors Goka v1.1.14 and the callbacks end a run with, as
// they are wrapped (see the D-entry), classified into a restart reason or "" (Run
// returns the error).
func TestRestartReason(t *testing.T) {
	t.Parallel()
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	// as Goka's Run returns a lost broker: a multierror of the rebalance loop's errors
	gokaLost := fmt.Errorf("windows: processor g: %w", errors.Join(
		fmt.Errorf("Error closing consumer group: %w", sarama.ErrOutOfBrokers),
		fmt.Errorf("error consuming from group consumer: %w", sarama.ErrOutOfBrokers)))
	halted := func(first error) error {
		return fmt.Errorf("asynchronous error from callback: %w",
			fmt.Errorf("%w (first failure: %w)", kafka.ErrProducerHalted, first))
	}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"shutdown", fmt.Errorf("run: %w", context.Canceled), ""},
		{"goka lost the broker", gokaLost, RestartBroker},
		{"goka processor not built, broker away", fmt.Errorf("windows: creating goka processor g: Error creating topic manager: %w", sarama.ErrOutOfBrokers), RestartBroker},
		{"connection refused", fmt.Errorf("dial: %w", refused), RestartBroker},
		{"geometry check timed out", fmt.Errorf("windows: reading the geometry topic t: %w", context.DeadlineExceeded), RestartBroker},
		{"halted producer, broker away", halted(sarama.ErrOutOfBrokers), RestartBroker},
		{"halted producer, record too large", halted(sarama.ErrMessageSizeTooLarge), ""},
		{"halted producer, not authorized", halted(kerr.TopicAuthorizationFailed), ""},
		{"coordinator moved (sarama)", fmt.Errorf("consume: %w", sarama.ErrNotCoordinatorForConsumer), RestartCoordinator},
		{"generation gone (franz-go)", fmt.Errorf("commit: %w", kerr.IllegalGeneration), RestartCoordinator},
		{"registry unreachable", fmt.Errorf("windows: decoding e/0@1: %w", &schemas.RegistryError{Op: "get schema 7", Err: refused}), RestartRegistry},
		{"registry 503", &schemas.RegistryError{Op: "get schema 7", StatusCode: 503}, RestartRegistry},
		{"registry 401", &schemas.RegistryError{Op: "get schema 7", StatusCode: 401}, ""},
		{"geometry changed", fmt.Errorf("start: %w", ErrGeometryChanged), ""},
		{"geometry changed while the broker flaps", errors.Join(ErrGeometryChanged, sarama.ErrOutOfBrokers), ""},
		{"unknown state", fmt.Errorf("windows: processor g: %w (goka: %w)", ErrStateFormat, sarama.ErrOutOfBrokers), ""},
		{"topic mismatch", fmt.Errorf("checking: %w", kafka.ErrTopicMismatch), ""},
		{"unknown", errors.New("something else"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := restartReason(tc.err); got != tc.want {
				t.Fatalf("restartReason(%v) = %q, want %q", tc.err, got, tc.want)
			}
		})
	}
}

// failReturns is a callback context whose Fail returns, as Goka's does once the
// partition's context is done (v1.1.14 partition_processor.go, syncFailer: "only fail
// processor if context not already Done", else it records the error and returns).
type failReturns struct {
	gokaContext   // nil: a method the callback should not call panics
	topic         string
	failed, emits int
}

type gokaContext = goka.Context

func (c *failReturns) Topic() goka.Stream { return goka.Stream(c.topic) }
func (c *failReturns) Key() string        { return "ws-1/oc_chat1/om_bad" }
func (c *failReturns) Partition() int32   { return 0 }
func (c *failReturns) Offset() int64      { return 7 }
func (c *failReturns) Fail(error)         { c.failed++ }
func (c *failReturns) Loopback(string, any, ...goka.ContextOption) {
	c.emits++
}

// TestFailNeverReturns: a callback that fails must not return normally even when
// Goka's Fail does (a partition shutting down because another failed first, which an
// outage makes likely): Goka would mark the record's offset and commit it at the
// session's end, and the restart would skip it. Seen on the real broker: a registry
// outage lost three of a window's four records this way.
func TestFailNeverReturns(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.dead.err = errors.New("broker down") // the record cannot be parked: the callback fails
	ctx := &failReturns{topic: h.evTopic}
	returned := func() (ok bool) {
		defer func() { _ = recover() }()
		h.p.onEvidence(ctx, []byte("not avro"))
		return true
	}()
	if returned || ctx.failed != 1 || ctx.emits != 0 {
		t.Fatalf("callback returned=%v after %d Fail calls and %d produces; want it to unwind after one Fail, before any produce",
			returned, ctx.failed, ctx.emits)
	}
	h.failureExpected.Store(true)
}
