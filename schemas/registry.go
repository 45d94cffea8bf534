package schemas

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Registry defaults.
const (
	DefaultRegistryTimeout          = 10 * time.Second
	DefaultRegistryMaxResponseBytes = 4 << 20
	DefaultRegistryMaxCachedSchemas = 1024
	registryContentType             = "application/vnd.schemaregistry.v1+json"
	registryAccept                  = "application/vnd.schemaregistry.v1+json, application/vnd.schemaregistry+json, application/json"
	maxRegistryMessage              = 256
	maxSubjectLen                   = 255
	errorCodeSchemaNotFound         = 40403
)

// RegistryConfig configures a Confluent-compatible schema registry client.
type RegistryConfig struct {
	// URL is the registry base URL, e.g. http://registry:8081 (a path prefix is
	// kept). Credentials in the URL are moved to Username and Password.
	URL string
	// Username and Password enable HTTP basic auth when Username is set.
	Username string
	Password string
	// Timeout bounds each request; 0 means DefaultRegistryTimeout.
	Timeout time.Duration
	// Transport carries the requests; nil means http.DefaultTransport.
	Transport http.RoundTripper
	// MaxResponseBytes bounds a response body; 0 means DefaultRegistryMaxResponseBytes.
	MaxResponseBytes int64
	// MaxCachedSchemas bounds each of the two caches (schemas by id, ids by subject
	// and schema); 0 means DefaultRegistryMaxCachedSchemas. A full cache drops an
	// arbitrary entry, which costs one more request later.
	MaxCachedSchemas int
}

// Registry is a small client of the Confluent schema registry REST API: it
// registers a schema under a subject and fetches a schema by id, and caches both
// answers (a registry never changes the schema behind an id). It is safe for
// concurrent use.
type Registry struct {
	base     string
	username string
	password string
	timeout  time.Duration
	maxBody  int64
	maxCache int
	client   *http.Client

	mu         sync.Mutex
	byID       map[uint32]string
	registered map[registration]uint32
}

type registration struct{ subject, schema string }

// NewRegistry validates cfg and returns a client. It does not contact the registry.
func NewRegistry(cfg RegistryConfig) (*Registry, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("schema registry url: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("schema registry url: scheme must be http or https")
	}
	if u.Host == "" {
		return nil, fmt.Errorf("schema registry url: no host")
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("schema registry url: must not have a query or fragment")
	}
	if u.User != nil {
		if cfg.Username != "" {
			return nil, fmt.Errorf("schema registry url: credentials both in the url and in Username")
		}
		cfg.Username = u.User.Username()
		cfg.Password, _ = u.User.Password()
		u.User = nil
	}
	if cfg.Timeout < 0 || cfg.MaxResponseBytes < 0 || cfg.MaxCachedSchemas < 0 {
		return nil, fmt.Errorf("schema registry: Timeout, MaxResponseBytes and MaxCachedSchemas must not be negative")
	}
	r := &Registry{
		base:       strings.TrimRight(u.String(), "/"),
		username:   cfg.Username,
		password:   cfg.Password,
		timeout:    cfg.Timeout,
		maxBody:    cfg.MaxResponseBytes,
		maxCache:   cfg.MaxCachedSchemas,
		client:     &http.Client{Transport: cfg.Transport},
		byID:       map[uint32]string{},
		registered: map[registration]uint32{},
	}
	if r.timeout == 0 {
		r.timeout = DefaultRegistryTimeout
	}
	if r.maxBody == 0 {
		r.maxBody = DefaultRegistryMaxResponseBytes
	}
	if r.maxCache == 0 {
		r.maxCache = DefaultRegistryMaxCachedSchemas
	}
	if r.client.Transport == nil {
		r.client.Transport = http.DefaultTransport
	}
	// A registry never redirects API calls; following one could leak credentials.
	r.client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return r, nil
}

// Register registers schema under subject (POST /subjects/{subject}/versions) and
// returns its id. Registering an already registered schema returns the existing id;
// the answer is cached, so a second call makes no request.
func (r *Registry) Register(ctx context.Context, subject, schema string) (uint32, error) {
	if subject == "" || len(subject) > maxSubjectLen {
		return 0, fmt.Errorf("schema registry: subject must be 1..%d bytes", maxSubjectLen)
	}
	key := registration{subject, schema}
	r.mu.Lock()
	id, ok := r.registered[key]
	r.mu.Unlock()
	if ok {
		return id, nil
	}
	body, err := json.Marshal(struct {
		Schema string `json:"schema"`
	}{schema})
	if err != nil {
		return 0, fmt.Errorf("schema registry: encode request: %w", err)
	}
	op := "register subject " + subject
	var resp struct {
		ID *int64 `json:"id"`
	}
	if _, err := r.do(ctx, op, http.MethodPost, "/subjects/"+url.PathEscape(subject)+"/versions", body, &resp); err != nil {
		if re := (*RegistryError)(nil); errors.As(err, &re) {
			re.register = true // a 409 or 422 is the registry refusing the schema
		}
		return 0, err
	}
	if resp.ID == nil || *resp.ID < 0 || *resp.ID > math.MaxUint32 {
		return 0, &RegistryError{Op: op, StatusCode: http.StatusOK, Message: "response has no valid id"}
	}
	id = uint32(*resp.ID)
	r.mu.Lock()
	putBounded(r.registered, key, id, r.maxCache)
	putBounded(r.byID, id, schema, r.maxCache)
	r.mu.Unlock()
	return id, nil
}

// SchemaByID fetches the schema text with the given id (GET /schemas/ids/{id}). An
// id the registry does not know yields an error wrapping ErrUnknownSchema; a schema
// that is not Avro yields one wrapping ErrIncompatibleSchema.
func (r *Registry) SchemaByID(ctx context.Context, id uint32) (string, error) {
	r.mu.Lock()
	s, ok := r.byID[id]
	r.mu.Unlock()
	if ok {
		return s, nil
	}
	op := "fetch schema id " + strconv.FormatUint(uint64(id), 10)
	var resp struct {
		Schema     *string `json:"schema"`
		SchemaType string  `json:"schemaType"`
	}
	status, err := r.do(ctx, op, http.MethodGet, "/schemas/ids/"+strconv.FormatUint(uint64(id), 10), nil, &resp)
	if re := (*RegistryError)(nil); errors.As(err, &re) && re.StatusCode == http.StatusNotFound && re.Code == errorCodeSchemaNotFound {
		// Only the registry's own "schema not found" answer means the id is unknown;
		// a bare 404 (a wrong base path, a proxy) stays a registry error.
		return "", fmt.Errorf("%w: schema registry has no schema with id %d", ErrUnknownSchema, id)
	}
	if err != nil {
		return "", err
	}
	if resp.Schema == nil {
		return "", &RegistryError{Op: op, StatusCode: status, Message: "response has no schema"}
	}
	if resp.SchemaType != "" && resp.SchemaType != "AVRO" {
		return "", fmt.Errorf("%w: schema id %d is a %.32s schema, not AVRO", ErrIncompatibleSchema, id, resp.SchemaType)
	}
	r.mu.Lock()
	putBounded(r.byID, id, *resp.Schema, r.maxCache)
	r.mu.Unlock()
	return *resp.Schema, nil
}

// do sends one request and decodes a 2xx JSON answer into out. It returns the HTTP
// status (0 when no response arrived).
func (r *Registry) do(ctx context.Context, op, method, path string, body []byte, out any) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, r.base+path, rd)
	if err != nil {
		return 0, &RegistryError{Op: op, Err: err}
	}
	req.Header.Set("Accept", registryAccept)
	if body != nil {
		req.Header.Set("Content-Type", registryContentType)
	}
	if r.username != "" {
		req.SetBasicAuth(r.username, r.password)
	}
	resp, err := r.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL adds nothing to op and may be long
		}
		return 0, &RegistryError{Op: op, Err: err}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, r.maxBody+1))
	if err != nil {
		return resp.StatusCode, &RegistryError{Op: op, StatusCode: resp.StatusCode, Err: fmt.Errorf("read response: %w", err)}
	}
	if int64(len(data)) > r.maxBody {
		return resp.StatusCode, &RegistryError{Op: op, StatusCode: resp.StatusCode, Message: fmt.Sprintf("response longer than %d bytes", r.maxBody)}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		re := &RegistryError{Op: op, StatusCode: resp.StatusCode}
		var eb struct {
			Code    int    `json:"error_code"`
			Message string `json:"message"`
		}
		if json.Unmarshal(data, &eb) == nil {
			re.Code = eb.Code
			re.Message = truncateUTF8(eb.Message, maxRegistryMessage)
		}
		return resp.StatusCode, re
	}
	if err := json.Unmarshal(data, out); err != nil {
		return resp.StatusCode, &RegistryError{Op: op, StatusCode: resp.StatusCode, Err: fmt.Errorf("decode response: %w", err)}
	}
	return resp.StatusCode, nil
}

// putBounded stores k→v, first dropping an arbitrary entry when m holds max entries.
func putBounded[K comparable, V any](m map[K]V, k K, v V, max int) {
	if _, ok := m[k]; !ok && len(m) >= max {
		for old := range m {
			delete(m, old)
			break
		}
	}
	m[k] = v
}
