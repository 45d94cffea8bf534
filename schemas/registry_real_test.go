package schemas

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/larkline/larkline/internal/testenv"
)

// These tests run against a real schema registry (Apicurio Registry, started by
// internal/testenv from deploy/kafka/registry); the fake of helpers_test.go covers
// the error paths a real registry cannot be made to take.

func TestMain(m *testing.M) { testenv.Main(m) }

// realTopics returns topic names no other test uses.
func realTopics(t *testing.T) Topics {
	t.Helper()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	p := "reg-" + hex.EncodeToString(b) + "."
	return Topics{Evidence: p + "evidence", ClosedWindow: p + "windows-closed", Checkpoint: p + "checkpoints",
		Workspace: p + "workspaces", DeadLetter: p + "deadletter"}
}

// registryJSON sends one request to the registry's Confluent-compatible API and
// decodes a 2xx answer into out.
func registryJSON(t *testing.T, method, base, path string, body, out any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/vnd.schemaregistry.v1+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		t.Fatalf("%s %s: HTTP %d: %s", method, path, resp.StatusCode, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, data)
		}
	}
}

func newRealCodecs(t *testing.T, topics Topics, base string) *Codecs {
	t.Helper()
	reg, err := NewRegistry(RegistryOptions{URL: base, AutoRegister: true})
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewCodecs(topics, WithRegistry(reg))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestRealRegistrySubjectsWireFormatAndRestart: every codec registers its schema under
// <topic>-value (TopicNameStrategy) and writes the Confluent wire format with the id
// the registry gave; a reader with empty caches fetches the writer schema by that id,
// also after the registry was stopped and started again (ids survive a restart), and
// registering again after the restart gives the same ids.
func TestRealRegistrySubjectsWireFormatAndRestart(t *testing.T) {
	reg := testenv.NewSchemaRegistry(t)
	ctx := context.Background()
	topics := realTopics(t)
	w := newRealCodecs(t, topics, reg.URL)

	type written struct {
		subject string
		value   []byte
		decode  func(*Codecs, []byte) (any, error)
		want    any
	}
	enc := func(b []byte, err error) []byte {
		t.Helper()
		if err != nil {
			t.Fatalf("encode: %v", err)
		}
		return b
	}
	ev, win, cp, ws, dl := sampleEvidence(), sampleWindow(), sampleCheckpoint(), sampleWorkspace(), sampleDeadLetter()
	recs := []written{
		{topics.Evidence + "-value", enc(w.Evidence.Encode(ctx, ev)),
			func(c *Codecs, b []byte) (any, error) { return c.Evidence.Decode(ctx, b) }, ev},
		{topics.ClosedWindow + "-value", enc(w.ClosedWindow.Encode(ctx, win)),
			func(c *Codecs, b []byte) (any, error) { return c.ClosedWindow.Decode(ctx, b) }, win},
		{topics.Checkpoint + "-value", enc(w.Checkpoint.Encode(ctx, cp)),
			func(c *Codecs, b []byte) (any, error) { return c.Checkpoint.Decode(ctx, b) }, cp},
		{topics.Workspace + "-value", enc(w.Workspace.Encode(ctx, ws)),
			func(c *Codecs, b []byte) (any, error) { return c.Workspace.Decode(ctx, b) }, ws},
		{topics.DeadLetter + "-value", enc(w.DeadLetter.Encode(ctx, dl)),
			func(c *Codecs, b []byte) (any, error) { return c.DeadLetter.Decode(ctx, b) }, dl},
	}

	var subjects []string
	registryJSON(t, http.MethodGet, reg.URL, "/subjects", nil, &subjects)
	ids := map[string]uint32{}
	for _, r := range recs {
		if !slices.Contains(subjects, r.subject) {
			t.Fatalf("subject %s not registered; the registry has %v", r.subject, subjects)
		}
		var latest struct {
			ID      uint32 `json:"id"`
			Version int    `json:"version"`
		}
		registryJSON(t, http.MethodGet, reg.URL, "/subjects/"+url.PathEscape(r.subject)+"/versions/latest", nil, &latest)
		if len(r.value) < 5 || r.value[0] != 0 {
			t.Fatalf("%s: value does not start with the Confluent magic byte: % x", r.subject, r.value[:min(5, len(r.value))])
		}
		if got := binary.BigEndian.Uint32(r.value[1:5]); got != latest.ID || latest.Version != 1 {
			t.Fatalf("%s: value names schema id %d, the registry's latest is id %d version %d", r.subject, got, latest.ID, latest.Version)
		}
		ids[r.subject] = latest.ID
	}

	check := func(stage string) {
		t.Helper()
		fresh := newRealCodecs(t, topics, reg.URL) // empty caches: every id is fetched
		for _, r := range recs {
			got, err := r.decode(fresh, r.value)
			if err != nil {
				t.Fatalf("%s: decode %s: %v", stage, r.subject, err)
			}
			if !reflect.DeepEqual(got, r.want) {
				t.Fatalf("%s: %s decoded to %+v, want %+v", stage, r.subject, got, r.want)
			}
		}
	}
	check("before the restart")
	reg.Stop(t)
	// While it is down a reader that must fetch an id gets a retryable error.
	down := newRealCodecs(t, topics, reg.URL)
	if _, err := down.Evidence.Decode(ctx, recs[0].value); !IsRetryable(err) {
		t.Fatalf("decode with the registry down: %v, want a retryable registry error", err)
	}
	reg.Start(t)
	check("after the restart")
	again := newRealCodecs(t, topics, reg.URL)
	for _, r := range recs[:1] {
		b, err := again.Evidence.Encode(ctx, ev)
		if err != nil {
			t.Fatal(err)
		}
		if got := binary.BigEndian.Uint32(b[1:5]); got != ids[r.subject] {
			t.Fatalf("after the restart %s registered as id %d, before it was %d", r.subject, got, ids[r.subject])
		}
	}
}

// TestRealRegistryRefusesIncompatibleSchema: with BACKWARD compatibility on the
// evidence subject and an earlier version the current schema cannot read (it lacks
// fields the current schema requires without default), the registry refuses the
// registration and Encode returns a clear, permanent error and no bytes.
func TestRealRegistryRefusesIncompatibleSchema(t *testing.T) {
	base := testenv.SchemaRegistryURL(t)
	topics := realTopics(t)
	subject := topics.Evidence + "-value"
	registryJSON(t, http.MethodPut, base, "/config/"+url.PathEscape(subject), map[string]string{"compatibility": "BACKWARD"}, nil)
	var cfg struct {
		Level string `json:"compatibilityLevel"`
	}
	registryJSON(t, http.MethodGet, base, "/config/"+url.PathEscape(subject), nil, &cfg)
	if cfg.Level != "BACKWARD" {
		t.Fatalf("subject compatibility is %q, want BACKWARD", cfg.Level)
	}
	old := `{"type":"record","name":"EvidenceRecord","namespace":"io.larkline","fields":[{"name":"schema_version","type":"int","default":0}]}`
	registryJSON(t, http.MethodPost, base, "/subjects/"+url.PathEscape(subject)+"/versions", map[string]string{"schema": old}, nil)

	c := newRealCodecs(t, topics, base)
	b, err := c.Evidence.Encode(context.Background(), sampleEvidence())
	if err == nil {
		t.Fatalf("Encode wrote %d bytes; the registry should have refused the incompatible schema", len(b))
	}
	if b != nil {
		t.Fatalf("Encode returned bytes with its error")
	}
	if !errors.Is(err, ErrSchemaRejected) || !errors.Is(err, ErrRegistry) || IsRetryable(err) {
		t.Fatalf("Encode error %v: want ErrSchemaRejected, ErrRegistry, not retryable", err)
	}
	for _, want := range []string{subject, "HTTP 409", "incompatible"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("Encode error %q does not mention %q", err, want)
		}
	}
	// The registry kept only the earlier version.
	var versions []int
	registryJSON(t, http.MethodGet, base, "/subjects/"+url.PathEscape(subject)+"/versions", nil, &versions)
	if !reflect.DeepEqual(versions, []int{1}) {
		t.Fatalf("subject versions %v, want [1]", versions)
	}
	t.Logf("refused: %v", err)
}
