package testenv

import (
	"context"
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
