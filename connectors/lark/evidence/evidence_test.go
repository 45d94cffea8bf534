package evidence

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/connectors/lark/normalize"
	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

// fakeProducer answers every record with err (nil: acknowledged at offsets 0, 1, …),
// after gate is closed when gate is set.
type fakeProducer struct {
	gate chan struct{}
	errs map[int]error
	got  []*kgo.Record
}

func (p *fakeProducer) ProduceSync(ctx context.Context, rs ...*kgo.Record) kgo.ProduceResults {
	if p.gate != nil {
		<-p.gate
	}
	p.got = append(p.got, rs...)
	out := make(kgo.ProduceResults, len(rs))
	for i, r := range rs {
		r.Offset = int64(i)
		out[i] = kgo.ProduceResult{Record: r, Err: p.errs[i]}
	}
	return out
}

type names map[string]string

func (n names) Name(id string) (string, bool) { v, ok := n[id]; return v, ok }
func (n names) Observe(id, name string)       { n[id] = name }

func message(t *testing.T) normalize.Message {
	t.Helper()
	n, err := normalize.New(normalize.Options{SelfAppID: "cli_self"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := n.Normalize(normalize.Input{MessageID: "om_ev1", ChatID: "oc_ev", ChatType: normalize.ChatTypeGroup,
		SenderID: "ou_ann", SenderType: normalize.SenderUser, MessageType: "text", Content: `{"text":"rolled back"}`,
		CreateTime: time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func newWriter(t *testing.T, p Producer, n Names) (*Writer, *schemas.Codec[schemas.EvidenceRecord]) {
	t.Helper()
	codec, err := schemas.NewEvidenceCodec()
	if err != nil {
		t.Fatal(err)
	}
	w, err := New(Options{Producer: p, Codec: codec, Topic: "larkline.evidence", Names: n})
	if err != nil {
		t.Fatal(err)
	}
	return w, codec
}

func TestRecordsOnePerWorkspaceKeyedAndStamped(t *testing.T) {
	w, codec := newWriter(t, &fakeProducer{}, names{"ou_ann": "Ann"})
	msg := message(t)
	observed := time.Date(2026, 3, 4, 8, 0, 0, 0, time.FixedZone("UTC+8", 8*3600))
	recs, err := w.Records(context.Background(), &msg, []ids.WorkspaceID{"inc-1", "inc-2"}, observed, schemas.IngestReconcile)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 {
		t.Fatalf("%d records, want one per workspace", len(recs))
	}
	for i, ws := range []string{"inc-1", "inc-2"} {
		r := recs[i]
		if want := ws + "/oc_ev/om_ev1"; string(r.Key) != want || r.Topic != "larkline.evidence" {
			t.Errorf("record %d: key %q topic %q, want %q", i, r.Key, r.Topic, want)
		}
		if !r.Timestamp.Equal(observed) || r.Timestamp.Location() != time.UTC {
			t.Errorf("record %d stamped %v, want the observed time in UTC", i, r.Timestamp)
		}
		ev, err := codec.Decode(context.Background(), r.Value)
		if err != nil {
			t.Fatal(err)
		}
		if string(ev.WorkspaceID) != ws || ev.ActorDisplayName != "Ann" || ev.IngestPath != schemas.IngestReconcile {
			t.Errorf("record %d decodes to %+v", i, ev)
		}
	}
}

func TestObserveMentionsFeedsTheNameCache(t *testing.T) {
	n := names{}
	w, _ := newWriter(t, &fakeProducer{}, n)
	w.ObserveMentions([]normalize.Mention{{OpenID: "ou_tom", Name: "Tom"}, {OpenID: "ou_x"}, {Name: "nobody"}})
	if len(n) != 1 || n["ou_tom"] != "Tom" {
		t.Fatalf("names cache %v", n)
	}
	w2, _ := newWriter(t, &fakeProducer{}, nil)
	w2.ObserveMentions([]normalize.Mention{{OpenID: "ou_tom", Name: "Tom"}}) // no cache: nothing to do
}

func TestProduce(t *testing.T) {
	boom := errors.New("NOT_LEADER_FOR_PARTITION")
	recs := func() []*kgo.Record {
		return []*kgo.Record{{Topic: "t", Key: []byte("a")}, {Topic: "t", Key: []byte("b")}, {Topic: "t", Key: []byte("c")}}
	}
	t.Run("all acknowledged", func(t *testing.T) {
		p := &fakeProducer{}
		w, _ := newWriter(t, p, nil)
		res, err := w.Produce(context.Background(), recs())
		if err != nil || len(res) != 3 || len(p.got) != 3 {
			t.Fatalf("results %d, sent %d, err %v", len(res), len(p.got), err)
		}
	})
	t.Run("some refused: every result, the count and the cause", func(t *testing.T) {
		p := &fakeProducer{errs: map[int]error{1: boom, 2: boom}}
		res, err := ProduceAll(context.Background(), p, "checkpoint", recs())
		if !errors.Is(err, boom) || !strings.Contains(err.Error(), "2 of 3 checkpoint records") || len(res) != 3 {
			t.Fatalf("results %d, err %v", len(res), err)
		}
	})
	t.Run("ctx ends first: abandoned with its cause", func(t *testing.T) {
		p := &fakeProducer{gate: make(chan struct{})}
		defer close(p.gate)
		w, _ := newWriter(t, p, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		res, err := w.Produce(ctx, recs())
		if !errors.Is(err, ErrAbandoned) || !errors.Is(err, context.DeadlineExceeded) || res != nil {
			t.Fatalf("results %v, err %v", res, err)
		}
	})
	t.Run("nothing to produce", func(t *testing.T) {
		p := &fakeProducer{gate: make(chan struct{})} // would block if called
		if res, err := ProduceAll(context.Background(), p, "evidence", nil); res != nil || err != nil {
			t.Fatalf("%v %v", res, err)
		}
	})
}

func TestNewValidates(t *testing.T) {
	codec, err := schemas.NewEvidenceCodec()
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []Options{
		{Codec: codec, Topic: "t"},
		{Producer: &fakeProducer{}, Topic: "t"},
		{Producer: &fakeProducer{}, Codec: codec},
	} {
		if _, err := New(o); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("New(%+v) = %v", o, err)
		}
	}
}
