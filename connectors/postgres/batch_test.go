package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

const (
	uWS   = ids.WorkspaceID("ws-unit")
	uChat = ids.ChatID("oc_unit")
)

func unitCodecs(t testing.TB) *schemas.Codecs {
	t.Helper()
	c, err := schemas.NewCodecs(schemas.Topics{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// unitRecord encodes an evidence version of message msg at partition 0, offset off.
func unitRecord(t testing.TB, c *schemas.Codecs, msg, text string, off int64) *kgo.Record {
	t.Helper()
	r := evidenceOf(uWS, uChat, ids.MessageID(msg), text, t0)
	v, err := c.Evidence.Encode(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	return &kgo.Record{Topic: "evidence", Partition: 0, Offset: off, Key: []byte(r.Key()), Value: v}
}

func TestDecodeRecord(t *testing.T) {
	c := unitCodecs(t)
	good := unitRecord(t, c, "om_1", "hello", 0)
	nul := evidenceOf(uWS, uChat, "om_nul", "x", t0)
	nul.MetadataJSON = `{"k":"\u0000"}`
	nulV, err := c.Evidence.Encode(context.Background(), nul)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		key       string
		value     []byte
		tombstone bool
		reason    string // "" means decoded
	}{
		{name: "evidence", key: string(good.Key), value: good.Value},
		{name: "tombstone", key: ids.EvidenceKey(uWS, uChat, "om_1"), tombstone: true},
		{name: "empty value is a tombstone", key: ids.EvidenceKey(uWS, uChat, "om_1"), value: []byte{}, tombstone: true},
		{name: "tombstone with a bad key", key: "ws-unit/oc_unit", reason: ReasonInvalidKey},
		{name: "garbage", key: string(good.Key), value: []byte("garbage"), reason: schemas.ReasonMalformed},
		{name: "unknown schema", key: string(good.Key), value: append([]byte{0xC3, 0x01, 9, 9, 9, 9, 9, 9, 9, 9}, 0), reason: schemas.ReasonUnknownSchema},
		{name: "truncated body", key: string(good.Key), value: good.Value[:len(good.Value)/2], reason: schemas.ReasonMalformed},
		{name: "key of another message", key: ids.EvidenceKey(uWS, uChat, "om_2"), value: good.Value, reason: ReasonKeyMismatch},
		{name: "nil key", value: good.Value, reason: ReasonKeyMismatch},
		{name: "row the store rejects", key: nul.Key(), value: nulV, reason: ReasonStoreInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &kgo.Record{Key: []byte(tc.key), Value: tc.value}
			if tc.key == "" {
				r.Key = nil
			}
			v, p, err := decodeRecord(context.Background(), c.Evidence, r)
			if err != nil {
				t.Fatalf("decodeRecord: %v (only registry failures are errors)", err)
			}
			if tc.reason != "" {
				if p == nil || p.reasonCode() != tc.reason || p.cause == nil {
					t.Fatalf("parked = %+v, want reason %q with a cause", p, tc.reason)
				}
				return
			}
			if p != nil {
				t.Fatalf("parked with %q: %v", p.reasonCode(), p.cause)
			}
			if v.tombstone != tc.tombstone || v.ws != uWS || v.sourceKey != ids.MessageSourceKey(uChat, "om_1") {
				t.Fatalf("version = %+v", v)
			}
			if !tc.tombstone && (v.row.Content != "hello" || v.row.WorkspaceID != uWS || string(v.row.Metadata) == "") {
				t.Fatalf("row = %+v", v.row)
			}
		})
	}
}

func TestEvidenceRowMapsEveryColumn(t *testing.T) {
	r := evidenceOf(uWS, uChat, "om_map", "text", t0)
	r.ActorDisplayName = "Bob"
	r.SourceUpdatedAt = t0.Add(time.Minute)
	r.ObservedAt = t0.Add(2 * time.Minute)
	row := evidenceRow(&r)
	want := store.Evidence{
		WorkspaceID: uWS, Source: ids.SourceLark, SourceType: ids.SourceTypeLarkMessage,
		SourceKey: r.SourceKey, OccurredAt: t0, SourceUpdatedAt: r.SourceUpdatedAt, ObservedAt: r.ObservedAt,
		ActorID: r.ActorID, ActorDisplayName: "Bob", Content: "text", ContentHash: r.ContentHash,
		Metadata: []byte(r.MetadataJSON), Deleted: false, SynthesisEligible: true,
	}
	if fmt.Sprint(row) != fmt.Sprint(want) {
		t.Fatalf("row\n got %+v\nwant %+v", row, want)
	}
	if err := row.Validate(); err != nil {
		t.Fatal(err)
	}
}

// batchOf decodes records into a planned batch.
func batchOf(t testing.TB, c *schemas.Codecs, writers int, recs ...*kgo.Record) *batch {
	t.Helper()
	b := newBatch(recs)
	for _, r := range recs {
		v, p, err := decodeRecord(context.Background(), c.Evidence, r)
		if err != nil {
			t.Fatal(err)
		}
		if p != nil {
			b.park(p)
			continue
		}
		b.add(v)
	}
	b.plan(writers)
	return b
}

func contents(c *call) []string {
	var out []string
	for _, v := range c.versions() {
		if v.tombstone {
			out = append(out, "delete:"+v.sourceKey)
		} else {
			out = append(out, v.row.Content)
		}
	}
	return out
}

func TestPlanHandsEachKeysVersionsToOneCallInOrder(t *testing.T) {
	c := unitCodecs(t)
	tomb := &kgo.Record{Topic: "evidence", Offset: 5, Key: []byte(ids.EvidenceKey(uWS, uChat, "om_c"))}
	otherWS := evidenceOf("ws-other", uChat, "om_x", "other workspace", t0)
	otherV, _ := c.Evidence.Encode(context.Background(), otherWS)
	otherTomb := &kgo.Record{Topic: "evidence", Offset: 7, Key: []byte(ids.EvidenceKey("ws-other", uChat, "om_y"))}
	b := batchOf(t, c, 2,
		unitRecord(t, c, "om_a", "a1", 0),
		unitRecord(t, c, "om_b", "b1", 1),
		unitRecord(t, c, "om_a", "a2", 2),
		unitRecord(t, c, "om_c", "c1", 3),
		unitRecord(t, c, "om_a", "a3", 4),
		tomb, // deletes om_c, whose upsert it supersedes
		&kgo.Record{Topic: "evidence", Offset: 6, Key: []byte(otherWS.Key()), Value: otherV},
		otherTomb,
	)
	if got := b.outcomes[outcomeSuperseded]; got != 1 {
		t.Errorf("superseded %d, want 1 (c1, before its tombstone)", got)
	}
	var got []string
	for _, call := range b.pending {
		got = append(got, fmt.Sprintf("%v %s %v", call.tombstones, call.ws, contents(call)))
	}
	want := []string{
		"false  [a1 a2 a3]",
		"false  [b1 other workspace]",
		"true ws-unit [delete:chat/oc_unit/message/om_c]",
		"true ws-other [delete:chat/oc_unit/message/om_y]",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("calls\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestPlanBoundsCallsToOneStatement(t *testing.T) {
	for _, tc := range []struct{ rows, writers, calls, largest int }{
		{rows: 10, writers: 4, calls: 4, largest: 3},
		{rows: 3, writers: 4, calls: 3, largest: 1},
		{rows: 2500, writers: 2, calls: 4, largest: 625}, // whole waves of writers
		{rows: 5000, writers: 4, calls: 8, largest: 625},
		{rows: 4000, writers: 4, calls: 4, largest: 1000},
	} {
		t.Run(fmt.Sprintf("%d rows %d writers", tc.rows, tc.writers), func(t *testing.T) {
			b := newBatch(nil)
			for i := range tc.rows {
				b.add(&version{key: fmt.Sprint(i)})
			}
			b.plan(tc.writers)
			largest := 0
			for _, c := range b.pending {
				largest = max(largest, len(c.versions()))
			}
			if len(b.pending) != tc.calls || largest != tc.largest {
				t.Errorf("%d calls, largest %d; want %d calls, largest %d", len(b.pending), largest, tc.calls, tc.largest)
			}
		})
	}
}

func TestSplit(t *testing.T) {
	vs := make([]*version, 7)
	for _, tc := range []struct{ n, chunks int }{{1, 1}, {2, 2}, {3, 3}, {16, 7}} {
		parts := split(vs, tc.n)
		total := 0
		for _, p := range parts {
			total += len(p)
			if len(p) == 0 {
				t.Errorf("split(7, %d) has an empty chunk", tc.n)
			}
		}
		if len(parts) != tc.chunks || total != 7 {
			t.Errorf("split(7, %d) = %d chunks of %d, want %d of 7", tc.n, len(parts), total, tc.chunks)
		}
	}
	if split[*version](nil, 4) != nil {
		t.Error("split of nothing is not empty")
	}
}

func pgError(code string) error {
	return fmt.Errorf("upsert: %w", &pgconn.PgError{Code: code, Message: "test"})
}

func TestClassifyDB(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want class
	}{
		{"connection refused", fmt.Errorf("x: %w", io.ErrUnexpectedEOF), classRetry},
		{"serialization failure", pgError("40001"), classRetry},
		{"admin shutdown", pgError("57P01"), classRetry},
		{"attempt timeout", context.DeadlineExceeded, classRetry},
		{"store validation", &store.InvalidEvidenceError{Index: 3, Err: fmt.Errorf("%w: bad", store.ErrInvalid)}, classData},
		{"check violation", pgError("23514"), classData},
		{"invalid text", pgError("22P02"), classData},
		{"undefined table", pgError("42P01"), classFatal},
		{"permission denied", pgError("42501"), classFatal},
		{"unknown", errors.New("store bug"), classFatal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := classifyDB(tc.err); got != tc.want {
				t.Errorf("classifyDB(%v) = %d, want %d", tc.err, got, tc.want)
			}
		})
	}
}

// unitSink is a sink whose store is w; it never connects to Kafka.
func unitSink(t testing.TB, w Store, writers int) *Sink {
	t.Helper()
	o := validOptions(t)
	o.Store, o.Writers = w, writers
	o.RetryBackoffMin, o.RetryBackoffMax = time.Millisecond, 5*time.Millisecond
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestWriteIsolatesBadRows(t *testing.T) {
	c := unitCodecs(t)
	var recs []*kgo.Record
	for i := range 40 {
		text := fmt.Sprintf("row %d", i)
		if i == 3 || i == 17 || i == 18 {
			text = "poison " + text
		}
		recs = append(recs, unitRecord(t, c, fmt.Sprintf("om_%d", i), text, int64(i)))
	}
	// om_keep: a good version, then a poisoned one: the good one is written.
	recs = append(recs, unitRecord(t, c, "om_keep", "good", 40), unitRecord(t, c, "om_keep", "poison edit", 41))
	written := map[string]string{}
	calls := 0
	var mu sync.Mutex // two writers call the store concurrently
	w := &fakeWriter{upsert: func(batch []store.Evidence) ([]store.UpsertOutcome, error) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		for _, e := range batch {
			if strings.HasPrefix(e.Content, "poison") {
				return nil, pgError("23514")
			}
		}
		out := make([]store.UpsertOutcome, len(batch))
		for i, e := range batch {
			written[e.SourceKey] = e.Content
			out[i] = store.UpsertOutcome{Result: store.EvidenceInserted}
		}
		return out, nil
	}}
	s := unitSink(t, w, 2)
	b := batchOf(t, c, 2, recs...)
	err := s.retry(context.Background(), opDatabase, s.boDB, func(ctx context.Context) (bool, error) { return s.writeStep(ctx, b) })
	if err != nil {
		t.Fatalf("write: %v", err)
	}
	if len(written) != 38 || written[ids.MessageSourceKey(uChat, "om_keep")] != "good" {
		t.Errorf("wrote %d rows (om_keep=%q), want 38 with om_keep=good", len(written), written[ids.MessageSourceKey(uChat, "om_keep")])
	}
	var parkedOffsets []int64
	for _, p := range b.parked {
		if p.reasonCode() != ReasonConstraint {
			t.Errorf("parked offset %d with %q, want %q", p.rec.Offset, p.reasonCode(), ReasonConstraint)
		}
		parkedOffsets = append(parkedOffsets, p.rec.Offset)
	}
	slices.Sort(parkedOffsets)
	if fmt.Sprint(parkedOffsets) != fmt.Sprint([]int64{3, 17, 18, 41}) {
		t.Errorf("parked offsets %v, want 3, 17, 18 and 41", parkedOffsets)
	}
	if b.outcomes[outcomeInserted] != 38 || b.outcomes[outcomeSuperseded] != 0 {
		t.Errorf("outcomes %v, want 38 inserted and nothing superseded (om_keep's first version was written)", b.outcomes)
	}
	if calls > 40 {
		t.Errorf("%d store calls to isolate 4 bad rows among 42: halving should need far fewer", calls)
	}
}

func TestWriteParksTheRowTheStoreNames(t *testing.T) {
	c := unitCodecs(t)
	calls := 0
	w := &fakeWriter{upsert: func(batch []store.Evidence) ([]store.UpsertOutcome, error) {
		calls++
		for i, e := range batch {
			if e.Content == "bad" {
				return nil, fmt.Errorf("upsert: %w", &store.InvalidEvidenceError{Index: i, Err: fmt.Errorf("%w: content", store.ErrInvalid)})
			}
		}
		out := make([]store.UpsertOutcome, len(batch))
		for i := range out {
			out[i].Result = store.EvidenceInserted
		}
		return out, nil
	}}
	s := unitSink(t, w, 1)
	b := batchOf(t, c, 1, unitRecord(t, c, "om_1", "ok", 0), unitRecord(t, c, "om_2", "bad", 1), unitRecord(t, c, "om_3", "ok", 2))
	if err := s.retry(context.Background(), opDatabase, s.boDB, func(ctx context.Context) (bool, error) { return s.writeStep(ctx, b) }); err != nil {
		t.Fatal(err)
	}
	if calls != 2 || len(b.parked) != 1 || b.parked[0].rec.Offset != 1 || b.parked[0].reasonCode() != ReasonStoreInvalid {
		t.Errorf("calls %d parked %d (%+v), want 2 calls and offset 1 parked as %s", calls, len(b.parked), b.parked, ReasonStoreInvalid)
	}
}

func TestWriteRetriesUntilTheDatabaseAnswers(t *testing.T) {
	c := unitCodecs(t)
	failures := 5
	w := &fakeWriter{upsert: func(batch []store.Evidence) ([]store.UpsertOutcome, error) {
		if failures > 0 {
			failures--
			return nil, &pgconn.ConnectError{}
		}
		out := make([]store.UpsertOutcome, len(batch))
		for i := range out {
			out[i].Result = store.EvidenceUnchanged
		}
		return out, nil
	}}
	s := unitSink(t, w, 1)
	b := batchOf(t, c, 1, unitRecord(t, c, "om_1", "x", 0))
	if err := s.retry(context.Background(), opDatabase, s.boDB, func(ctx context.Context) (bool, error) { return s.writeStep(ctx, b) }); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(s.m.retries.WithLabelValues(opDatabase)); got != 5 {
		t.Errorf("retries %v, want 5", got)
	}
	if s.boDB.failures() != 0 || testutil.ToFloat64(s.m.paused) != 0 {
		t.Errorf("after recovery: backoff failures %d, paused %v; want 0 and 0", s.boDB.failures(), testutil.ToFloat64(s.m.paused))
	}
	if b.outcomes[outcomeUnchanged] != 1 || len(b.parked) != 0 {
		t.Errorf("outcomes %v parked %d", b.outcomes, len(b.parked))
	}
}

func TestWriteStopsOnFatalErrors(t *testing.T) {
	c := unitCodecs(t)
	w := &fakeWriter{upsert: func([]store.Evidence) ([]store.UpsertOutcome, error) { return nil, pgError("42P01") }}
	s := unitSink(t, w, 1)
	b := batchOf(t, c, 1, unitRecord(t, c, "om_1", "x", 0), unitRecord(t, c, "om_2", "y", 1))
	err := s.retry(context.Background(), opDatabase, s.boDB, func(ctx context.Context) (bool, error) { return s.writeStep(ctx, b) })
	if !errors.Is(err, ErrFatal) {
		t.Fatalf("err = %v, want ErrFatal", err)
	}
	if len(b.parked) != 0 {
		t.Errorf("parked %d records on an undefined table; want none (no record is to blame)", len(b.parked))
	}
}

func TestPauseGivesUp(t *testing.T) {
	down := &fakeWriter{upsert: func([]store.Evidence) ([]store.UpsertOutcome, error) { return nil, io.ErrUnexpectedEOF }}
	c := unitCodecs(t)
	t.Run("when a rebalance waits", func(t *testing.T) {
		s := unitSink(t, down, 1)
		b := batchOf(t, c, 1, unitRecord(t, c, "om_1", "x", 0))
		s.onBlocked(context.Background(), nil)
		err := s.retry(context.Background(), opDatabase, s.boDB, func(ctx context.Context) (bool, error) { return s.writeStep(ctx, b) })
		var ab *abortError
		if !errors.As(err, &ab) || ab.cause != abortRebalance {
			t.Fatalf("err = %v, want an abort for the rebalance", err)
		}
		if s.boDB.failures() != 1 {
			t.Errorf("backoff failures %d, want 1 kept for the next batch", s.boDB.failures())
		}
	})
	t.Run("when the work context ends", func(t *testing.T) {
		s := unitSink(t, down, 1)
		b := batchOf(t, c, 1, unitRecord(t, c, "om_1", "x", 0))
		ctx, cancel := context.WithCancel(context.Background())
		n := 0
		err := s.retry(ctx, opDatabase, s.boDB, func(actx context.Context) (bool, error) {
			if n++; n == 3 {
				cancel()
			}
			return s.writeStep(actx, b)
		})
		var ab *abortError
		if !errors.As(err, &ab) || ab.cause != abortShutdown {
			t.Fatalf("err = %v, want an abort for shutdown", err)
		}
	})
}

func TestBackoff(t *testing.T) {
	b := newBackoff(100*time.Millisecond, 2*time.Second)
	ceilings := []time.Duration{100, 200, 400, 800, 1600, 2000, 2000}
	for i, c := range ceilings {
		c *= time.Millisecond
		for range 50 { // the jitter stays within [ceiling/2, ceiling]
			bb := *b
			if d := bb.next(); d < c/2 || d > c {
				t.Fatalf("pause %d = %s, want within [%s, %s]", i, d, c/2, c)
			}
		}
		b.next()
	}
	if b.failures() != len(ceilings) {
		t.Errorf("failures %d, want %d", b.failures(), len(ceilings))
	}
	b.reset()
	if d := b.next(); d > 100*time.Millisecond {
		t.Errorf("after reset the pause is %s, want at most the minimum", d)
	}
}

func TestOffsets(t *testing.T) {
	recs := []*kgo.Record{
		{Topic: "e", Partition: 1, Offset: 10},
		{Topic: "e", Partition: 0, Offset: 3},
		{Topic: "e", Partition: 1, Offset: 11},
		{Topic: "e", Partition: 0, Offset: 4},
		{Topic: "e", Partition: 2, Offset: 0},
	}
	b := newBatch(recs)
	last := map[int32]int64{}
	for _, r := range b.lastPerPartition() {
		last[r.Partition] = r.Offset
	}
	if fmt.Sprint(last) != "map[0:4 1:11 2:0]" {
		t.Errorf("last per partition %v", last)
	}
	first := b.firstOffsets()["e"]
	if first[0].Offset != 3 || first[1].Offset != 10 || first[2].Offset != 0 || first[1].Epoch != -1 {
		t.Errorf("first offsets %v", first)
	}
}

// TestDecodeAndTheSchemaRegistry: a registry outage is retried (never parked), a
// registry that refuses the sink stops it (no record is to blame), and an id the
// registry does not know parks the record.
func TestDecodeAndTheSchemaRegistry(t *testing.T) {
	plain := unitCodecs(t)
	soe := unitRecord(t, plain, "om_reg", "via the registry", 0)
	const id = 7
	confluent := append([]byte{0, 0, 0, 0, id}, soe.Value[10:]...) // same body, Confluent header
	schemaJSON := plain.Evidence.Schema().JSON
	for _, tc := range []struct {
		name     string
		status   func(n int) int // HTTP status of the n-th request (from 1)
		wantErr  error
		reason   string
		retries  int
		decoded  int
		requests int
	}{
		{name: "outage is retried", status: func(n int) int {
			if n <= 3 {
				return http.StatusServiceUnavailable
			}
			return http.StatusOK
		}, retries: 3, decoded: 1, requests: 4},
		{name: "refused credentials stop the sink", status: func(int) int { return http.StatusUnauthorized }, wantErr: ErrFatal, requests: 1},
		{name: "unknown id is parked", status: func(int) int { return http.StatusNotFound }, reason: schemas.ReasonUnknownSchema, requests: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			requests := 0
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				requests++
				status := tc.status(requests)
				mu.Unlock()
				w.Header().Set("Content-Type", "application/vnd.schemaregistry.v1+json")
				switch {
				case r.URL.Path != fmt.Sprintf("/schemas/ids/%d", id):
					w.WriteHeader(http.StatusBadRequest)
				case status == http.StatusOK:
					_ = json.NewEncoder(w).Encode(map[string]string{"schema": schemaJSON})
				case status == http.StatusNotFound:
					w.WriteHeader(status)
					_, _ = w.Write([]byte(`{"error_code":40403,"message":"Schema not found"}`))
				default:
					w.WriteHeader(status)
				}
			}))
			defer srv.Close()
			reg, err := schemas.NewRegistry(schemas.RegistryOptions{URL: srv.URL, AutoRegister: true})
			if err != nil {
				t.Fatal(err)
			}
			codecs, err := schemas.NewCodecs(schemas.Topics{}, schemas.WithRegistry(reg))
			if err != nil {
				t.Fatal(err)
			}
			o := validOptions(t)
			o.Codecs = codecs
			o.RetryBackoffMin, o.RetryBackoffMax = time.Millisecond, 5*time.Millisecond
			s, err := New(o)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			b := newBatch([]*kgo.Record{{Topic: "evidence", Key: soe.Key, Value: confluent}})
			err = s.decode(context.Background(), b)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("decode = %v, want %v", err, tc.wantErr)
			}
			if got := int(testutil.ToFloat64(s.m.retries.WithLabelValues(opRegistry))); got != tc.retries {
				t.Errorf("registry retries %d, want %d", got, tc.retries)
			}
			if len(b.versions) != tc.decoded || requests != tc.requests {
				t.Errorf("decoded %d with %d requests, want %d with %d", len(b.versions), requests, tc.decoded, tc.requests)
			}
			switch {
			case tc.reason == "" && len(b.parked) != 0:
				t.Errorf("parked %q; a registry failure is not the record's fault", b.parked[0].reasonCode())
			case tc.reason != "" && (len(b.parked) != 1 || b.parked[0].reasonCode() != tc.reason):
				t.Errorf("parked %d, want one with reason %q", len(b.parked), tc.reason)
			}
			if tc.decoded == 1 && b.versions[0].row.Content != "via the registry" {
				t.Errorf("decoded content %q", b.versions[0].row.Content)
			}
		})
	}
}
