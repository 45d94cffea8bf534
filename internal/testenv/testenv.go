package testenv

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/larkline/larkline/internal/testenv/provision"
)

const (
	startTimeout = 5 * time.Minute
	stopTimeout  = 2 * time.Minute
	opTimeout    = 30 * time.Second // creating or dropping one topic or database
)

// errShutDown: a service was asked for after Main stopped them.
var errShutDown = errors.New("testenv: services already stopped by testenv.Main")

// lazy starts a service on first use and keeps the outcome, success or failure, for
// every later caller; close stops it once, at the end of the binary.
type lazy[T any] struct {
	start func(context.Context, provision.Options) (T, error)
	stop  func(context.Context, T) error

	mu      sync.Mutex
	started bool
	closed  bool
	svc     T
	ok      bool
	err     error
}

func (l *lazy[T]) get() (T, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		var zero T
		return zero, errShutDown
	}
	if !l.started {
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		defer cancel()
		l.svc, l.err = l.start(ctx, options())
		l.ok = l.err == nil
		l.started = true
	}
	return l.svc, l.err
}

func (l *lazy[T]) close(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	if !l.ok {
		return nil
	}
	return l.stop(ctx, l.svc)
}

// lazyService is a provisioned service (Kafka, Postgres, the registry).
type lazyService struct{ lazy[*provision.Service] }

func newLazyService(start func(context.Context, provision.Options) (*provision.Service, error)) *lazyService {
	return &lazyService{lazy[*provision.Service]{start: start,
		stop: func(ctx context.Context, s *provision.Service) error { return s.Close(ctx) }}}
}

// kind starts the service if needed and reports its kind, or "" if it failed.
func (l *lazyService) kind() string {
	svc, err := l.get()
	if err != nil {
		return ""
	}
	return string(svc.Kind)
}

var (
	kafkaService    = newLazyService(provision.StartKafka)
	postgresService = newLazyService(provision.StartPostgres)
)

// options: progress is logged to stderr under `go test -v`; the loud
// warnings always go to stderr.
func options() provision.Options {
	var w io.Writer = io.Discard
	if flag.Parsed() && testing.Verbose() {
		w = os.Stderr
	}
	return provision.Options{
		Logger:   slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo})),
		Warnings: os.Stderr,
	}
}

// Main runs the tests and then stops every service this binary started.
// Call it from TestMain; it does not return. A failure to stop a service
// fails the run (exit status 1) after reporting it on stderr. Each cleanup runs
// after the tests, before the services stop (TestMain's own defers never run: Main
// exits).
func Main(m *testing.M, cleanups ...func()) {
	code := m.Run()
	for _, c := range cleanups {
		c()
	}
	if err := shutdown(); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

func shutdown() error {
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	adminClose()
	return errors.Join(kafkaService.close(ctx), postgresService.close(ctx), registryService.close(ctx), securedService.close(ctx))
}

// KafkaKind reports which kind of broker KafkaBrokers hands out: "external",
// "docker", "jvm" or "embedded" (kfake), or the kind the runner declared in
// LARKLINE_TEST_KAFKA_KIND. It starts the broker if needed and returns "" if
// that failed (KafkaBrokers reports the error).
func KafkaKind() string { return kafkaService.kind() }

// PostgresKind reports which kind of PostgreSQL PostgresDSN uses: "external",
// "docker", "local" or "embedded", like KafkaKind.
func PostgresKind() string { return postgresService.kind() }

// KafkaBrokers returns the bootstrap brokers of the binary's Kafka, starting
// it on first use. It fails the test if no broker can be had.
func KafkaBrokers(t testing.TB) []string {
	t.Helper()
	svc, err := kafkaService.get()
	if err != nil {
		t.Fatalf("testenv: kafka: %v", err)
	}
	return svc.Brokers()
}
