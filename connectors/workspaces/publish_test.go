package workspaces

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/larkline/larkline/internal/kafka"
	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/internal/testenv"
	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

func newPublisher(t *testing.T, e *feedEnv, reg *prometheus.Registry) *Publisher {
	t.Helper()
	p, err := NewPublisher(PublisherOptions{
		Kafka:    kafka.Options{Brokers: e.brokers, ClientID: "workspaces-test"},
		Topic:    e.topic,
		Codec:    e.codecs.Workspace,
		Now:      fixedNow,
		Registry: reg,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func TestPublisherPublishesValidRecordsOnly(t *testing.T) {
	t.Parallel()
	e := newFeedEnv(t, 3)
	reg := prometheus.NewRegistry()
	p := newPublisher(t, e, reg)
	ctx := context.Background()

	invalid := []struct {
		name   string
		mutate func(*schemas.WorkspaceRecord)
		field  string
	}{
		{"unknown status", func(r *schemas.WorkspaceRecord) { r.Status = "open" }, "status"},
		{"not a Lark chat id", func(r *schemas.WorkspaceRecord) { r.Chats = []ids.ChatID{"om_1"} }, "chats[0]"},
		{"creation time in the future", func(r *schemas.WorkspaceRecord) { r.CreatedAt = t0.Add(time.Hour) }, "created_at"},
		{"empty type", func(r *schemas.WorkspaceRecord) { r.Type = "" }, "type"},
		{"no version", func(r *schemas.WorkspaceRecord) { r.Version = 0 }, "version"},
	}
	for _, tc := range invalid {
		t.Run(tc.name, func(t *testing.T) {
			r := validRecord()
			tc.mutate(&r)
			_, err := p.Publish(ctx, r)
			var fe *FieldError
			if !errors.Is(err, ErrInvalid) || !errors.As(err, &fe) || fe.Field != tc.field {
				t.Fatalf("Publish = %v, want ErrInvalid for %s", err, tc.field)
			}
		})
	}
	if _, err := p.PublishTombstone(ctx, "a/b"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("PublishTombstone(a/b) = %v, want ErrInvalid", err)
	}

	r := validRecord()
	r.UpdatedAt = time.Time{} // set by Publish
	out, err := p.Publish(ctx, r)
	if err != nil || out.Topic != e.topic || out.Offset < 0 {
		t.Fatalf("Publish = %+v %v", out, err)
	}
	if _, err := p.PublishTombstone(ctx, r.ID); err != nil {
		t.Fatalf("PublishTombstone = %v", err)
	}
	// Only the valid record and the tombstone reached the topic, keyed by the
	// workspace id, in one partition.
	got := testenv.ReadFirst(t, e.topic, 2)
	if len(got) != 2 || string(got[0].Key) != "INC-1" || string(got[1].Key) != "INC-1" || got[0].Partition != got[1].Partition || got[1].Value != nil {
		t.Fatalf("topic holds %v", got)
	}
	dec, err := e.codecs.Workspace.Decode(ctx, got[0].Value)
	if err != nil || dec.ID != r.ID || dec.Status != r.Status || dec.Version != r.Version || !dec.UpdatedAt.Equal(t0) || len(dec.Chats) != 2 {
		t.Fatalf("decoded %+v %v", dec, err)
	}
	m, err := newPublishMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	if ok, bad := testutil.ToFloat64(m.published.WithLabelValues(resultOK)), testutil.ToFloat64(m.published.WithLabelValues(resultInvalid)); ok != 2 || bad != float64(len(invalid)+1) {
		t.Errorf("published ok=%v invalid=%v", ok, bad)
	}

	p.Close()
	if _, err := p.Publish(ctx, validRecord()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Publish after Close = %v, want ErrClosed", err)
	}
}

// TestPublishedRecordsReachTheTables: publish → feed → tables, the way `larkline
// workspaces publish` and a ticket system's script reach ingestion.
func TestPublishedRecordsReachTheTables(t *testing.T) {
	t.Parallel()
	e := newFeedEnv(t, 1)
	st := newStore(t)
	n := listen(t, st)
	p := newPublisher(t, e, nil)
	e.consumer("g", applier(t, st), nil)
	r, err := DecodeRecordJSON(strings.NewReader(`{"id":"INC-J","type":"incident","status":"firing",
		"created_at":"2025-03-04T09:30:00Z","version":1741080600000,"chats":["oc_json"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Publish(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	n.waitFor(t, "oc_json")
	b, ok := bindingOf(t, st, "oc_json", "INC-J")
	if !ok || b.Workspace.Status != store.WorkspaceFiring || b.Workspace.Version != 1741080600000 {
		t.Fatalf("binding %+v %t", b, ok)
	}
}

func TestNewPublisherRequiresAcksAll(t *testing.T) {
	t.Parallel()
	codecs, err := schemas.NewCodecs(schemas.Topics{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		o    PublisherOptions
	}{
		{"acks leader", PublisherOptions{Kafka: kafka.Options{Brokers: []string{"127.0.0.1:9"},
			Producer: kafka.ProducerOptions{Acks: kafka.AcksLeader, DisableIdempotence: true}}, Codec: codecs.Workspace}},
		{"idempotence off", PublisherOptions{Kafka: kafka.Options{Brokers: []string{"127.0.0.1:9"},
			Producer: kafka.ProducerOptions{DisableIdempotence: true}}, Codec: codecs.Workspace}},
		{"no codec", PublisherOptions{Kafka: kafka.Options{Brokers: []string{"127.0.0.1:9"}}}},
		{"no brokers", PublisherOptions{Codec: codecs.Workspace}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if p, err := NewPublisher(tc.o); !errors.Is(err, ErrInvalidOptions) {
				if p != nil {
					p.Close()
				}
				t.Fatalf("NewPublisher = %v, want ErrInvalidOptions", err)
			}
		})
	}
}
