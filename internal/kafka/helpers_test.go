package kafka

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// brokersForTest returns the real broker of this test binary (testenv fails the test
// when none can be had; it never skips).
func brokersForTest(t testing.TB) []string {
	t.Helper()
	return testenv.KafkaBrokers(t)
}

// newTestTopic creates a unique topic deleted at cleanup.
func newTestTopic(t testing.TB, partitions int32, configs map[string]*string) string {
	t.Helper()
	return testenv.NewTopic(t, partitions, configs)
}

// uniqueName returns prefix-<16 random hex digits>, for groups and for topics that
// the code under test creates itself.
func uniqueName(t testing.TB, prefix string) string {
	t.Helper()
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return prefix + "-" + hex.EncodeToString(b[:])
}

// adminForTest returns an admin client on the test broker, closed at cleanup.
func adminForTest(t testing.TB) (*kgo.Client, *kadm.Client) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokersForTest(t)...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl, kadm.NewClient(cl)
}

// deleteTopicsAtCleanup deletes topics that the code under test created, when the
// test ends (topics that do not exist are fine).
func deleteTopicsAtCleanup(t testing.TB, adm *kadm.Client, topics ...string) {
	t.Helper()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := adm.DeleteTopics(ctx, topics...); err != nil {
			t.Logf("deleting topics %v: %v", topics, err)
		}
	})
}
