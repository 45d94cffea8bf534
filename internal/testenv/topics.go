package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// maxTopicTestName bounds the part of a topic name taken from the test name
// (Kafka allows 249 characters).
const maxTopicTestName = 100

var admin struct {
	mu  sync.Mutex
	cl  *kgo.Client
	adm *kadm.Client
}

// adminClient returns the binary's shared admin client, creating it on first use.
func adminClient(t testing.TB) *kadm.Client {
	t.Helper()
	brokers := KafkaBrokers(t)
	admin.mu.Lock()
	defer admin.mu.Unlock()
	if admin.adm == nil {
		cl, err := kgo.NewClient(
			kgo.SeedBrokers(brokers...),
			kgo.ClientID("larkline-testenv-admin"),
			kgo.DialTimeout(5*time.Second),
		)
		if err != nil {
			t.Fatalf("testenv: creating the kafka admin client: %v", err)
		}
		admin.cl, admin.adm = cl, kadm.NewClient(cl)
	}
	return admin.adm
}

func adminClose() {
	admin.mu.Lock()
	defer admin.mu.Unlock()
	if admin.cl != nil {
		admin.cl.Close()
		admin.cl, admin.adm = nil, nil
	}
}

// NewTopic creates a topic with a unique name derived from the test's name,
// the given partition count, the broker's default replication factor and the
// given topic configs (nil for none), waits until every partition has a
// leader, and deletes the topic when the test ends. It fails the test if the
// topic cannot be created.
func NewTopic(t testing.TB, partitions int32, configs map[string]*string) string {
	t.Helper()
	if partitions < 1 {
		t.Fatalf("testenv: NewTopic: partitions must be at least 1, got %d", partitions)
	}
	return newTopicOn(t, adminClient(t), partitions, configs)
}

// newTopicOn is NewTopic on the broker of adm.
func newTopicOn(t testing.TB, adm *kadm.Client, partitions int32, configs map[string]*string) string {
	t.Helper()
	name, err := topicName(t.Name())
	if err != nil {
		t.Fatalf("testenv: NewTopic: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, partitions, -1, configs, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("testenv: creating topic %s (%d partitions): %v", name, partitions, err)
	}
	t.Cleanup(func() {
		if err := deleteTopic(adm, name); err != nil {
			t.Errorf("testenv: %v", err)
		}
	})
	if err := waitForLeaders(ctx, adm, name, partitions); err != nil {
		t.Fatalf("testenv: topic %s: %v", name, err)
	}
	return name
}

func deleteTopic(adm *kadm.Client, name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	resp, err := adm.DeleteTopic(ctx, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.UnknownTopicOrPartition) {
		return fmt.Errorf("deleting topic %s: %w", name, err)
	}
	return nil
}

// waitForLeaders polls until the topic shows all its partitions with leaders that
// answer, so the first produce or offset request does not race the broker.
func waitForLeaders(ctx context.Context, adm *kadm.Client, name string, partitions int32) error {
	for {
		err := topicReady(ctx, adm, name, partitions)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("partitions without leaders after %s: %w", opTimeout, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func topicReady(ctx context.Context, adm *kadm.Client, name string, partitions int32) error {
	topics, err := adm.ListTopics(ctx, name)
	if err != nil {
		return err
	}
	td, ok := topics[name]
	switch {
	case !ok:
		return errors.New("not in metadata yet")
	case td.Err != nil:
		return td.Err
	case int32(len(td.Partitions)) != partitions:
		return fmt.Errorf("metadata shows %d of %d partitions", len(td.Partitions), partitions)
	}
	for _, p := range td.Partitions {
		if p.Err != nil {
			return fmt.Errorf("partition %d: %w", p.Partition, p.Err)
		}
		if p.Leader < 0 {
			return fmt.Errorf("partition %d has no leader", p.Partition)
		}
	}
	// Metadata names a leader before that broker acts as one (internal/kafka's
	// EnsureTopics waits the same way): the leaders must answer a ListOffsets.
	listed, err := adm.ListStartOffsets(ctx, name)
	if err == nil {
		err = listed.Error()
	}
	return err
}

// topicName is "lt-<test name>-<12 random hex>", where the test name keeps
// letters, digits and '-' (anything else becomes '-') and is cut to
// maxTopicTestName characters.
func topicName(testName string) (string, error) {
	var b strings.Builder
	dash := false
	for _, r := range testName {
		ok := r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
		switch {
		case ok:
			b.WriteRune(r)
			dash = false
		case !dash:
			b.WriteByte('-')
			dash = true
		}
		if b.Len() >= maxTopicTestName {
			break
		}
	}
	suffix, err := randomHex(6)
	if err != nil {
		return "", err
	}
	if base := strings.Trim(b.String(), "-"); base != "" {
		return "lt-" + base + "-" + suffix, nil
	}
	return "lt-" + suffix, nil
}

func randomHex(n int) (string, error) {
	buf := make([]byte, n)
	if _, err := rand.Read(buf); err != nil {
		return "", fmt.Errorf("generating a random name: %w", err)
	}
	return hex.EncodeToString(buf), nil
}
