package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/internal/config"
	"github.com/larkline/larkline/internal/kafka"
	"github.com/larkline/larkline/internal/logging"
	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/schemas"
)

// newFlags returns a flag set with the --config flag every command shares.
func newFlags(name string, stderr io.Writer) (*flag.FlagSet, *string) {
	fs := flag.NewFlagSet("larkline "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", os.Getenv(config.EnvConfigFile), "YAML configuration file (env "+config.EnvConfigFile+"); every key can be overridden from the environment")
	return fs, path
}

func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	return nil
}

// loadConfig reads and validates the configuration (the file's rules and every
// stage's), then checks the keys this command needs on top.
func loadConfig(path string, required ...string) (*config.Config, error) {
	cfg, err := config.LoadChecked(path, os.Environ(), stageChecks...)
	if err != nil {
		return nil, err
	}
	if len(required) > 0 {
		if err := cfg.Require(required...); err != nil {
			return nil, err
		}
	}
	return cfg, nil
}

func newLogger(cfg *config.Config, w io.Writer) (*slog.Logger, error) {
	return logging.New(w, cfg.Log.Level, cfg.Log.Format)
}

func newKafkaClient(cfg *config.Config, clientSuffix string, extra ...kgo.Opt) (*kgo.Client, error) {
	return newClient(kafkaOptions(cfg, clientSuffix).opts, extra...)
}

// newClient is a franz-go client with o.
func newClient(o kafka.Options, extra ...kgo.Opt) (*kgo.Client, error) {
	opts, err := kafka.NewClientOptions(o)
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(append(opts, extra...)...)
	if err != nil {
		return nil, fmt.Errorf("creating kafka client: %w", err)
	}
	return cl, nil
}

// newCodecs builds the Avro codecs: the Confluent wire format through the schema
// registry when one is configured, Avro single-object encoding otherwise.
func newCodecs(cfg *config.Config) (*schemas.Codecs, error) {
	t := cfg.Kafka.Topics
	topics := schemas.Topics{Evidence: t.Evidence, ClosedWindow: t.WindowsClosed, Checkpoint: t.Checkpoints,
		Workspace: t.Workspaces, DeadLetter: t.DeadLetter}
	var opts []schemas.Option
	if cfg.Schemas.Registry.URL != "" {
		reg, err := schemas.NewRegistry(registryOptions(cfg).opts)
		if err != nil {
			return nil, err
		}
		opts = append(opts, schemas.WithRegistry(reg))
	}
	return schemas.NewCodecs(topics, opts...)
}

func openPool(ctx context.Context, cfg *config.Config) (*pgxpool.Pool, error) {
	return store.OpenPool(ctx, poolConfig(cfg).opts)
}

// oneShotRuntime is the runtime of a one-shot command (refresh, retention run): the
// validated config with the keys it needs, a logger on stderr and the codecs; no ops
// server. Close it with rt.close.
func oneShotRuntime(path string, stderr io.Writer, required ...string) (*runtime, *config.Config, error) {
	cfg, err := loadConfig(path, required...)
	if err != nil {
		return nil, nil, err
	}
	log, err := newLogger(cfg, stderr)
	if err != nil {
		return nil, nil, err
	}
	codecs, err := newCodecs(cfg)
	if err != nil {
		return nil, nil, err
	}
	return &runtime{opts: newRoleOptions(cfg), log: log, codecs: codecs}, cfg, nil
}
