package schemas

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestNewRegistryConfig(t *testing.T) {
	cases := []struct {
		name    string
		cfg     RegistryConfig
		wantErr string
	}{
		{"http", RegistryConfig{URL: "http://registry:8081"}, ""},
		{"https with prefix", RegistryConfig{URL: "https://registry.example/sr/"}, ""},
		{"credentials in url", RegistryConfig{URL: "https://key:secret@registry.example"}, ""},
		{"credentials twice", RegistryConfig{URL: "https://key:secret@registry.example", Username: "key"}, "both"},
		{"no scheme", RegistryConfig{URL: "registry:8081"}, "scheme"},
		{"ftp", RegistryConfig{URL: "ftp://registry"}, "scheme"},
		{"no host", RegistryConfig{URL: "http:///x"}, "no host"},
		{"query", RegistryConfig{URL: "http://registry?x=1"}, "query"},
		{"negative timeout", RegistryConfig{URL: "http://registry", Timeout: -time.Second}, "negative"},
		{"unparsable", RegistryConfig{URL: "http://[::1"}, "url"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewRegistry(tc.cfg)
			if tc.wantErr == "" && err != nil {
				t.Fatalf("unexpected error %v", err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestRegistryRegisterAndFetchAreCached(t *testing.T) {
	ctx := context.Background()
	fake, reg := startRegistry(t)
	schema := mustSchemaText(t, "checkpoint.v1.avsc")
	id, err := reg.Register(ctx, "larkline.checkpoints.v1-value", schema)
	if err != nil {
		t.Fatal(err)
	}
	again, err := reg.Register(ctx, "larkline.checkpoints.v1-value", schema)
	if err != nil || again != id {
		t.Fatalf("second register: %d %v, want %d", again, err, id)
	}
	if n := fake.count("POST subjects"); n != 1 {
		t.Fatalf("%d register requests, want 1", n)
	}
	if ct := fake.contentType("POST subjects"); ct != "application/vnd.schemaregistry.v1+json" {
		t.Fatalf("content type %q", ct)
	}
	got, err := reg.SchemaByID(ctx, id)
	if err != nil || got != schema {
		t.Fatalf("schema by registered id: %v", err)
	}
	if n := fake.count("GET ids"); n != 0 {
		t.Fatalf("%d fetches of a registered id, want 0", n)
	}

	other := fake.add("elsewhere-value", mustSchemaText(t, "workspace.v1.avsc"))
	for range 2 {
		if got, err := reg.SchemaByID(ctx, other); err != nil || !strings.Contains(got, "WorkspaceRecord") {
			t.Fatalf("schema by id: %v", err)
		}
	}
	if n := fake.count("GET ids"); n != 1 {
		t.Fatalf("%d fetches, want 1", n)
	}
}

func TestRegistryBasicAuthAndPrefix(t *testing.T) {
	ctx := context.Background()
	fake := newFakeRegistry()
	fake.username, fake.password = "key", "s3cret"
	srv := httptest.NewServer(http.StripPrefix("/sr", fake))
	t.Cleanup(srv.Close)
	schema := mustSchemaText(t, "workspace.v1.avsc")

	cases := []struct {
		name   string
		cfg    RegistryConfig
		status int
	}{
		{"fields", RegistryConfig{URL: srv.URL + "/sr", Username: "key", Password: "s3cret"}, 0},
		{"in url", RegistryConfig{URL: strings.Replace(srv.URL, "http://", "http://key:s3cret@", 1) + "/sr/"}, 0},
		{"wrong password", RegistryConfig{URL: srv.URL + "/sr", Username: "key", Password: "nope"}, http.StatusUnauthorized},
		{"none", RegistryConfig{URL: srv.URL + "/sr"}, http.StatusUnauthorized},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reg, err := NewRegistry(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			_, err = reg.Register(ctx, "larkline.workspaces.v1-value", schema)
			if tc.status == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var re *RegistryError
			if !errors.As(err, &re) || re.StatusCode != tc.status || IsRetryable(err) || !errors.Is(err, ErrRegistry) {
				t.Fatalf("error %v, want a non-retryable HTTP %d", err, tc.status)
			}
			if strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "nope") {
				t.Fatalf("error text carries the password: %v", err)
			}
		})
	}
}

func TestRegistryFailures(t *testing.T) {
	ctx := context.Background()
	schema := mustSchemaText(t, "workspace.v1.avsc")
	cases := []struct {
		name      string
		status    int
		retryable bool
	}{
		{"unavailable", http.StatusServiceUnavailable, true},
		{"internal error", http.StatusInternalServerError, true},
		{"too many requests", http.StatusTooManyRequests, true},
		{"request timeout", http.StatusRequestTimeout, true},
		{"incompatible schema", http.StatusConflict, false},
		{"forbidden", http.StatusForbidden, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fake, reg := startRegistry(t)
			fake.forceStatus("POST subjects", tc.status)
			_, err := reg.Register(ctx, "s-value", schema)
			var re *RegistryError
			if !errors.As(err, &re) || re.StatusCode != tc.status || re.Code != tc.status*100+1 || re.Message != "forced failure" {
				t.Fatalf("error %#v", err)
			}
			if IsRetryable(err) != tc.retryable || ReasonOf(err) != ReasonRegistry {
				t.Fatalf("IsRetryable(%v) = %v, reason %q", err, IsRetryable(err), ReasonOf(err))
			}
			// A failure is not cached: the registry recovers, the next call works.
			fake.forceStatus("POST subjects", 0)
			if _, err := reg.Register(ctx, "s-value", schema); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestRegistryUnknownID(t *testing.T) {
	ctx := context.Background()
	fake, reg := startRegistry(t)
	_, err := reg.SchemaByID(ctx, 12345)
	if !errors.Is(err, ErrUnknownSchema) || IsRetryable(err) {
		t.Fatalf("error %v, want ErrUnknownSchema", err)
	}
	// The id is not remembered as unknown: once registered it resolves.
	fake.add("x-value", mustSchemaText(t, "workspace.v1.avsc"))
	if _, err := reg.SchemaByID(ctx, 1); err != nil {
		t.Fatal(err)
	}

	// A 404 that is not the registry's "schema not found" (here: a wrong base path)
	// is a registry error, not an unknown schema.
	srv := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(srv.Close)
	wrong, err := NewRegistry(RegistryConfig{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	_, err = wrong.SchemaByID(ctx, 1)
	if errors.Is(err, ErrUnknownSchema) || !errors.Is(err, ErrRegistry) {
		t.Fatalf("error %v, want a registry error", err)
	}
}

func TestRegistryBadResponses(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name    string
		body    string
		maxBody int64
		want    error
		wantMsg string
	}{
		{"not json", "<html>", 0, ErrRegistry, "decode response"},
		{"no schema", `{"id":1}`, 0, ErrRegistry, "no schema"},
		{"protobuf", `{"schema":"syntax = \"proto3\";","schemaType":"PROTOBUF"}`, 0, ErrIncompatibleSchema, "PROTOBUF"},
		{"too long", `{"schema":"` + strings.Repeat("x", 100) + `"}`, 64, ErrRegistry, "longer than 64 bytes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				_, _ = w.Write([]byte(tc.body))
			}))
			t.Cleanup(srv.Close)
			reg, err := NewRegistry(RegistryConfig{URL: srv.URL, MaxResponseBytes: tc.maxBody})
			if err != nil {
				t.Fatal(err)
			}
			_, err = reg.SchemaByID(ctx, 1)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.wantMsg) || IsRetryable(err) {
				t.Fatalf("error %v, want %v containing %q", err, tc.want, tc.wantMsg)
			}
		})
	}
}

func TestRegistryTransportFailures(t *testing.T) {
	t.Run("per-request timeout is retryable", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
			<-r.Context().Done() // never answers
		}))
		t.Cleanup(srv.Close)
		reg, err := NewRegistry(RegistryConfig{URL: srv.URL, Timeout: 20 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		_, err = reg.SchemaByID(context.Background(), 1)
		if !errors.Is(err, context.DeadlineExceeded) || !IsRetryable(err) {
			t.Fatalf("error %v, want a retryable deadline", err)
		}
	})
	t.Run("cancelled caller is not retryable", func(t *testing.T) {
		_, reg := startRegistry(t)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := reg.SchemaByID(ctx, 1)
		if !errors.Is(err, context.Canceled) || IsRetryable(err) {
			t.Fatalf("error %v, want a non-retryable cancellation", err)
		}
	})
	t.Run("connection refused is retryable", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		url := srv.URL
		srv.Close()
		reg, err := NewRegistry(RegistryConfig{URL: url})
		if err != nil {
			t.Fatal(err)
		}
		_, err = reg.Register(context.Background(), "s-value", `"string"`)
		if !IsRetryable(err) {
			t.Fatalf("error %v, want retryable", err)
		}
	})
}

func TestRegistryCacheIsBounded(t *testing.T) {
	ctx := context.Background()
	fake := newFakeRegistry()
	reg, err := NewRegistry(RegistryConfig{URL: "http://registry.invalid", Transport: handlerTransport{fake}, MaxCachedSchemas: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"workspace.v1.avsc", "checkpoint.v1.avsc", "deadletter.v1.avsc", "evidence.v1.avsc"} {
		id := fake.add("s-value", mustSchemaText(t, f))
		if _, err := reg.SchemaByID(ctx, id); err != nil {
			t.Fatal(err)
		}
		if _, err := reg.Register(ctx, "t-value", mustSchemaText(t, f)); err != nil {
			t.Fatal(err)
		}
	}
	reg.mu.Lock()
	defer reg.mu.Unlock()
	if len(reg.byID) > 2 || len(reg.registered) > 2 {
		t.Fatalf("caches hold %d and %d entries, bound 2", len(reg.byID), len(reg.registered))
	}
}

// TestCodecRegistryOutage: a registry outage makes Encode and Decode fail with a
// retryable error, and both work once the registry is back.
func TestCodecRegistryOutage(t *testing.T) {
	ctx := context.Background()
	fake, reg := startRegistry(t)
	writer, err := NewEvidenceCodec(WithRegistry(reg))
	if err != nil {
		t.Fatal(err)
	}
	fake.forceStatus("POST subjects", http.StatusServiceUnavailable)
	if _, err := writer.Encode(ctx, sampleEvidence()); !IsRetryable(err) {
		t.Fatalf("encode during outage: %v, want retryable", err)
	}
	fake.forceStatus("POST subjects", 0)
	b, err := writer.Encode(ctx, sampleEvidence())
	if err != nil {
		t.Fatal(err)
	}

	// A reader whose registry answers 502.
	fake2, reg2 := inProcessRegistry(t)
	fake2.forceStatus("GET ids", http.StatusBadGateway)
	reader, err := NewEvidenceCodec(WithRegistry(reg2))
	if err != nil {
		t.Fatal(err)
	}
	_, err = reader.Decode(ctx, b)
	var de *DecodeError
	if !IsRetryable(err) || !errors.As(err, &de) || de.Format != Confluent || IsUnknownSchema(err) {
		t.Fatalf("decode during outage: %v, want a retryable DecodeError", err)
	}
	// Back up, with the schema the writer registered.
	fake2.forceStatus("GET ids", 0)
	fake2.add("x-value", fake.schema(1))
	if _, err := reader.Decode(ctx, b); err != nil {
		t.Fatalf("decode after the outage: %v", err)
	}
}
