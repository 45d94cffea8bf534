package conformance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/internal/kafka"
	"github.com/larkline/larkline/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// flaw is a bug the reference stage can be given, one the suite must catch.
type flaw string

const (
	// noFlaw: the reference stage is correct.
	noFlaw flaw = ""
	// flawDuplicates inserts a second row when the version it holds is delivered
	// again: not idempotent.
	flawDuplicates flaw = "duplicates"
	// flawFirstVersion keeps the first version of an entity and ignores the later
	// ones.
	flawFirstVersion flaw = "first_version"
	// flawForgets keeps its table in the instance: a restarted stage has lost what
	// the stopped one applied (and committed).
	flawForgets flaw = "forgets"
)

// refStage is a minimal Kafka-facing stage over the real broker: a franz-go group
// member (larkline's client options, manual commits) that applies "e<entity>.v<version>"
// records to an in-memory table keyed by entity and commits each poll after
// applying it. Correct unless given a flaw.
type refStage struct{ flaw flaw }

func (s refStage) Versions() int { return 3 }

func (s refStage) Deploy(t *testing.T) Deployment {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return &refDeployment{
		t:     t,
		flaw:  s.flaw,
		topic: testenv.NewTopic(t, 3, nil),
		group: "larkline-conformance-ref-" + hex.EncodeToString(b[:]),
		table: &table{rows: map[int][]int{}},
	}
}

type refDeployment struct {
	t     *testing.T
	flaw  flaw
	topic string
	group string

	mu    sync.Mutex
	table *table // the current instance's table under flawForgets
}

// table is the stage's effect: entity → the versions of its rows.
type table struct {
	mu   sync.Mutex
	rows map[int][]int
}

func (d *refDeployment) Wiring() Wiring { return Wiring{Input: d.topic, Group: d.group} }

// Message keys entity e as "ref/k<e mod 5>/e<e>": the partitioner hashes "ref/k<n>",
// so five keys share the entities, like the messages of five chats.
func (d *refDeployment) Message(_ *testing.T, r Record) Message {
	return Message{Key: fmt.Sprintf("ref/k%d/e%d", r.Entity%5, r.Entity), Value: []byte(r.String())}
}

func (d *refDeployment) current() *table {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.table
}

func (d *refDeployment) Observe(*testing.T) Observation {
	tb := d.current()
	tb.mu.Lock()
	defer tb.mu.Unlock()
	var o Observation
	for e, versions := range tb.rows {
		for _, v := range versions {
			o = append(o, fmt.Sprintf("row entity=%d version=%d", e, v))
		}
	}
	return o
}

func (d *refDeployment) Expect(records []Record) Observation {
	var o Observation
	for _, r := range Latest(records) {
		o = append(o, fmt.Sprintf("row entity=%d version=%d", r.Entity, r.Version))
	}
	return o
}

func (d *refDeployment) Start(t *testing.T) (stop func()) {
	t.Helper()
	if d.flaw == flawForgets {
		d.mu.Lock()
		d.table = &table{rows: map[int][]int{}}
		d.mu.Unlock()
	}
	opts, err := kafka.NewClientOptions(kafka.Options{
		Brokers:  testenv.KafkaBrokers(t),
		ClientID: "larkline-conformance-ref",
		Consumer: kafka.ConsumerOptions{FetchMaxWait: 100 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	gopts, err := kafka.GroupConsumerOptions(kafka.GroupConsumer{Group: d.group, Topics: []string{d.topic}})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(append(opts, gopts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.consume(ctx, cl, d.current()) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("reference stage: %v", err)
			}
			cl.Close() // leaves the group
		})
	}
	t.Cleanup(stop)
	return stop
}

// consume applies polls until ctx ends, committing each poll after applying it.
func (d *refDeployment) consume(ctx context.Context, cl *kgo.Client, tb *table) error {
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil || fs.IsClientClosed() {
			return nil
		}
		var errs []error
		fs.EachError(func(topic string, p int32, err error) {
			errs = append(errs, fmt.Errorf("fetching %s/%d: %w", topic, p, err))
		})
		if len(errs) > 0 {
			return errors.Join(errs...)
		}
		recs := fs.Records()
		for _, r := range recs {
			var rec Record
			if _, err := fmt.Sscanf(string(r.Value), "e%d.v%d", &rec.Entity, &rec.Version); err != nil {
				return fmt.Errorf("record %s/%d@%d: %w", r.Topic, r.Partition, r.Offset, err)
			}
			tb.apply(rec, d.flaw)
		}
		if len(recs) > 0 {
			cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := cl.CommitRecords(cctx, recs...)
			cancel()
			if err != nil {
				return fmt.Errorf("committing: %w", err)
			}
		}
	}
}

func (tb *table) apply(r Record, f flaw) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	rows, seen := tb.rows[r.Entity]
	switch {
	case f == flawFirstVersion && seen:
	case f == flawDuplicates && seen && rows[len(rows)-1] == r.Version:
		tb.rows[r.Entity] = append(rows, r.Version)
	default:
		tb.rows[r.Entity] = []int{r.Version}
	}
}

// TestReferenceStagePasses: a correct stage passes every property.
func TestReferenceStagePasses(t *testing.T) {
	Run(t, refStage{})
}

// envFlaw tells TestFlawedStageHelper, run as a child process, which flaw to run.
const envFlaw = "LARKLINE_CONFORMANCE_FLAW"

// TestFlawedStageHelper is not a test on its own: TestSuiteCatchesFlawedStages runs
// it in a child process with envFlaw set, where it runs the suite on a flawed stage
// and must fail. Without envFlaw it does nothing.
func TestFlawedStageHelper(t *testing.T) {
	f := flaw(os.Getenv(envFlaw))
	if f == noFlaw {
		return
	}
	Run(t, refStage{flaw: f})
}

// TestSuiteCatchesFlawedStages: each bug fails the property that is about it, with
// the difference it makes. The suite runs in a child process (this test binary,
// adopting this process's broker) because a failing subtest cannot be contained in
// the parent.
func TestSuiteCatchesFlawedStages(t *testing.T) {
	tests := []struct {
		flaw     flaw
		property string
		want     []string // in the child's output
	}{
		{flaw: flawDuplicates, property: "redelivery", want: []string{
			"every record delivered twice in a row", "extra (", "row entity=0 version=1",
		}},
		{flaw: flawFirstVersion, property: "ordering_per_key", want: []string{
			"versions of each key produced in order", "missing (", "row entity=2 version=3", "row entity=2 version=1",
		}},
		{flaw: flawForgets, property: "restart", want: []string{
			"after two restarts", "missing (", "row entity=0 version=1",
		}},
	}
	brokers := strings.Join(testenv.KafkaBrokers(t), ",")
	for _, tt := range tests {
		t.Run(string(tt.flaw), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			run := "^TestFlawedStageHelper$/^" + tt.property + "$"
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run="+run, "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(),
				envFlaw+"="+string(tt.flaw),
				"LARKLINE_TEST_KAFKA_BROKERS="+brokers,
				"LARKLINE_TEST_KAFKA_KIND="+testenv.KafkaKind(),
			)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				t.Fatalf("the suite passed a stage with flaw %q (err %v):\n%s", tt.flaw, err, out)
			}
			text := string(out)
			if !strings.Contains(text, "--- FAIL: TestFlawedStageHelper/"+tt.property+" ") {
				t.Fatalf("property %s did not fail for flaw %q:\n%s", tt.property, tt.flaw, text)
			}
			for _, w := range tt.want {
				if !strings.Contains(text, w) {
					t.Errorf("the failure does not say %q:\n%s", w, text)
				}
			}
		})
	}
}
