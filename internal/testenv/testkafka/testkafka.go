package testkafka

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/internal/kafka"
	"github.com/larkline/larkline/internal/testenv"
)

// ProduceWithin bounds Produce: records not acknowledged by then fail the test.
// The production client retries a produce for as long as its context lives, so a
// test whose broker is gone would otherwise hang until the binary's timeout.
const ProduceWithin = 2 * time.Minute

// Client returns a client built from o with the production settings, on testenv's
// broker when o names none, closed when the test ends. Invalid options end the
// test.
func Client(t testing.TB, o kafka.Options) *kgo.Client {
	t.Helper()
	if len(o.Brokers) == 0 {
		o.Brokers = testenv.KafkaBrokers(t)
	}
	opts, err := kafka.NewClientOptions(o)
	if err != nil {
		t.Fatalf("testkafka: client options: %v", err)
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatalf("testkafka: new client: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// Produce writes rs with cl and waits for their acknowledgement: the results, with
// offsets, in the order of rs. A record that fails, or is not acknowledged within
// ProduceWithin, ends the test.
func Produce(t testing.TB, cl *kgo.Client, rs ...*kgo.Record) kgo.ProduceResults {
	t.Helper()
	res, err := produce(t.Context(), cl, ProduceWithin, rs)
	if err != nil {
		t.Fatalf("testkafka: %v", err)
	}
	return res
}

func produce(ctx context.Context, cl *kgo.Client, within time.Duration, rs []*kgo.Record) (kgo.ProduceResults, error) {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	res := cl.ProduceSync(ctx, rs...)
	for _, r := range res {
		if r.Err != nil {
			return res, fmt.Errorf("produce %d records (topic %s) within %s: %w", len(rs), r.Record.Topic, within, r.Err)
		}
	}
	return res, nil
}
