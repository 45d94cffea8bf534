package testkafka

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/internal/kafka"
	"github.com/larkline/larkline/internal/testenv"
)

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
