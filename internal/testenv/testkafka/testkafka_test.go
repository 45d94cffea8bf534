package testkafka

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/internal/freeport"
	"github.com/larkline/larkline/internal/kafka"
	"github.com/larkline/larkline/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestProduceReturnsOffsets produces to the test broker and reads the records back
// at the offsets Produce returned.
func TestProduceReturnsOffsets(t *testing.T) {
	topic := testenv.NewTopic(t, 1, nil)
	cl := Client(t, kafka.Options{ClientID: "testkafka-test"})
	res := Produce(t, cl,
		&kgo.Record{Topic: topic, Key: []byte("a"), Value: []byte("1")},
		&kgo.Record{Topic: topic, Key: []byte("b"), Value: []byte("2")})
	if len(res) != 2 || res[0].Record.Offset != 0 || res[1].Record.Offset != 1 {
		t.Fatalf("results %+v, want offsets 0 and 1", res)
	}
	got := testenv.ReadFirst(t, topic, 2)
	if string(got[1].Key) != "b" || string(got[1].Value) != "2" {
		t.Fatalf("record at offset 1 is %q=%q, want b=2", got[1].Key, got[1].Value)
	}
}

// TestProduceFailsWhenTheBrokerIsGone points a client at a port nothing listens on:
// the produce returns the deadline's error, naming the topic, instead of retrying
// for ever.
func TestProduceFailsWhenTheBrokerIsGone(t *testing.T) {
	p, err := freeport.Reserve() // reserved: no other test binds it meanwhile
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Release() })
	cl := Client(t, kafka.Options{Brokers: []string{p.Addr()}, ClientID: "testkafka-closed"})

	_, err = produce(t.Context(), cl, 2*time.Second, []*kgo.Record{{Topic: "no-broker", Value: []byte("x")}})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("produce to a closed port: %v, want context.DeadlineExceeded", err)
	}
	if !strings.Contains(err.Error(), "topic no-broker") {
		t.Errorf("error %q does not name the topic", err)
	}
}
