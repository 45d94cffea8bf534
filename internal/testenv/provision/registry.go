package provision

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Schema registry: a real Confluent-compatible registry (Apicurio Registry) for the
// tests of the Confluent wire format. There is no fake kind: a test that asks for
// the registry fails when none can be had, whatever LARKLINE_TEST_REQUIRE_REAL says
// (the in-process fake of package schemas' unit tests is not offered here).
const (
	// EnvRegistryURL names an existing Confluent-compatible registry (its API base,
	// e.g. http://127.0.0.1:8081 or .../apis/ccompat/v7).
	EnvRegistryURL = "LARKLINE_TEST_SCHEMA_REGISTRY_URL"
	// EnvRegistryKind declares what EnvRegistryURL is (default external).
	EnvRegistryKind = "LARKLINE_TEST_SCHEMA_REGISTRY_KIND"
	// EnvRegistry forces a kind: external|jvm.
	EnvRegistry = "LARKLINE_TEST_SCHEMA_REGISTRY"
	// EnvRegistryJars is the build cache used by registry-jvm.sh.
	EnvRegistryJars = "LARKLINE_REGISTRY_JARS"

	registryScript       = "deploy/kafka/registry/registry-jvm.sh"
	registryCompatPath   = "/apis/ccompat/v7"
	registryReadyTimeout = 60 * time.Second
)

var registrySpec = spec{
	name:        "registry",
	envForce:    EnvRegistry,
	envProvided: EnvRegistryURL,
	envKind:     EnvRegistryKind,
	order:       []Kind{KindJVM},
	hint: "install Java 17+ (and Maven once, to build it) for the jvm registry, " +
		"or set " + EnvRegistryURL,
}

// StartRegistry selects and starts (or adopts) a schema registry as described
// above and waits until it answers GET /subjects. The Service's Endpoint is the
// Confluent-compatible API base URL.
func StartRegistry(ctx context.Context, o Options) (*Service, error) {
	p, err := registrySpec.plan(o)
	if err != nil {
		return nil, err
	}
	return registrySpec.start(ctx, o, p, map[Kind]starter{
		KindJVM: func(ctx context.Context, o Options) (*Service, error) {
			rp, err := StartRegistryProcess(ctx, o)
			if err != nil {
				return nil, err
			}
			return newService(registrySpec, KindJVM, rp.URL, rp.Close), nil
		},
	}, registryReady)
}

// registryReady waits until GET <endpoint>/subjects answers 200.
func registryReady(ctx context.Context, s *Service) error {
	return waitRegistry(ctx, s.Endpoint, registryReadyTimeout)
}

func waitRegistry(ctx context.Context, base string, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	client := &http.Client{Timeout: 5 * time.Second}
	url := strings.TrimRight(base, "/") + "/subjects"
	for {
		err := func() error {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				return err
			}
			resp, err := client.Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("GET %s: HTTP %d", url, resp.StatusCode)
			}
			return nil
		}()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("schema registry at %s did not answer within %s: %w", base, limit, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// RegistryProcess is a registry run by registry-jvm.sh on a fixed loopback port
// with its schemas in its own directory. Stop and Start restart it in place: the
// same URL, the same schemas and ids. It is safe for concurrent use.
type RegistryProcess struct {
	// URL is the Confluent-compatible API base, http://127.0.0.1:<port>/apis/ccompat/v7.
	URL string
	*scriptProc
}

// StartRegistryProcess builds the registry if needed (registry-jvm.sh fetch) and
// starts it in a fresh temporary directory on a free port.
func StartRegistryProcess(ctx context.Context, o Options) (*RegistryProcess, error) {
	var url string
	sp, err := startScriptProc(ctx, o, "registry", registryScript, EnvRegistryJars, 1, 1,
		func(_ string, ports []int) ([]string, func(context.Context) error, error) {
			url = "http://127.0.0.1:" + strconv.Itoa(ports[0]) + registryCompatPath
			return nil, func(ctx context.Context) error { return waitRegistry(ctx, url, registryReadyTimeout) }, nil
		})
	if err != nil {
		return nil, err
	}
	o.logger().Info("provision: registry-jvm.sh", "url", url)
	return &RegistryProcess{URL: url, scriptProc: sp}, nil
}
