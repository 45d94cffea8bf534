package provision

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/internal/pgcluster"
)

// These tests start each backend for real, forced through Options.Getenv so
// the caller's LARKLINE_TEST_* variables do not interfere. A backend whose
// prerequisites this machine lacks must say so with ErrUnavailable (that is
// the behaviour under test there); one whose prerequisites are present must
// start, answer, and be gone after Close.

// forced returns Options forcing one kind, collecting warnings in w.
func forced(variable string, kind Kind, w *bytes.Buffer) Options {
	return Options{
		Getenv:   func(k string) string { return map[string]string{variable: string(kind)}[k] },
		Warnings: w,
	}
}

// startOrUnavailable starts the forced kind. It returns nil (after checking the
// error) when the machine lacks the kind's prerequisites.
func startOrUnavailable(t *testing.T, start func(context.Context, Options) (*Service, error), o Options, available error) *Service {
	t.Helper()
	s, err := start(t.Context(), o)
	if available != nil {
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("prerequisites missing (%v), but start error = %v, want ErrUnavailable", available, err)
		}
		if !strings.Contains(err.Error(), "no fallback") {
			t.Fatalf("forced start error %q does not say there is no fallback", err)
		}
		t.Logf("this machine cannot run the kind: %v", err)
		return nil
	}
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	return s
}

func assertRefused(t *testing.T, addr string) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err == nil {
		conn.Close()
		t.Fatalf("%s still accepts connections after Close", addr)
	}
}

func kafkaRoundTrip(t *testing.T, s *Service) {
	t.Helper()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(s.Brokers()...),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	const topic = "provision-smoke"
	if _, err := adm.CreateTopic(t.Context(), 1, -1, nil, topic); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	cl.AddConsumeTopics(topic)
	for {
		fetches := cl.PollFetches(ctx)
		if err := fetches.Err0(); err != nil {
			t.Fatalf("consume: %v", err)
		}
		if recs := fetches.Records(); len(recs) > 0 {
			if string(recs[0].Value) != "v" {
				t.Fatalf("consumed %q, want %q", recs[0].Value, "v")
			}
			return
		}
	}
}

func TestStartKafkaJVM(t *testing.T) {
	var w bytes.Buffer
	available := javaAvailable()
	s := startOrUnavailable(t, StartKafka, forced(EnvKafka, KindJVM, &w), available)
	if s == nil {
		return
	}
	if s.Kind != KindJVM || s.Provided {
		t.Fatalf("service = %+v, want a started jvm broker", s)
	}
	kafkaRoundTrip(t, s)
	if err := s.Close(t.Context()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	assertRefused(t, s.Brokers()[0])
}

func TestStartKafkaEmbedded(t *testing.T) {
	var w bytes.Buffer
	s, err := StartKafka(t.Context(), forced(EnvKafka, KindEmbedded, &w))
	if err != nil {
		t.Fatalf("StartKafka: %v", err)
	}
	if !strings.Contains(w.String(), "IN-PROCESS FAKE") {
		t.Errorf("no loud warning for kfake; warnings:\n%s", w.String())
	}
	kafkaRoundTrip(t, s)
	if err := s.Close(t.Context()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	assertRefused(t, s.Brokers()[0])
}

func TestStartKafkaEmbeddedRefusedWhenRealRequired(t *testing.T) {
	o := Options{Getenv: func(k string) string {
		return map[string]string{EnvKafka: "embedded", EnvRequireReal: "1"}[k]
	}}
	if s, err := StartKafka(t.Context(), o); !errors.Is(err, ErrNotReal) {
		t.Fatalf("StartKafka = %v, %v; want ErrNotReal", s, err)
	}
}

func TestStartKafkaDocker(t *testing.T) {
	var w bytes.Buffer
	s := startOrUnavailable(t, StartKafka, forced(EnvKafka, KindDocker, &w), dockerEngine(t.Context()))
	if s == nil {
		return
	}
	defer s.Close(context.WithoutCancel(t.Context()))
	kafkaRoundTrip(t, s)
}

func postgresQuery(t *testing.T, s *Service) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), s.Endpoint)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(context.WithoutCancel(t.Context()))
	var fsync string
	if err := conn.QueryRow(t.Context(), "SHOW fsync").Scan(&fsync); err != nil {
		t.Fatalf("query: %v", err)
	}
	if fsync != "off" {
		t.Errorf("fsync = %s, want off for a throwaway test server", fsync)
	}
}

func postgresAddr(t *testing.T, dsn string) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
}

func TestStartPostgresLocal(t *testing.T) {
	var w bytes.Buffer
	available := pgcluster.Available(t.Context(), pgcluster.Options{Kind: pgcluster.KindLocal})
	s := startOrUnavailable(t, StartPostgres, forced(EnvPG, KindLocal, &w), available)
	if s == nil {
		return
	}
	if s.Kind != KindLocal || s.Provided {
		t.Fatalf("service = %+v, want a started local cluster", s)
	}
	postgresQuery(t, s)
	addr := postgresAddr(t, s.Endpoint)
	if err := s.Close(t.Context()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	assertRefused(t, addr)
}

func TestStartPostgresEmbedded(t *testing.T) {
	var w bytes.Buffer
	available := pgcluster.Available(t.Context(), pgcluster.Options{Kind: pgcluster.KindEmbedded})
	s := startOrUnavailable(t, StartPostgres, forced(EnvPG, KindEmbedded, &w), available)
	if s == nil {
		return
	}
	postgresQuery(t, s)
	addr := postgresAddr(t, s.Endpoint)
	if err := s.Close(t.Context()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	assertRefused(t, addr)
}

func TestStartPostgresDocker(t *testing.T) {
	var w bytes.Buffer
	s := startOrUnavailable(t, StartPostgres, forced(EnvPG, KindDocker, &w), dockerEngine(t.Context()))
	if s == nil {
		return
	}
	defer s.Close(context.WithoutCancel(t.Context()))
	postgresQuery(t, s)
}

func TestStartExternalUnreachable(t *testing.T) {
	// A reserved port nothing listens on refuses connections.
	ports, err := freePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(ports[0])
	tests := []struct {
		name  string
		start func(context.Context, Options) (*Service, error)
		env   map[string]string
		want  string
	}{
		{"kafka", StartKafka, map[string]string{EnvKafkaBrokers: addr}, EnvKafkaBrokers},
		{"postgres", StartPostgres, map[string]string{EnvPGDSN: "postgres://postgres:pw@" + addr + "/postgres?sslmode=disable"}, EnvPGDSN},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
			defer cancel()
			s, err := tt.start(ctx, Options{Getenv: func(k string) string { return tt.env[k] }})
			if err == nil {
				t.Fatalf("start adopted an unreachable service: %v", s)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not name %s", err, tt.want)
			}
			if strings.Contains(err.Error(), "pw@") {
				t.Errorf("error %q leaks the password", err)
			}
		})
	}
}
