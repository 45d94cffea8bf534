package provision

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
)

func envOf(kv map[string]string) Options {
	return Options{Getenv: func(k string) string { return kv[k] }}
}

func TestPlan(t *testing.T) {
	tests := []struct {
		name    string
		spec    spec
		env     map[string]string
		want    plan
		wantErr error
	}{
		{
			name: "kafka: nothing set tries docker, jvm, embedded",
			spec: kafkaSpec,
			want: plan{candidates: []Kind{KindDocker, KindJVM, KindEmbedded}},
		},
		{
			name: "kafka: brokers set are adopted as external",
			spec: kafkaSpec,
			env:  map[string]string{EnvKafkaBrokers: " 127.0.0.1:9092 "},
			want: plan{provided: "127.0.0.1:9092", providedKind: KindExternal},
		},
		{
			name: "kafka: brokers with a declared kind keep that kind",
			spec: kafkaSpec,
			env:  map[string]string{EnvKafkaBrokers: "127.0.0.1:9092", EnvKafkaKind: "jvm"},
			want: plan{provided: "127.0.0.1:9092", providedKind: KindJVM},
		},
		{
			name:    "kafka: unknown declared kind",
			spec:    kafkaSpec,
			env:     map[string]string{EnvKafkaBrokers: "127.0.0.1:9092", EnvKafkaKind: "zookeeper"},
			wantErr: ErrUnknownKind,
		},
		{
			name: "kafka: forced jvm",
			spec: kafkaSpec,
			env:  map[string]string{EnvKafka: "jvm"},
			want: plan{candidates: []Kind{KindJVM}, forced: true},
		},
		{
			name: "kafka: forced kind is case-insensitive",
			spec: kafkaSpec,
			env:  map[string]string{EnvKafka: " JVM "},
			want: plan{candidates: []Kind{KindJVM}, forced: true},
		},
		{
			name:    "kafka: forced unknown kind",
			spec:    kafkaSpec,
			env:     map[string]string{EnvKafka: "podman"},
			wantErr: ErrUnknownKind,
		},
		{
			name:    "kafka: a postgres kind is unknown to kafka",
			spec:    kafkaSpec,
			env:     map[string]string{EnvKafka: "local"},
			wantErr: ErrUnknownKind,
		},
		{
			name:    "kafka: forced external without brokers",
			spec:    kafkaSpec,
			env:     map[string]string{EnvKafka: "external"},
			wantErr: ErrBadEnv,
		},
		{
			name: "kafka: forced external with brokers",
			spec: kafkaSpec,
			env:  map[string]string{EnvKafka: "external", EnvKafkaBrokers: "b:1,b:2"},
			want: plan{provided: "b:1,b:2", providedKind: KindExternal, forced: true},
		},
		{
			name: "kafka: forced kind matching the runner's declared kind adopts its brokers",
			spec: kafkaSpec,
			env:  map[string]string{EnvKafka: "jvm", EnvKafkaBrokers: "127.0.0.1:1", EnvKafkaKind: "jvm"},
			want: plan{provided: "127.0.0.1:1", providedKind: KindJVM, forced: true},
		},
		{
			name: "kafka: forced kind differing from the provided brokers starts the forced kind",
			spec: kafkaSpec,
			env:  map[string]string{EnvKafka: "jvm", EnvKafkaBrokers: "127.0.0.1:1"},
			want: plan{candidates: []Kind{KindJVM}, forced: true},
		},
		{
			name: "kafka: require real drops kfake from the order",
			spec: kafkaSpec,
			env:  map[string]string{EnvRequireReal: "1"},
			want: plan{candidates: []Kind{KindDocker, KindJVM}},
		},
		{
			name:    "kafka: require real refuses forced kfake",
			spec:    kafkaSpec,
			env:     map[string]string{EnvRequireReal: "true", EnvKafka: "embedded"},
			wantErr: ErrNotReal,
		},
		{
			name:    "kafka: require real refuses provided kfake",
			spec:    kafkaSpec,
			env:     map[string]string{EnvRequireReal: "1", EnvKafkaBrokers: "127.0.0.1:1", EnvKafkaKind: "embedded"},
			wantErr: ErrNotReal,
		},
		{
			name: "kafka: require real off allows forced kfake",
			spec: kafkaSpec,
			env:  map[string]string{EnvRequireReal: "0", EnvKafka: "embedded"},
			want: plan{candidates: []Kind{KindEmbedded}, forced: true},
		},
		{
			name:    "kafka: require real must be a boolean",
			spec:    kafkaSpec,
			env:     map[string]string{EnvRequireReal: "yes please"},
			wantErr: ErrBadEnv,
		},
		{
			name: "postgres: nothing set tries docker, local, embedded",
			spec: postgresSpec,
			want: plan{candidates: []Kind{KindDocker, KindLocal, KindEmbedded}},
		},
		{
			name: "postgres: embedded-postgres is real, so require real keeps it",
			spec: postgresSpec,
			env:  map[string]string{EnvRequireReal: "1"},
			want: plan{candidates: []Kind{KindDocker, KindLocal, KindEmbedded}},
		},
		{
			name: "postgres: DSN set is adopted",
			spec: postgresSpec,
			env:  map[string]string{EnvPGDSN: "postgres://u@h:1/postgres", EnvPGKind: "local"},
			want: plan{provided: "postgres://u@h:1/postgres", providedKind: KindLocal},
		},
		{
			name: "postgres: forced local",
			spec: postgresSpec,
			env:  map[string]string{EnvPG: "local"},
			want: plan{candidates: []Kind{KindLocal}, forced: true},
		},
		{
			name:    "postgres: a kafka kind is unknown to postgres",
			spec:    postgresSpec,
			env:     map[string]string{EnvPG: "jvm"},
			wantErr: ErrUnknownKind,
		},
		{
			name: "postgres: kafka variables do not affect postgres",
			spec: postgresSpec,
			env:  map[string]string{EnvKafka: "embedded", EnvKafkaBrokers: "b:1"},
			want: plan{candidates: []Kind{KindDocker, KindLocal, KindEmbedded}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.spec.plan(envOf(tt.env))
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("plan() error = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("plan() error = %v", err)
			}
			if got.provided != tt.want.provided || got.providedKind != tt.want.providedKind ||
				got.forced != tt.want.forced || !slices.Equal(got.candidates, tt.want.candidates) {
				t.Fatalf("plan() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// fakeStarters records which kinds were started and returns services whose
// stop is counted.
type fakeStarters struct {
	calls   []Kind
	stopped []Kind
	results map[Kind]error // nil: start succeeds
}

func (f *fakeStarters) starters(sp spec) map[Kind]starter {
	m := map[Kind]starter{}
	for _, k := range sp.order {
		m[k] = func(context.Context, Options) (*Service, error) {
			f.calls = append(f.calls, k)
			if err := f.results[k]; err != nil {
				return nil, err
			}
			return newService(sp, k, "127.0.0.1:1", func(context.Context) error {
				f.stopped = append(f.stopped, k)
				return nil
			}), nil
		}
	}
	return m
}

func readyOK(context.Context, *Service) error { return nil }

func TestStartSelection(t *testing.T) {
	errBoom := errors.New("boom")
	tests := []struct {
		name        string
		spec        spec
		plan        plan
		results     map[Kind]error
		ready       readiness
		wantKind    Kind
		wantErr     []error // all must match with errors.Is
		wantErrText string
		wantCalls   []Kind
		wantStopped []Kind
		wantWarn    []string // substrings of the warnings output
		wantNoWarn  []string
	}{
		{
			name:      "first candidate that starts wins",
			spec:      kafkaSpec,
			plan:      plan{candidates: []Kind{KindDocker, KindJVM, KindEmbedded}},
			wantKind:  KindDocker,
			wantCalls: []Kind{KindDocker},
		},
		{
			name:       "unavailable is skipped quietly, a failure loudly, and kfake is announced",
			spec:       kafkaSpec,
			plan:       plan{candidates: []Kind{KindDocker, KindJVM, KindEmbedded}},
			results:    map[Kind]error{KindDocker: unavailable("no engine answers"), KindJVM: errBoom},
			wantKind:   KindEmbedded,
			wantCalls:  []Kind{KindDocker, KindJVM, KindEmbedded},
			wantWarn:   []string{"kafka jvm failed to start", "IN-PROCESS FAKE", "docker: no engine answers", "jvm: boom"},
			wantNoWarn: []string{"docker failed"},
		},
		{
			name:      "forced kind failing is an error, with no fallback",
			spec:      kafkaSpec,
			plan:      plan{candidates: []Kind{KindJVM}, forced: true},
			results:   map[Kind]error{KindJVM: errBoom},
			wantErr:   []error{errBoom},
			wantCalls: []Kind{KindJVM},
		},
		{
			name:      "forced kind unavailable is an error too",
			spec:      postgresSpec,
			plan:      plan{candidates: []Kind{KindDocker}, forced: true},
			results:   map[Kind]error{KindDocker: unavailable("no engine answers")},
			wantErr:   []error{ErrUnavailable},
			wantCalls: []Kind{KindDocker},
		},
		{
			name:      "nothing starts: ErrNoService listing every attempt",
			spec:      postgresSpec,
			plan:      plan{candidates: []Kind{KindDocker, KindLocal, KindEmbedded}},
			results:   map[Kind]error{KindDocker: unavailable("x"), KindLocal: errBoom, KindEmbedded: unavailable("root")},
			wantErr:   []error{ErrNoService, errBoom, ErrUnavailable},
			wantCalls: []Kind{KindDocker, KindLocal, KindEmbedded},
		},
		{
			name: "a started service that is not ready is stopped and the next one tried",
			spec: postgresSpec,
			plan: plan{candidates: []Kind{KindLocal, KindEmbedded}},
			ready: func(_ context.Context, s *Service) error {
				if s.Kind == KindLocal {
					return errBoom
				}
				return nil
			},
			wantKind:    KindEmbedded,
			wantCalls:   []Kind{KindLocal, KindEmbedded},
			wantStopped: []Kind{KindLocal},
			wantWarn:    []string{"postgres local failed to start"},
		},
		{
			name:       "embedded-postgres is real: no fake banner",
			spec:       postgresSpec,
			plan:       plan{candidates: []Kind{KindEmbedded}, forced: true},
			wantKind:   KindEmbedded,
			wantCalls:  []Kind{KindEmbedded},
			wantNoWarn: []string{"FAKE"},
		},
		{
			name:     "a provided service is adopted without starting anything",
			spec:     kafkaSpec,
			plan:     plan{provided: "127.0.0.1:1", providedKind: KindJVM},
			wantKind: KindJVM,
		},
		{
			name:        "a provided service that does not answer is an error naming the variable",
			spec:        kafkaSpec,
			plan:        plan{provided: "127.0.0.1:1", providedKind: KindExternal},
			ready:       func(context.Context, *Service) error { return errBoom },
			wantErr:     []error{errBoom},
			wantErrText: EnvKafkaBrokers,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeStarters{results: tt.results}
			var warn bytes.Buffer
			ready := tt.ready
			if ready == nil {
				ready = readyOK
			}
			s, err := tt.spec.start(t.Context(), Options{Warnings: &warn}, tt.plan, f.starters(tt.spec), ready)
			if tt.wantErr != nil {
				for _, want := range tt.wantErr {
					if !errors.Is(err, want) {
						t.Errorf("start() error = %v, want it to match %v", err, want)
					}
				}
				if s != nil {
					t.Errorf("start() returned a service %v with an error", s)
				}
				if err != nil && !strings.Contains(err.Error(), tt.wantErrText) {
					t.Errorf("start() error %q does not mention %q", err, tt.wantErrText)
				}
				if tt.plan.forced && !strings.Contains(err.Error(), "no fallback") {
					t.Errorf("forced failure %q does not say there is no fallback", err)
				}
			} else {
				if err != nil {
					t.Fatalf("start() error = %v", err)
				}
				if s.Kind != tt.wantKind {
					t.Errorf("start() kind = %s, want %s", s.Kind, tt.wantKind)
				}
				if s.Provided != (tt.plan.provided != "") {
					t.Errorf("Provided = %v, want %v", s.Provided, tt.plan.provided != "")
				}
			}
			if !slices.Equal(f.calls, tt.wantCalls) {
				t.Errorf("started %v, want %v", f.calls, tt.wantCalls)
			}
			if !slices.Equal(f.stopped, tt.wantStopped) {
				t.Errorf("stopped %v, want %v", f.stopped, tt.wantStopped)
			}
			for _, w := range tt.wantWarn {
				if !strings.Contains(warn.String(), w) {
					t.Errorf("warnings lack %q:\n%s", w, warn.String())
				}
			}
			for _, w := range tt.wantNoWarn {
				if strings.Contains(warn.String(), w) {
					t.Errorf("warnings contain %q:\n%s", w, warn.String())
				}
			}
		})
	}
}

func TestStartStopsTryingWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	f := &fakeStarters{}
	sts := f.starters(kafkaSpec)
	sts[KindDocker] = func(context.Context, Options) (*Service, error) {
		f.calls = append(f.calls, KindDocker)
		cancel()
		return nil, context.Canceled
	}
	_, err := kafkaSpec.start(ctx, Options{Warnings: &bytes.Buffer{}},
		plan{candidates: []Kind{KindDocker, KindJVM, KindEmbedded}}, sts, readyOK)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("start() error = %v, want context.Canceled", err)
	}
	if !slices.Equal(f.calls, []Kind{KindDocker}) {
		t.Fatalf("started %v after cancellation, want only docker", f.calls)
	}
}

func TestProvidedServiceCloseLeavesItRunning(t *testing.T) {
	stopped := false
	s := newService(kafkaSpec, KindExternal, "b:1", func(context.Context) error { stopped = true; return nil })
	s.Provided = true
	if err := s.Close(t.Context()); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	if stopped {
		t.Fatal("Close stopped a provided service")
	}
}

func TestServiceCloseOnce(t *testing.T) {
	stops := 0
	errStop := errors.New("stop failed")
	s := newService(postgresSpec, KindLocal, "dsn", func(context.Context) error { stops++; return errStop })
	for range 3 {
		if err := s.Close(t.Context()); !errors.Is(err, errStop) {
			t.Fatalf("Close() = %v, want %v", err, errStop)
		}
	}
	if stops != 1 {
		t.Fatalf("stop ran %d times, want 1", stops)
	}
}

func TestServiceEnvAndBrokers(t *testing.T) {
	tests := []struct {
		name        string
		s           *Service
		wantEnv     []string
		wantBrokers []string
	}{
		{
			name:        "kafka",
			s:           newService(kafkaSpec, KindJVM, " 127.0.0.1:1, 127.0.0.1:2 ,", nil),
			wantEnv:     []string{EnvKafkaBrokers + "= 127.0.0.1:1, 127.0.0.1:2 ,", EnvKafkaKind + "=jvm"},
			wantBrokers: []string{"127.0.0.1:1", "127.0.0.1:2"},
		},
		{
			name:    "postgres",
			s:       newService(postgresSpec, KindLocal, "postgres://postgres@127.0.0.1:5/postgres", nil),
			wantEnv: []string{EnvPGDSN + "=postgres://postgres@127.0.0.1:5/postgres", EnvPGKind + "=local"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.s.Env(); !slices.Equal(got, tt.wantEnv) {
				t.Errorf("Env() = %q, want %q", got, tt.wantEnv)
			}
			if tt.wantBrokers != nil {
				if got := tt.s.Brokers(); !slices.Equal(got, tt.wantBrokers) {
					t.Errorf("Brokers() = %q, want %q", got, tt.wantBrokers)
				}
			}
		})
	}
}

func TestRedactDSN(t *testing.T) {
	tests := []struct{ in, want string }{
		{"postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"},
		{"postgres://u:s3cret@h:1/db", "postgres://u:xxxxx@h:1/db"},
		{"postgresql://u@h/db?password=s3cret&sslmode=disable", "postgresql://u@h/db?password=xxxxx&sslmode=disable"},
		{"host=h user=u password=s3cret dbname=d", "host=h user=u password=xxxxx dbname=d"},
		{"host=h password = 's3 cret' dbname=d", "host=h password = xxxxx dbname=d"},
		{"127.0.0.1:9092", "127.0.0.1:9092"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got := RedactDSN(tt.in)
			if got != tt.want {
				t.Errorf("RedactDSN(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if strings.Contains(got, "s3") {
				t.Errorf("RedactDSN(%q) leaks the password: %q", tt.in, got)
			}
		})
	}
}
