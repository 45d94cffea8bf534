package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/schemas"
)

// kafkaClient is a plain client on the pipeline's brokers, closed at cleanup.
func (p *pipeline) kafkaClient(opts ...kgo.Opt) *kgo.Client {
	p.t.Helper()
	base := []kgo.Opt{kgo.SeedBrokers(p.brokers...), kgo.ClientID(p.prefix + "-test")}
	if p.kafkaOpts != nil {
		base = append(append([]kgo.Opt{}, p.kafkaOpts...), kgo.ClientID(p.prefix+"-test"))
	}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(cl.Close)
	return cl
}

func (p *pipeline) topic(name string) string { return p.prefix + "." + name }

// group is a consumer group of the deployment (sink, synthesis, workspaces, windows-v1).
func (p *pipeline) group(role string) string { return p.prefix + "-" + role }

// waitCaughtUp waits until group has committed the end of every partition of topic.
func (p *pipeline) waitCaughtUp(ctx context.Context, group, topic string, deadline time.Duration) {
	p.t.Helper()
	adm := kadm.NewClient(p.kafkaClient())
	ctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	var last string
	for {
		lags, err := adm.Lag(ctx, group)
		if err == nil {
			if l, ok := lags[group]; ok && l.Error() == nil {
				var total, ends int64
				seen := 0
				for _, pl := range l.Lag[topic] {
					seen++
					ends += pl.End.Offset
					total += pl.Lag
				}
				last = fmt.Sprintf("%d partitions, lag %d, end %d", seen, total, ends)
				if seen > 0 && total == 0 && ends > 0 {
					return
				}
			}
		}
		select {
		case <-ctx.Done():
			p.t.Fatalf("group %s not caught up on %s after %s: %s (err %v)", group, topic, deadline, last, err)
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// evidenceLag describes how far the sink and the window processor are behind on the
// evidence topic, for failure messages.
func (p *pipeline) evidenceLag() string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	adm := kadm.NewClient(p.kafkaClient())
	var out []string
	for _, g := range []string{p.group("sink"), p.group("windows-" + p.version), p.group("synthesis")} {
		lags, err := adm.Lag(ctx, g)
		if err != nil {
			out = append(out, fmt.Sprintf("%s: %v", g, err))
			continue
		}
		l := lags[g]
		out = append(out, fmt.Sprintf("%s (%s): lag %d", g, l.State, l.Lag.Total()))
	}
	return strings.Join(out, "; ")
}

// closedWindows reads the closed-window topic from the start to its current end.
func (p *pipeline) closedWindows(ctx context.Context) []schemas.ClosedWindow {
	p.t.Helper()
	codecs := p.codecs()
	var out []schemas.ClosedWindow
	p.readTopic(ctx, p.topic("windows-closed"), func(r *kgo.Record) {
		w, err := codecs.ClosedWindow.Decode(ctx, r.Value)
		if err != nil {
			p.t.Fatalf("closed window at %s/%d@%d does not decode: %v", r.Topic, r.Partition, r.Offset, err)
		}
		out = append(out, w)
	})
	return out
}

// evidenceRecord is one record of the evidence topic with where it sits.
type evidenceRecord struct {
	partition int32
	offset    int64
	ev        schemas.EvidenceRecord
}

// evidenceRecords reads the whole evidence topic (tombstones left out).
func (p *pipeline) evidenceRecords(ctx context.Context) []evidenceRecord {
	p.t.Helper()
	codecs := p.codecs()
	var out []evidenceRecord
	p.readTopic(ctx, p.topic("evidence"), func(r *kgo.Record) {
		if len(r.Value) == 0 {
			return
		}
		ev, err := codecs.Evidence.Decode(ctx, r.Value)
		if err != nil {
			return // parked by the stages; not evidence
		}
		out = append(out, evidenceRecord{r.Partition, r.Offset, ev})
	})
	return out
}

func (p *pipeline) codecs() *schemas.Codecs {
	codecs, err := schemas.NewCodecs(schemas.Topics{
		Evidence: p.topic("evidence"), ClosedWindow: p.topic("windows-closed"), Checkpoint: p.topic("checkpoints"),
		Workspace: p.topic("workspaces"), DeadLetter: p.topic("deadletter"),
	})
	if err != nil {
		p.t.Fatal(err)
	}
	return codecs
}

// readTopic calls each for every record of topic up to its end offsets now.
func (p *pipeline) readTopic(ctx context.Context, topic string, each func(*kgo.Record)) {
	p.t.Helper()
	adm := kadm.NewClient(p.kafkaClient())
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		p.t.Fatal(err)
	}
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
		}
	})
	cl := p.kafkaClient(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			p.t.Fatalf("reading %s: %v (still want %v)", topic, ctx.Err(), want)
		}
		fs.EachError(func(t string, part int32, err error) { p.t.Fatalf("fetching %s/%d: %v", t, part, err) })
		fs.EachRecord(func(r *kgo.Record) {
			each(r)
			if end, ok := want[r.Partition]; ok && r.Offset+1 >= end {
				delete(want, r.Partition)
			}
		})
	}
}

// jvmBroker is a private single-node Kafka broker of one test, started from the
// Maven jars by deploy/kafka/kafka-jvm.sh, which the test can stop and start again
// with its data.
type jvmBroker struct {
	t                *testing.T
	dir              string
	port, controller int
	script           string
}

func startJVMBroker(t *testing.T) *jvmBroker {
	t.Helper()
	if _, err := exec.LookPath("java"); err != nil {
		t.Fatalf("the broker-restart test runs its own broker and needs Java 17+ on PATH: %v", err)
	}
	script, err := filepath.Abs(filepath.Join("..", "..", "deploy", "kafka", "kafka-jvm.sh"))
	if err != nil {
		t.Fatal(err)
	}
	b := &jvmBroker{t: t, dir: t.TempDir(), port: freePort(t), controller: freePort(t), script: script}
	b.start()
	t.Cleanup(func() { b.run("stop", b.dir) })
	return b
}

func (b *jvmBroker) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(b.port)) }

func (b *jvmBroker) start() {
	b.t.Helper()
	b.run("start", b.dir, strconv.Itoa(b.port), strconv.Itoa(b.controller))
}

func (b *jvmBroker) stop() {
	b.t.Helper()
	b.run("stop", b.dir)
}

func (b *jvmBroker) run(args ...string) {
	b.t.Helper()
	cmd := exec.Command(b.script, args...)
	cmd.Env = append(os.Environ(), "LARKLINE_KAFKA_HEAP=512m")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.t.Fatalf("kafka-jvm.sh %v: %v\n%s", args, err, out)
	}
}
