package testenv

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/larkline/larkline/internal/testenv/provision"
)

// registryService is the binary's shared schema registry, started on first use.
var registryService = newLazyService(provision.StartRegistry)

// SchemaRegistryURL returns the Confluent-compatible API base URL of the binary's
// shared schema registry (a real Apicurio Registry run by
// deploy/kafka/registry/registry-jvm.sh, or LARKLINE_TEST_SCHEMA_REGISTRY_URL),
// starting it on first use. Tests share it and isolate themselves by subject:
// subjects are <topic>-value and NewTopic names are unique. It fails the test if
// no registry can be had; there is no fake to fall back to.
func SchemaRegistryURL(t testing.TB) string {
	t.Helper()
	svc, err := registryService.get()
	if err != nil {
		t.Fatalf("testenv: schema registry: %v", err)
	}
	return svc.Endpoint
}

// SchemaRegistry is a registry of one test's own, which the test may stop and
// start again (same URL, same schemas and ids).
type SchemaRegistry struct {
	// URL is the Confluent-compatible API base URL.
	URL string
	p   *provision.RegistryProcess
}

// NewSchemaRegistry starts a registry for this test alone (a few seconds once
// built) and closes it at cleanup. It always runs the jvm kind, since a test that
// restarts the registry cannot share it.
func NewSchemaRegistry(t testing.TB) *SchemaRegistry {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	p, err := provision.StartRegistryProcess(ctx, options())
	if err != nil {
		t.Fatalf("testenv: starting a schema registry: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
		defer cancel()
		if err := p.Close(ctx); err != nil {
			t.Errorf("testenv: closing the schema registry: %v", err)
		}
	})
	return &SchemaRegistry{URL: p.URL, p: p}
}

// Stop stops the registry; its URL refuses connections until Start.
func (r *SchemaRegistry) Stop(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	if err := r.p.Stop(ctx); err != nil {
		t.Fatalf("testenv: stopping the schema registry: %v", err)
	}
}

// Start starts a stopped registry again and waits until it answers.
func (r *SchemaRegistry) Start(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := r.p.Start(ctx); err != nil {
		t.Fatalf("testenv: starting the schema registry again: %v", err)
	}
}

// RegistryGateway puts authentication in front of the registry at target and
// returns the gateway's URL and a count of the requests it refused. Apicurio
// Registry 2.4.2 authenticates only through an OIDC provider (its basic auth is
// OAuth client credentials exchanged at a Keycloak token endpoint), which the test
// environment does not have; a managed registry is reached the same way, through a
// gateway. A request with neither the basic-auth credentials nor the bearer token
// gets 401 in the registry's error format; an accepted one reaches the registry
// without its Authorization header. The gateway closes at cleanup.
func RegistryGateway(t testing.TB, target, user, pass, token string) (string, *atomic.Int64) {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatalf("testenv: registry gateway: %v", err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	refused := new(atomic.Int64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ru, rp, basic := r.BasicAuth()
		if !(basic && ru == user && rp == pass) && r.Header.Get("Authorization") != "Bearer "+token {
			refused.Add(1)
			w.Header().Set("Content-Type", "application/vnd.schemaregistry.v1+json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error_code":401,"message":"Unauthorized"}`))
			return
		}
		r.Header.Del("Authorization")
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, refused
}
