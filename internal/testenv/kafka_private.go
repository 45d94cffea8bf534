package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/internal/testenv/provision"
)

// KafkaBroker is a broker of one test's own, which the test may stop and start
// again (same address, same topics and offsets): a broker outage.
type KafkaBroker struct {
	// Brokers is the bootstrap list of the broker.
	Brokers []string
	p       *provision.KafkaProcess
	adm     *kadm.Client
}

// NewKafkaBroker starts a broker for this test alone (a real KRaft broker run by
// deploy/kafka/kafka-jvm.sh, some ten seconds) and closes it at cleanup. It always
// runs the jvm kind, whatever the binary's shared broker is, since a test that stops
// the broker cannot share it.
func NewKafkaBroker(t testing.TB) *KafkaBroker {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	p, err := provision.StartKafkaProcess(ctx, options())
	if err != nil {
		t.Fatalf("testenv: starting a private kafka broker: %v", err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Brokers...), kgo.ClientID("larkline-testenv-private"),
		kgo.DialTimeout(5*time.Second))
	if err != nil {
		t.Fatalf("testenv: creating the private broker's admin client: %v", err)
	}
	t.Cleanup(func() {
		cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
		defer cancel()
		if err := p.Close(ctx); err != nil {
			t.Errorf("testenv: closing the private kafka broker: %v", err)
		}
	})
	return &KafkaBroker{Brokers: p.Brokers, p: p, adm: kadm.NewClient(cl)}
}

// NewTopic is testenv.NewTopic on this broker.
func (b *KafkaBroker) NewTopic(t testing.TB, partitions int32, configs map[string]*string) string {
	t.Helper()
	return newTopicOn(t, b.adm, partitions, configs)
}

// Stop stops the broker; its address refuses connections until Start.
func (b *KafkaBroker) Stop(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	if err := b.p.Stop(ctx); err != nil {
		t.Fatalf("testenv: stopping the private kafka broker: %v", err)
	}
}

// Start starts a stopped broker again and waits until it answers.
func (b *KafkaBroker) Start(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := b.p.Start(ctx); err != nil {
		t.Fatalf("testenv: starting the private kafka broker again: %v", err)
	}
}
