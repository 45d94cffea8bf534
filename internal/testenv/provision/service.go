package provision

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"sync"
)

// Service is a running (or environment-provided) Kafka or PostgreSQL.
type Service struct {
	// Name is "kafka" or "postgres".
	Name string
	// Kind tells how the service was provided; for an environment-provided
	// service it is the kind the environment declares (see EnvKafkaKind).
	Kind Kind
	// Endpoint is, for Kafka, the comma-separated host:port bootstrap list and,
	// for PostgreSQL, a DSN for a superuser on the maintenance database.
	Endpoint string
	// Provided is true when the environment named the service: Close leaves it running.
	Provided bool

	envEndpoint, envKind string
	stop                 func(context.Context) error
	closeOnce            sync.Once
	closeErr             error
}

func newService(sp spec, kind Kind, endpoint string, stop func(context.Context) error) *Service {
	return &Service{
		Name:        sp.name,
		Kind:        kind,
		Endpoint:    endpoint,
		envEndpoint: sp.envProvided,
		envKind:     sp.envKind,
		stop:        stop,
	}
}

// Brokers splits a Kafka endpoint into its host:port entries.
func (s *Service) Brokers() []string {
	return splitBrokers(s.Endpoint)
}

// Env returns the KEY=VALUE pairs that hand this service to a child process:
// the endpoint variable and the kind variable (e.g. LARKLINE_TEST_KAFKA_BROKERS
// and LARKLINE_TEST_KAFKA_KIND). A child reading them adopts the service
// instead of starting its own.
func (s *Service) Env() []string {
	return []string{
		s.envEndpoint + "=" + s.Endpoint,
		s.envKind + "=" + string(s.Kind),
	}
}

// String describes the service for logs, with any password redacted.
func (s *Service) String() string {
	return fmt.Sprintf("%s=%s (%s)", s.Name, s.Kind, RedactDSN(s.Endpoint))
}

// Close stops a service started by this package and removes its data. It is a
// no-op for a provided service, and safe to call more than once; later calls
// return the first call's result. ctx bounds the stop.
func (s *Service) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		if s.Provided || s.stop == nil {
			return
		}
		if err := s.stop(ctx); err != nil {
			s.closeErr = fmt.Errorf("provision: stopping %s (%s): %w", s.Name, s.Kind, err)
		}
	})
	return s.closeErr
}

func splitBrokers(list string) []string {
	var out []string
	for _, b := range strings.Split(list, ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}

var keywordPassword = regexp.MustCompile(`(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)`)

// RedactDSN hides the password of a PostgreSQL DSN (URL or keyword form) so
// that it can be logged. Other strings are returned unchanged.
func RedactDSN(dsn string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "<unparsable DSN>"
		}
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
		q := u.Query()
		if q.Has("password") {
			q.Set("password", "xxxxx")
			u.RawQuery = q.Encode()
		}
		return u.String()
	}
	return keywordPassword.ReplaceAllString(dsn, "${1}xxxxx")
}
