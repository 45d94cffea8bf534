package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/larkline/larkline/internal/testenv/provision"
)

const (
	exitSetup    = 2 // bad usage or a service that would not start
	startTimeout = 5 * time.Minute
	stopTimeout  = 2 * time.Minute
)

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

func usage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintln(w, "usage: testenv run [flags] -- command [args...]")
	fmt.Fprintln(w, "Starts Kafka and PostgreSQL for larkline's tests, runs command with")
	fmt.Fprintln(w, "LARKLINE_TEST_* exported, stops the services, and exits with command's status.")
	fs.PrintDefaults()
}

func run(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("testenv run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	withKafka := fs.Bool("kafka", true, "start (or adopt) a Kafka broker")
	withPG := fs.Bool("postgres", true, "start (or adopt) a PostgreSQL server")
	verbose := fs.Bool("v", false, "log service selection progress")
	fs.Usage = func() { usage(stderr, fs) }
	if len(args) == 0 || args[0] != "run" {
		usage(stderr, fs)
		return exitSetup
	}
	if err := fs.Parse(args[1:]); err != nil {
		return exitSetup
	}
	command := fs.Args()
	if len(command) == 0 {
		fmt.Fprintln(stderr, "testenv: no command given after --")
		usage(stderr, fs)
		return exitSetup
	}

	if _, err := exec.LookPath(command[0]); err != nil {
		fmt.Fprintf(stderr, "testenv: %v\n", err)
		return exitSetup
	}

	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	opts := provision.Options{
		Logger:   slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})),
		Warnings: stderr,
	}

	// Signals: during start-up they cancel the start; while the command runs
	// they are passed on to it; either way services are stopped before exit.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	var interrupted atomic.Int32 // signal number that cancelled the start-up
	go func() {
		select {
		case sig := <-sigs:
			if n, ok := sig.(syscall.Signal); ok {
				interrupted.Store(int32(n))
			}
			cancel()
		case <-ctx.Done():
		}
	}()

	services, err := startServices(ctx, opts, *withKafka, *withPG)
	defer func() {
		if err := stopServices(services); err != nil {
			fmt.Fprintf(stderr, "testenv: %v\n", err)
		}
	}()
	if err != nil {
		fmt.Fprintf(stderr, "testenv: %v\n", err)
		if n := interrupted.Load(); n != 0 {
			return 128 + int(n)
		}
		return exitSetup
	}
	for _, s := range services {
		fmt.Fprintf(stderr, "testenv: %s\n", s)
	}
	cancel() // start-up is over: signals now go to the command

	return runCommand(command, childEnv(os.Environ(), services), sigs, stderr)
}

// startServices starts the requested services concurrently. On error it
// still returns the ones that started, for the caller to stop.
func startServices(ctx context.Context, opts provision.Options, withKafka, withPG bool) ([]*provision.Service, error) {
	type starter func(context.Context, provision.Options) (*provision.Service, error)
	var starters []starter
	if withKafka {
		starters = append(starters, provision.StartKafka)
	}
	if withPG {
		starters = append(starters, provision.StartPostgres)
	}
	results := make([]*provision.Service, len(starters))
	errs := make([]error, len(starters))
	var wg sync.WaitGroup
	for i, start := range starters {
		wg.Go(func() { results[i], errs[i] = start(ctx, opts) })
	}
	wg.Wait()
	var started []*provision.Service
	for _, s := range results {
		if s != nil {
			started = append(started, s)
		}
	}
	return started, errors.Join(errs...)
}

func stopServices(services []*provision.Service) error {
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	var errs []error
	for _, s := range services {
		errs = append(errs, s.Close(ctx))
	}
	return errors.Join(errs...)
}

// childEnv is env with the services' variables set, replacing any earlier
// values of the same keys.
func childEnv(env []string, services []*provision.Service) []string {
	set := map[string]bool{}
	var extra []string
	for _, s := range services {
		for _, kv := range s.Env() {
			k, _, _ := strings.Cut(kv, "=")
			set[k] = true
			extra = append(extra, kv)
		}
	}
	out := make([]string, 0, len(env)+len(extra))
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); !set[k] {
			out = append(out, kv)
		}
	}
	return append(out, extra...)
}

// runCommand runs the command with the given environment, passing on the
// signals that arrive, and returns its exit status (128+n if signal n ended it).
func runCommand(command, env []string, sigs <-chan os.Signal, stderr io.Writer) int {
	cmd := exec.Command(command[0], command[1:]...)
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, stderr
	release := bindChild(cmd)
	defer release()
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "testenv: starting %s: %v\n", command[0], err)
		return exitSetup
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case sig := <-sigs:
				_ = cmd.Process.Signal(sig)
			case <-done:
				return
			}
		}
	}()
	err := cmd.Wait()
	close(done)
	if err == nil {
		return 0
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		fmt.Fprintf(stderr, "testenv: %s: %v\n", command[0], err)
		return exitSetup
	}
	if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return exit.ExitCode()
}
