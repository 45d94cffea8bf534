package provision

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// spec describes one service for selection.
type spec struct {
	name        string // "kafka" or "postgres"
	envForce    string // variable that forces a kind
	envProvided string // variable naming an existing service
	envKind     string // variable declaring the provided service's kind
	order       []Kind // kinds tried, in order, when nothing is provided or forced
	fake        Kind   // the kind that is a fake, rejected when a real service is required; "" if none
	hint        string // what to do when nothing could be started
}

var kafkaSpec = spec{
	name:        "kafka",
	envForce:    EnvKafka,
	envProvided: EnvKafkaBrokers,
	envKind:     EnvKafkaKind,
	order:       []Kind{KindDocker, KindJVM, KindEmbedded},
	fake:        KindEmbedded,
	hint: "install Java 17+ (and Maven once) for the jvm broker, or run Docker, " +
		"or set " + EnvKafkaBrokers,
}

var postgresSpec = spec{
	name:        "postgres",
	envForce:    EnvPG,
	envProvided: EnvPGDSN,
	envKind:     EnvPGKind,
	order:       []Kind{KindDocker, KindLocal, KindEmbedded},
	hint: "install PostgreSQL (initdb, pg_ctl; or set " + EnvPGBin + "), or run Docker, " +
		"or set " + EnvPGDSN,
}

// kinds lists every kind valid for the service.
func (sp spec) kinds() []Kind {
	return append([]Kind{KindExternal}, sp.order...)
}

func (sp spec) parseKind(variable, value string) (Kind, error) {
	k := Kind(strings.ToLower(strings.TrimSpace(value)))
	if !slices.Contains(sp.kinds(), k) {
		return "", fmt.Errorf("%w: %s=%q; %s kinds are %v", ErrUnknownKind, variable, value, sp.name, sp.kinds())
	}
	return k, nil
}

// plan is what the environment asks for.
type plan struct {
	provided     string // endpoint named by the environment, when it is to be used
	providedKind Kind
	candidates   []Kind // kinds to start, in order, when provided is ""
	forced       bool
}

// plan reads the environment. It never touches the machine: it is the pure,
// table-tested half of the selection.
func (sp spec) plan(o Options) (plan, error) {
	requireReal, err := o.requireReal()
	if err != nil {
		return plan{}, err
	}
	var forced Kind
	if v := o.getenv(sp.envForce); strings.TrimSpace(v) != "" {
		if forced, err = sp.parseKind(sp.envForce, v); err != nil {
			return plan{}, err
		}
	}
	provided := strings.TrimSpace(o.getenv(sp.envProvided))
	providedKind := KindExternal
	if v := o.getenv(sp.envKind); strings.TrimSpace(v) != "" {
		if providedKind, err = sp.parseKind(sp.envKind, v); err != nil {
			return plan{}, err
		}
	}

	// A provided service satisfies an unforced selection, a forced "external",
	// and a forced kind it declares itself to be (the runner's export).
	if provided != "" && (forced == "" || forced == KindExternal || forced == providedKind) {
		if requireReal && sp.fake != "" && providedKind == sp.fake {
			return plan{}, fmt.Errorf("%w: %s declares %s %s=%s, and %s is set",
				ErrNotReal, sp.envProvided, sp.name, sp.envKind, providedKind, EnvRequireReal)
		}
		return plan{provided: provided, providedKind: providedKind, forced: forced != ""}, nil
	}
	switch {
	case forced == KindExternal:
		return plan{}, fmt.Errorf("%w: %s=%s but %s is empty", ErrBadEnv, sp.envForce, forced, sp.envProvided)
	case forced != "":
		if requireReal && sp.fake != "" && forced == sp.fake {
			return plan{}, fmt.Errorf("%w: %s=%s forces the fake, and %s is set",
				ErrNotReal, sp.envForce, forced, EnvRequireReal)
		}
		return plan{candidates: []Kind{forced}, forced: true}, nil
	}
	candidates := slices.Clone(sp.order)
	if requireReal && sp.fake != "" {
		candidates = slices.DeleteFunc(candidates, func(k Kind) bool { return k == sp.fake })
	}
	return plan{candidates: candidates}, nil
}

// starter starts one kind of a service.
type starter func(ctx context.Context, o Options) (*Service, error)

// readiness confirms that a service answers; it runs on provided and started
// services alike.
type readiness func(ctx context.Context, s *Service) error

// start carries out a plan: it adopts the provided service or tries the
// candidates in order. A forced candidate's failure is returned as is; an
// unforced one's is recorded and the next candidate tried.
func (sp spec) start(ctx context.Context, o Options, p plan, starters map[Kind]starter, ready readiness) (*Service, error) {
	log := o.logger()
	if p.provided != "" {
		s := newService(sp, p.providedKind, p.provided, nil)
		s.Provided = true
		if err := ready(ctx, s); err != nil {
			return nil, fmt.Errorf("provision: %s from %s=%s: %w", sp.name, sp.envProvided, RedactDSN(p.provided), err)
		}
		log.Info("provision: using provided service", "service", sp.name, "kind", s.Kind)
		return s, nil
	}

	var attempts []error
	for _, k := range p.candidates {
		run, ok := starters[k]
		if !ok {
			// plan only yields kinds of sp.order; a missing starter is a programming error.
			return nil, fmt.Errorf("provision: %s: no starter for kind %s", sp.name, k)
		}
		log.Info("provision: starting", "service", sp.name, "kind", k)
		s, err := run(ctx, o)
		if err == nil {
			if err = ready(ctx, s); err != nil {
				err = fmt.Errorf("started but not ready: %w", errors.Join(err, s.Close(context.WithoutCancel(ctx))))
			}
		}
		if err == nil {
			log.Info("provision: started", "service", sp.name, "kind", k, "endpoint", RedactDSN(s.Endpoint))
			if k == sp.fake {
				fakeBanner(o, sp, p.forced, attempts)
			}
			return s, nil
		}
		err = fmt.Errorf("%s: %w", k, err)
		if p.forced {
			return nil, fmt.Errorf("provision: %s forced by %s=%s: %w (no fallback for a forced kind)",
				sp.name, sp.envForce, k, err)
		}
		attempts = append(attempts, err)
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, fmt.Errorf("provision: %s: %w", sp.name, errors.Join(append(attempts, ctxErr)...))
		}
		if errors.Is(err, ErrUnavailable) {
			log.Info("provision: kind unavailable", "service", sp.name, "kind", k, "reason", err.Error())
		} else {
			fmt.Fprintf(o.warnings(), "provision: WARNING: %s %s failed to start, trying the next kind: %v\n", sp.name, k, err)
		}
	}
	return nil, fmt.Errorf("%w: %s (%s): %w", ErrNoService, sp.name, sp.hint, errors.Join(attempts...))
}

func fakeBanner(o Options, sp spec, forced bool, attempts []error) {
	w := o.warnings()
	line := strings.Repeat("!", 78)
	fmt.Fprintf(w, "%s\n", line)
	fmt.Fprintf(w, "!! WARNING: %s tests are running against %s, an IN-PROCESS FAKE (kfake).\n", sp.name, sp.fake)
	fmt.Fprintf(w, "!! Passing tests prove nothing about a real broker.\n")
	if forced {
		fmt.Fprintf(w, "!! It was forced by %s=%s.\n", sp.envForce, sp.fake)
	}
	if len(attempts) > 0 {
		fmt.Fprintf(w, "!! Kinds that did not work:\n")
	}
	for _, a := range attempts {
		fmt.Fprintf(w, "!!   %v\n", a)
	}
	fmt.Fprintf(w, "!! To fix: %s.\n", sp.hint)
	fmt.Fprintf(w, "!! CI sets %s=1, which makes this an error.\n", EnvRequireReal)
	fmt.Fprintf(w, "%s\n", line)
}

// StartKafka selects and starts (or adopts) a Kafka broker as described in
// the package documentation, and waits until it answers a metadata request.
func StartKafka(ctx context.Context, o Options) (*Service, error) {
	p, err := kafkaSpec.plan(o)
	if err != nil {
		return nil, err
	}
	return kafkaSpec.start(ctx, o, p, map[Kind]starter{
		KindDocker:   startKafkaDocker,
		KindJVM:      startKafkaJVM,
		KindEmbedded: startKafkaEmbedded,
	}, kafkaReady)
}

// StartPostgres selects and starts (or adopts) a PostgreSQL server as
// described in the package documentation, and waits until it answers a query.
func StartPostgres(ctx context.Context, o Options) (*Service, error) {
	p, err := postgresSpec.plan(o)
	if err != nil {
		return nil, err
	}
	return postgresSpec.start(ctx, o, p, map[Kind]starter{
		KindDocker:   startPostgresDocker,
		KindLocal:    startPostgresLocal,
		KindEmbedded: startPostgresEmbedded,
	}, postgresReady)
}
