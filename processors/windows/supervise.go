package windows

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/internal/kafka"
	"github.com/larkline/larkline/schemas"
)

// Outages (docs/decisions.md D27). While the broker or the schema registry cannot be
// reached the processor waits and reports not ready, then resumes by itself: Run keeps
// a loop around the Goka processor, which stops for good on such errors (a Goka
// processor runs once). A run that ends with an error classified retryable is
// followed, after a capped exponential backoff, by a new Goka processor over the same
// group, storage and topics; any other error ends Run at once (the supervisor sees a
// real fault instead of a crash loop hiding it).
//
// A restart in the process is a restart of the processor, and no more: the new Goka
// processor recovers its table from local storage and the table topic, reads the
// input from the group's committed offsets (a commit never passed a failed produce:
// the halting producer of internal/kafka), and gets a new producer, not halted. What
// the SIGKILL test shows for a process restart holds for it.

// Restart reasons, the values of larkline_windows_processor_restarts_total{reason}.
const (
	// RestartBroker: the broker could not be reached (connections refused or reset,
	// sarama out of brokers, timeouts, retriable Kafka codes, a produce that failed
	// so).
	RestartBroker = "broker"
	// RestartCoordinator: the group coordinator moved, is loading or rebalancing, or
	// the member lost its generation.
	RestartCoordinator = "coordinator"
	// RestartRegistry: the schema registry could not be reached or answered 408, 429
	// or 5xx while an input record was decoded (schemas.IsRetryable).
	RestartRegistry = "registry"
)

// Restart backoff: the first restart waits restartBackoffMin, each following one
// twice as long up to restartBackoffMax (with up to a fifth of jitter); a run that
// lasted restartStable starts the sequence again.
const (
	restartBackoffMin = time.Second
	restartBackoffMax = 30 * time.Second
	restartStable     = time.Minute
)

// probeTimeout bounds the broker probe that classifies an error no rule knows.
const probeTimeout = 5 * time.Second

// Run consumes until ctx ends or Close is called, closing due windows every ScanInterval and earlier when
// a window becomes due or Wakeup is called. It returns nil after the Goka processor
// has drained and committed. Outages (restartReason) do not end it: it waits, with
// Ready reporting why, and runs a new Goka processor. Any other failure is returned.
func (p *Processor) Run(ctx context.Context) error {
	ctx, end, err := p.life.Begin(ctx)
	if err != nil {
		return err
	}
	defer end()
	var cl *kgo.Client
	if !p.opts.inlineEmit {
		// admin requests only: the producer and group options are the publisher's
		cl, err = kgo.NewClient(kafka.ConnectionOpts(p.opts.Client)...)
		if err != nil {
			return fmt.Errorf("windows: input barrier client: %w", err)
		}
		defer cl.Close()
	}
	wait := p.restartMin
	for attempt := 1; ; attempt++ {
		began := time.Now()
		err := p.runOnce(ctx, cl)
		if err == nil || ctx.Err() != nil {
			p.waiting.Store(nil)
			return err
		}
		reason := restartReason(err)
		if reason == "" && cl != nil && p.brokerDown(ctx, cl) {
			// Goka flattens some causes to text (a partition's setup failure, %v): an
			// error no rule knows, met while the broker does not answer, is an outage.
			reason = RestartBroker
		}
		if reason == "" {
			p.waiting.Store(nil)
			return err
		}
		if time.Since(began) >= restartStable {
			wait, attempt = p.restartMin, 1
		}
		d := jitter(wait)
		// the cause is in the log line below; readiness names the reason only
		why := fmt.Errorf("windows: waiting to restart the processor after a %s outage (attempt %d, in %s)",
			reason, attempt, d.Round(time.Millisecond))
		p.waiting.Store(&why)
		p.m.restarts.WithLabelValues(reason).Inc()
		p.log.Warn("window processor stopped by an outage; waiting to restart it",
			"reason", reason, "attempt", attempt, "retry_in", d.Round(time.Millisecond), "err", err)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			p.waiting.Store(nil)
			return nil
		case <-t.C:
		}
		wait = min(2*wait, p.restartMax)
	}
}

// Ready reports nil while the processor runs with its state recovered, and otherwise
// why not: waiting to restart after an outage (the error names the reason and the
// attempt), or recovering the state table.
func (p *Processor) Ready() error {
	if w := p.waiting.Load(); w != nil {
		return *w
	}
	if !p.proc.Load().Recovered() {
		return errors.New("windows: window state table recovering")
	}
	return nil
}

func jitter(d time.Duration) time.Duration {
	return d + rand.N(d/5+1)
}

// brokerDown reports whether the broker fails to answer a metadata request now.
func (p *Processor) brokerDown(ctx context.Context, cl *kgo.Client) bool {
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	return cl.Ping(pctx) != nil && ctx.Err() == nil
}

// restartReason classifies an error that ended a run: the restart reason of an
// outage, or "" for an error that ends Run. An error naming a permanent fault of this
// package (a changed geometry, unknown state, invalid options) is never an outage,
// whatever else it wraps; otherwise the first outage cause found in the error tree
// names the reason, the registry's before the coordinator's before the broker's.
func restartReason(err error) string {
	if err == nil || errors.Is(err, context.Canceled) {
		return ""
	}
	for _, permanent := range []error{ErrGeometryChanged, ErrStateFormat, ErrInvalidOptions, ErrKeyMismatch,
		kafka.ErrTopicMismatch, kafka.ErrInvalidOptions, schemas.ErrSchemaRejected} {
		if errors.Is(err, permanent) {
			return ""
		}
	}
	switch {
	case anyCause(err, schemas.IsRetryable):
		return RestartRegistry
	case anyCause(err, coordinatorErr):
		return RestartCoordinator
	case anyCause(err, brokerErr):
		return RestartBroker
	}
	return ""
}

// anyCause reports whether is holds for err or for an error it wraps, following
// every branch of joined errors (Goka's multierrors, the halting producer's
// "halted (first failure: ...)").
func anyCause(err error, is func(error) bool) bool {
	for err != nil {
		if is(err) {
			return true
		}
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if anyCause(e, is) {
					return true
				}
			}
			return false
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		default:
			return false
		}
	}
	return false
}

// coordinatorErr: the group coordinator is away, moving or loading, or the member's
// generation is gone; rejoining (a new run) is the remedy.
func coordinatorErr(err error) bool {
	for _, k := range []error{kerr.NotCoordinator, kerr.CoordinatorNotAvailable, kerr.CoordinatorLoadInProgress,
		kerr.RebalanceInProgress, kerr.IllegalGeneration, kerr.UnknownMemberID,
		sarama.ErrNotCoordinatorForConsumer, sarama.ErrConsumerCoordinatorNotAvailable, sarama.ErrOffsetsLoadInProgress,
		sarama.ErrRebalanceInProgress, sarama.ErrIllegalGeneration, sarama.ErrUnknownMemberId} {
		if errors.Is(err, k) {
			return true
		}
	}
	return false
}

// brokerErr: a Kafka error kafka.IsRetryable calls retryable, judged at a leaf (it
// calls a joined error retryable only when every branch is).
func brokerErr(err error) bool {
	if _, joined := err.(interface{ Unwrap() []error }); joined {
		return false
	}
	return kafka.IsRetryable(err)
}
