package schemas

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/larkline/larkline/internal/logtest"
	"github.com/larkline/larkline/internal/testenv"
)

func TestRegistryOptionsCheck(t *testing.T) {
	cases := []struct {
		name    string
		o       RegistryOptions
		wantErr string
	}{
		{"http", RegistryOptions{URL: "http://registry:8081"}, ""},
		{"https with prefix and mTLS", RegistryOptions{URL: "https://registry.example/sr/", CAFile: "ca.pem", CertFile: "c.pem", KeyFile: "k.pem", ServerName: "sr"}, ""},
		{"basic auth", RegistryOptions{URL: "https://registry", Username: "u", Password: "p"}, ""},
		{"bearer", RegistryOptions{URL: "https://registry", BearerToken: "t"}, ""},
		{"missing", RegistryOptions{}, "is required"},
		{"credentials in url", RegistryOptions{URL: "https://key:secret@registry.example"}, "must not carry credentials"},
		{"no scheme", RegistryOptions{URL: "registry:8081"}, "http:// or https://"},
		{"ftp", RegistryOptions{URL: "ftp://registry"}, "http:// or https://"},
		{"no host", RegistryOptions{URL: "http:///x"}, "no host"},
		{"query", RegistryOptions{URL: "http://registry?x=1"}, "query"},
		{"negative timeout", RegistryOptions{URL: "http://registry", Timeout: -time.Second}, "Timeout"},
		{"unparsable", RegistryOptions{URL: "http://[::1"}, "does not parse"},
		{"password alone", RegistryOptions{URL: "http://r", Password: "p"}, "Password"},
		{"bearer and basic", RegistryOptions{URL: "http://r", Username: "u", BearerToken: "t"}, "exclusive"},
		{"cert without key", RegistryOptions{URL: "https://r", CertFile: "c.pem"}, "together"},
		{"tls files on http", RegistryOptions{URL: "http://r", CAFile: "ca.pem"}, "not https"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.Check()
			if tc.wantErr == "" && err != nil {
				t.Fatalf("unexpected error %v", err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, ErrInvalidRegistryOptions)) {
				t.Fatalf("error %v, want ErrInvalidRegistryOptions containing %q", err, tc.wantErr)
			}
			if strings.Contains(fmt.Sprint(err), "secret") {
				t.Fatalf("error carries the password: %v", err)
			}
			if _, nerr := NewRegistry(tc.o); (nerr == nil) != (err == nil) && tc.o.CAFile == "" {
				t.Fatalf("NewRegistry error %v, Check error %v", nerr, err)
			}
		})
	}
}

func TestRegistryRegisterAndFetch(t *testing.T) {
	ctx := context.Background()
	fake, reg := startRegistry(t)
	schema := mustSchemaText(t, "workspace.v1.avsc")
	id, err := reg.Register(ctx, "larkline.workspaces.v1-value", schema)
	if err != nil {
		t.Fatal(err)
	}
	if ct := fake.contentType("POST subjects"); ct != "application/vnd.schemaregistry.v1+json" {
		t.Fatalf("content type %q", ct)
	}
	if got, err := reg.SchemaByID(ctx, id); err != nil || got != schema {
		t.Fatalf("schema by registered id: %v", err)
	}
	other := fake.add("elsewhere-value", mustSchemaText(t, "deadletter.v1.avsc"))
	if got, err := reg.SchemaByID(ctx, other); err != nil || !strings.Contains(got, "DeadLetter") {
		t.Fatalf("schema by id: %v", err)
	}
}

func TestRegistryAuthAndPrefix(t *testing.T) {
	ctx := context.Background()
	fake := newFakeRegistry()
	fake.username, fake.password, fake.token = "key", "s3cret", "t0ken"
	srv := httptest.NewServer(http.StripPrefix("/sr", fake))
	t.Cleanup(srv.Close)
	schema := mustSchemaText(t, "workspace.v1.avsc")

	cases := []struct {
		name   string
		o      RegistryOptions
		status int
	}{
		{"basic", RegistryOptions{URL: srv.URL + "/sr", Username: "key", Password: "s3cret"}, 0},
		{"bearer", RegistryOptions{URL: srv.URL + "/sr/", BearerToken: "t0ken"}, 0},
		{"wrong password", RegistryOptions{URL: srv.URL + "/sr", Username: "key", Password: "nope"}, http.StatusUnauthorized},
		{"wrong token", RegistryOptions{URL: srv.URL + "/sr", BearerToken: "nope"}, http.StatusUnauthorized},
		{"none", RegistryOptions{URL: srv.URL + "/sr"}, http.StatusUnauthorized},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reg, err := NewRegistry(tc.o)
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
	wrong, err := NewRegistry(RegistryOptions{URL: srv.URL, AutoRegister: true})
	if err != nil {
		t.Fatal(err)
	}
	_, err = wrong.SchemaByID(ctx, 1)
	if errors.Is(err, ErrUnknownSchema) || !errors.Is(err, ErrRegistry) {
		t.Fatalf("error %v, want a registry error", err)
	}
}

func TestRegistryNotAvro(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"schema":"syntax = \"proto3\";","schemaType":"PROTOBUF"}`))
	}))
	t.Cleanup(srv.Close)
	reg, err := NewRegistry(RegistryOptions{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	_, err = reg.SchemaByID(context.Background(), 1)
	if !errors.Is(err, ErrIncompatibleSchema) || !strings.Contains(err.Error(), "PROTOBUF") || IsRetryable(err) {
		t.Fatalf("error %v, want ErrIncompatibleSchema naming PROTOBUF", err)
	}
}

func TestRegistryTransportFailures(t *testing.T) {
	t.Run("per-request timeout is retryable", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
			<-r.Context().Done() // never answers
		}))
		t.Cleanup(srv.Close)
		reg, err := NewRegistry(RegistryOptions{URL: srv.URL, Timeout: 20 * time.Millisecond})
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
		reg, err := NewRegistry(RegistryOptions{URL: url, AutoRegister: true})
		if err != nil {
			t.Fatal(err)
		}
		_, err = reg.Register(context.Background(), "s-value", `"string"`)
		if !IsRetryable(err) {
			t.Fatalf("error %v, want retryable", err)
		}
	})
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

// TestRegistryMutualTLS: an https registry whose certificate names only
// registry.internal and that requires a client certificate. With the CA, the client
// certificate and the server name larkline registers; without the server name it
// refuses the certificate; without a client certificate the server refuses it.
func TestRegistryMutualTLS(t *testing.T) {
	pki := testenv.NewPKI(t, "registry.internal")
	fake := newFakeRegistry()
	srv := httptest.NewUnstartedServer(fake)
	srv.TLS = pki.ServerTLS(t, true)
	// The server's side of a refused handshake: under TLS 1.3 the client learns of the
	// refusal only if it reads the alert before its request write fails, so the
	// client's error is "certificate required" or a broken pipe; the server's log
	// always names the cause.
	serverLog := &signalBuffer{written: make(chan struct{}, 1)}
	srv.Config.ErrorLog = log.New(serverLog, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	full := RegistryOptions{URL: srv.URL, CAFile: pki.CAFile, CertFile: pki.ClientCertFile, KeyFile: pki.ClientKeyFile,
		ServerName: "registry.internal", AutoRegister: true}
	noName, noCert := full, full
	noName.ServerName = ""
	noCert.CertFile, noCert.KeyFile = "", ""
	for _, tc := range []struct {
		name       string
		o          RegistryOptions
		want       string // in the client's error; "" for none
		wantServer string // in the server's log
	}{
		{"mutual TLS with the server name", full, "", ""},
		{"no server name", noName, "doesn't contain any IP SANs", ""},
		{"no client certificate", noCert, "", "client didn't provide a certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg, err := NewRegistry(tc.o)
			if err != nil {
				t.Fatal(err)
			}
			_, err = reg.Register(context.Background(), "tls-value", mustSchemaText(t, "workspace.v1.avsc"))
			switch {
			case tc.want == "" && tc.wantServer == "" && err != nil:
				t.Fatal(err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			case tc.wantServer != "" && err == nil:
				t.Fatal("registered without a client certificate")
			}
			if tc.wantServer != "" {
				// the server logs the handshake error on its own goroutine
				deadline := time.After(10 * time.Second)
				for !strings.Contains(serverLog.String(), tc.wantServer) {
					select {
					case <-serverLog.written:
					case <-deadline:
						t.Fatalf("server log %q does not say %q (client error: %v)", serverLog.String(), tc.wantServer, err)
					}
				}
			}
		})
	}
}

// signalBuffer is the server's log; written holds a signal after a write until the
// test takes it (only this test waits on a write, so the signal stays here).
type signalBuffer struct {
	logtest.Buffer
	written chan struct{}
}

func (l *signalBuffer) Write(p []byte) (int, error) {
	n, err := l.Buffer.Write(p)
	select {
	case l.written <- struct{}{}:
	default:
	}
	return n, err
}
