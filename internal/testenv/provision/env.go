package provision

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
)

// Kind names how a service was provided.
type Kind string

// The kinds of service. Kafka uses External, Docker, JVM and Embedded;
// PostgreSQL uses External, Docker, Local and Embedded.
const (
	KindExternal Kind = "external" // named by the environment; never started or stopped here
	KindDocker   Kind = "docker"   // a container started with testcontainers-go
	KindJVM      Kind = "jvm"      // a Kafka broker run from Maven Central jars (deploy/kafka/kafka-jvm.sh)
	KindLocal    Kind = "local"    // a throwaway PostgreSQL cluster made with the machine's initdb
	KindEmbedded Kind = "embedded" // kfake (a fake broker) or embedded-postgres (real PostgreSQL binaries)
)

// Environment variables read by this package (and exported by the runner).
const (
	EnvKafkaBrokers = "LARKLINE_TEST_KAFKA_BROKERS" // comma-separated brokers of an existing Kafka
	EnvKafkaKind    = "LARKLINE_TEST_KAFKA_KIND"    // what EnvKafkaBrokers really is (default external)
	EnvKafka        = "LARKLINE_TEST_KAFKA"         // force a kind: external|docker|jvm|embedded
	EnvKafkaImage   = "LARKLINE_TEST_KAFKA_IMAGE"   // docker image for the docker kind
	EnvKafkaJars    = "LARKLINE_KAFKA_JARS"         // jar cache used by kafka-jvm.sh

	EnvPGDSN   = "LARKLINE_TEST_PG_DSN"   // DSN of an existing PostgreSQL (a superuser; databases are created per test)
	EnvPGKind  = "LARKLINE_TEST_PG_KIND"  // what EnvPGDSN really is (default external)
	EnvPG      = "LARKLINE_TEST_PG"       // force a kind: external|docker|local|embedded
	EnvPGImage = "LARKLINE_TEST_PG_IMAGE" // docker image for the docker kind
	EnvPGBin   = "LARKLINE_TEST_PG_BIN"   // directory holding initdb and pg_ctl for the local kind

	// EnvRequireReal, when true (1, true), makes a selection that lands on the
	// kfake broker an error. CI sets it.
	EnvRequireReal = "LARKLINE_TEST_REQUIRE_REAL"
)

const (
	defaultKafkaImage = "apache/kafka:4.1.1"
	defaultPGImage    = "postgres:15-alpine"
)

// Errors returned by this package; test them with errors.Is.
var (
	// ErrUnknownKind: a LARKLINE_TEST_* variable names a kind this service does not have.
	ErrUnknownKind = errors.New("provision: unknown service kind")
	// ErrUnavailable: a kind's prerequisites are missing (no Docker engine, no
	// java, no initdb, running as root where that is refused). An unforced
	// selection skips such a kind without a warning.
	ErrUnavailable = errors.New("provision: unavailable on this machine")
	// ErrNotReal: LARKLINE_TEST_REQUIRE_REAL is set and the selection would use kfake.
	ErrNotReal = errors.New("provision: a real service is required but the selection is a fake")
	// ErrNoService: no kind could be started; the error lists every attempt.
	ErrNoService = errors.New("provision: no service could be started")
	// ErrBadEnv: a LARKLINE_TEST_* variable holds a value that cannot be used.
	ErrBadEnv = errors.New("provision: invalid environment")
)

// Options configure StartKafka and StartPostgres. The zero value reads the
// process environment, logs nothing and prints warnings to stderr.
type Options struct {
	// Getenv reads the environment; nil means os.Getenv.
	Getenv func(string) string
	// Logger receives progress (what was tried, chosen, stopped). nil discards.
	Logger *slog.Logger
	// Warnings receives the loud banners (fake broker in use, a kind that failed
	// and was skipped). nil means os.Stderr.
	Warnings io.Writer
	// RepoRoot is the larkline checkout holding deploy/kafka/kafka-jvm.sh;
	// "" means found by walking up from the working directory.
	RepoRoot string
}

func (o Options) getenv(key string) string {
	if o.Getenv == nil {
		return os.Getenv(key)
	}
	return o.Getenv(key)
}

func (o Options) logger() *slog.Logger {
	if o.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return o.Logger
}

func (o Options) warnings() io.Writer {
	if o.Warnings == nil {
		return os.Stderr
	}
	return o.Warnings
}

// requireReal reports whether LARKLINE_TEST_REQUIRE_REAL is set to a true value.
func (o Options) requireReal() (bool, error) {
	v := strings.TrimSpace(o.getenv(EnvRequireReal))
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%w: %s=%q is not a boolean", ErrBadEnv, EnvRequireReal, v)
	}
	return b, nil
}

// unavailableError is an ErrUnavailable with its own message.
type unavailableError struct{ msg string }

func (e *unavailableError) Error() string        { return e.msg }
func (e *unavailableError) Is(target error) bool { return target == ErrUnavailable }

// unavailable formats an error that matches ErrUnavailable.
func unavailable(format string, args ...any) error {
	return &unavailableError{msg: fmt.Sprintf(format, args...)}
}
