package schemas

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
)

// Registry defaults.
const (
	DefaultRegistryTimeout          = 10 * time.Second
	DefaultRegistryMaxCachedSchemas = 1024
	maxRegistryMessage              = 256
	maxSubjectLen                   = 255
)

// ErrInvalidRegistryOptions: RegistryOptions.Check refused the options.
var ErrInvalidRegistryOptions = errors.New("invalid schema registry options")

// RegistryOptions configures the schema registry client (franz-go's sr.Client).
type RegistryOptions struct {
	// URL is the registry base URL (a path prefix is kept); required, without
	// credentials, query or fragment.
	URL string
	// Username and Password: basic auth. BearerToken: exclusive with Username.
	Username, Password, BearerToken string
	// CAFile, CertFile and KeyFile (PEM; the last two together, for mTLS) and
	// ServerName configure TLS; https only.
	CAFile, CertFile, KeyFile, ServerName string
	// Timeout bounds each request; 0 means DefaultRegistryTimeout.
	Timeout time.Duration
	// AutoRegister registers a codec's schema on first use; when false the codec
	// only looks it up (ErrSchemaNotRegistered when missing).
	AutoRegister bool
	// Transport carries the requests (tests); nil means http.DefaultTransport's clone.
	Transport http.RoundTripper
}

// RegistryProblem is one field of RegistryOptions that breaks the client's rules.
type RegistryProblem struct {
	Field   string
	Value   any // nil when the value is a secret or absent
	Message string
}

// RegistryOptionsError lists every problem Check found; it matches
// ErrInvalidRegistryOptions. The configuration layer maps the fields onto keys.
type RegistryOptionsError struct{ Problems []RegistryProblem }

func (e *RegistryOptionsError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		if p.Value == nil {
			parts[i] = p.Field + ": " + p.Message
		} else {
			parts[i] = fmt.Sprintf("%s %v: %s", p.Field, p.Value, p.Message)
		}
	}
	return ErrInvalidRegistryOptions.Error() + ": " + strings.Join(parts, "; ")
}

func (e *RegistryOptionsError) Unwrap() error { return ErrInvalidRegistryOptions }

type registryProblems []RegistryProblem

func (p *registryProblems) Add(field string, value any, format string, args ...any) {
	*p = append(*p, RegistryProblem{Field: field, Value: value, Message: fmt.Sprintf(format, args...)})
}

// Check reports every field that breaks the client's rules as a
// *RegistryOptionsError, or nil. It does no I/O.
func (o RegistryOptions) Check() error {
	bad := new(registryProblems)
	u, err := url.Parse(o.URL)
	switch {
	case o.URL == "":
		bad.Add("URL", o.URL, "is required")
	case err != nil:
		bad.Add("URL", o.URL, "does not parse: %v", err)
	case u.Scheme != "http" && u.Scheme != "https":
		bad.Add("URL", o.URL, "must be an http:// or https:// URL")
	case u.Host == "":
		bad.Add("URL", o.URL, "has no host")
	case u.User != nil:
		bad.Add("URL", "[REDACTED]", "must not carry credentials: set the username and password")
	case u.RawQuery != "" || u.Fragment != "":
		bad.Add("URL", o.URL, "must not have a query or fragment")
	}
	if o.Password != "" && o.Username == "" {
		bad.Add("Password", nil, "is set without a username")
	}
	if o.BearerToken != "" && o.Username != "" {
		bad.Add("BearerToken", nil, "is exclusive with basic auth (username)")
	}
	if (o.CertFile == "") != (o.KeyFile == "") {
		bad.Add("CertFile", o.CertFile, "and the key file must be set together")
	}
	if err == nil && u.Scheme == "http" {
		for _, f := range []struct{ field, v string }{{"CAFile", o.CAFile}, {"CertFile", o.CertFile}, {"KeyFile", o.KeyFile}, {"ServerName", o.ServerName}} {
			if f.v != "" {
				bad.Add(f.field, f.v, "is set but the registry URL is http://, not https://")
			}
		}
	}
	if o.Timeout < 0 {
		bad.Add("Timeout", o.Timeout, "must not be negative")
	}
	if len(*bad) == 0 {
		return nil
	}
	return &RegistryOptionsError{Problems: *bad}
}

// Registry is the schema registry as the codecs use it (each codec caches the
// schemas it met by id). It is safe for concurrent use.
type Registry struct {
	cl           *sr.Client
	autoRegister bool
}

// NewRegistry checks o, loads its TLS files and returns a client; no I/O to the registry.
func NewRegistry(o RegistryOptions) (*Registry, error) {
	if err := o.Check(); err != nil {
		return nil, fmt.Errorf("schema registry: %w", err)
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultRegistryTimeout
	}
	tr := o.Transport
	if tr == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		tc, err := registryTLS(o)
		if err != nil {
			return nil, fmt.Errorf("schema registry: %w", err)
		}
		t.TLSClientConfig = tc
		tr = t
	}
	// A registry never redirects API calls; following one could leak credentials.
	hc := &http.Client{Transport: tr, Timeout: o.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	copts := []sr.ClientOpt{sr.URLs(o.URL), sr.HTTPClient(hc), sr.UserAgent("larkline")}
	if o.Username != "" {
		copts = append(copts, sr.BasicAuth(o.Username, o.Password))
	}
	if o.BearerToken != "" {
		copts = append(copts, sr.BearerToken(o.BearerToken))
	}
	cl, err := sr.NewClient(copts...)
	if err != nil {
		return nil, fmt.Errorf("schema registry: %w", err)
	}
	return &Registry{cl: cl, autoRegister: o.AutoRegister}, nil
}

func registryTLS(o RegistryOptions) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: o.ServerName}
	if o.CAFile != "" {
		pem, err := os.ReadFile(o.CAFile)
		if err != nil {
			return nil, fmt.Errorf("%w: ca file: %w", ErrInvalidRegistryOptions, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%w: ca file %s: no PEM certificate", ErrInvalidRegistryOptions, o.CAFile)
		}
		tc.RootCAs = pool
	}
	if o.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("%w: client certificate: %w", ErrInvalidRegistryOptions, err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// AutoRegister reports whether codecs register their schema on first use.
func (r *Registry) AutoRegister() bool { return r.autoRegister }

func avroSchema(schema string) sr.Schema { return sr.Schema{Schema: schema, Type: sr.TypeAvro} }

// Register registers schema under subject and returns its id (the existing id when
// registered already). A refusal (409, 422) wraps ErrSchemaRejected.
func (r *Registry) Register(ctx context.Context, subject, schema string) (uint32, error) {
	if subject == "" || len(subject) > maxSubjectLen {
		return 0, fmt.Errorf("schema registry: subject must be 1..%d bytes", maxSubjectLen)
	}
	id, err := r.cl.RegisterSchema(ctx, subject, avroSchema(schema), -1, -1)
	if err != nil {
		return 0, toRegistryError("register subject "+subject, err, true)
	}
	return checkID(id)
}

// Lookup returns the id of schema under subject without registering it; a schema
// the subject does not hold wraps ErrSchemaNotRegistered.
func (r *Registry) Lookup(ctx context.Context, subject, schema string) (uint32, error) {
	ss, err := r.cl.LookupSchema(ctx, subject, avroSchema(schema))
	if err != nil {
		re := toRegistryError("look up schema under subject "+subject, err, false)
		if re.StatusCode == http.StatusNotFound {
			return 0, fmt.Errorf("%w: subject %s does not hold this schema (register it with `larkline schemas register`, or set schemas.autoRegister): %w",
				ErrSchemaNotRegistered, subject, re)
		}
		return 0, re
	}
	return checkID(ss.ID)
}

// Compatible asks the registry whether schema may be subject's next version: nil
// when it may (or the subject is new), else ErrIncompatibleChange with the reasons.
func (r *Registry) Compatible(ctx context.Context, subject, schema string) error {
	res, err := r.cl.CheckCompatibility(sr.WithParams(ctx, sr.Verbose), subject, -1, avroSchema(schema))
	if err != nil {
		re := toRegistryError("check compatibility under subject "+subject, err, false)
		if re.StatusCode == http.StatusNotFound {
			return nil // no version yet: anything is compatible
		}
		return re
	}
	if !res.Is {
		why := strings.Join(res.Messages, "; ")
		if why == "" {
			why = "the registry gave no reason"
		}
		level := "its"
		if cr := r.cl.Compatibility(sr.WithParams(ctx, sr.DefaultToGlobal), subject); len(cr) == 1 && cr[0].Err == nil {
			level = "its " + cr[0].Level.String()
		}
		return fmt.Errorf("%w: subject %s under %s compatibility rule: %.512s", ErrIncompatibleChange, subject, level, why)
	}
	return nil
}

func checkID(id int) (uint32, error) {
	if id < 0 || int64(id) > int64(^uint32(0)) {
		return 0, &RegistryError{Op: "register", StatusCode: http.StatusOK, Message: "response has no valid id"}
	}
	return uint32(id), nil
}

// SchemaByID fetches the schema text of id: ErrUnknownSchema when the registry
// does not know it, ErrIncompatibleSchema when it is not Avro.
func (r *Registry) SchemaByID(ctx context.Context, id uint32) (string, error) {
	got, err := r.cl.SchemaByID(ctx, int(id))
	if err != nil {
		re := toRegistryError("fetch schema id "+strconv.FormatUint(uint64(id), 10), err, false)
		// Only the registry's own "schema not found" means unknown; a bare 404 (a
		// wrong base path, a proxy) stays a registry error.
		if re.StatusCode == http.StatusNotFound && re.Code == sr.ErrSchemaNotFound.Code {
			return "", fmt.Errorf("%w: schema registry has no schema with id %d", ErrUnknownSchema, id)
		}
		return "", re
	}
	if got.Type != sr.TypeAvro {
		return "", fmt.Errorf("%w: schema id %d is a %s schema, not AVRO", ErrIncompatibleSchema, id, got.Type)
	}
	return got.Schema, nil
}

// toRegistryError turns an error of sr.Client into a *RegistryError.
func toRegistryError(op string, err error, register bool) *RegistryError {
	re := &RegistryError{Op: op, register: register}
	var se *sr.ResponseError
	if errors.As(err, &se) {
		re.StatusCode, re.Code = se.StatusCode, se.ErrorCode
		re.Message = truncateUTF8(se.Message, maxRegistryMessage)
		return re
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // the URL adds nothing to op and may be long
	}
	re.Err = err
	return re
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
