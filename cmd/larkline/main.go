package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"syscall"
)

// command is one subcommand.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
	// subs are the command's subcommands, one of which must come first; nil for a
	// command without any. The docs/CLI consistency test checks every mention of a
	// command in the docs against it.
	subs []string
}

var commands = map[string]command{
	"demo":        {summary: "run the whole pipeline on the embedded default (in-process Kafka, embedded Postgres, a local Lark)", run: runDemo},
	"run":         {summary: "run long-running roles (--roles windows,sink,synthesis,ingest,api,…)", run: runRoles},
	"migrate":     {summary: "apply the Postgres schema migrations (idempotent; the only command that changes the schema)", run: runMigrate},
	"topics":      {summary: "topics ensure [--dry-run] | print --format kafka-topics|strimzi|terraform: create or check every topic, or print them", run: runTopics, subs: topicsSubs},
	"replay":      {summary: "deprecated: use versions start", run: runReplay},
	"windows":     {summary: "windows retry --workspace W --window T: hand a needs_attention or failed window of the serving version back to synthesis", run: runWindows, subs: windowsSubs},
	"versions":    {summary: "versions list|start|diff|promote|retire: run processor versions side by side, compare, promote, clean up", run: runVersions, subs: versionsSubs},
	"lag":         {summary: "print consumer lag per group, topic and partition (--json)", run: runLag},
	"version":     {summary: "print the build version", run: runVersion},
	"config":      {summary: "config check: validate the configuration and print it, secrets masked", run: runConfig, subs: configSubs},
	"workspaces":  {summary: "workspaces put|status|get|publish: manage workspaces (Postgres) or publish to the feed (Kafka)", run: runWorkspaces, subs: workspacesSubs},
	"bind":        {summary: "bind add|remove|list: bind Lark chats to workspaces", run: runBind, subs: bindSubs},
	"retention":   {summary: "retention run [--dry-run]: redact or delete evidence past the retention period", run: runRetention, subs: retentionSubs},
	"deadletters": {summary: "deadletters list|redrive: list parked records (ids, never text) or feed them back through their stage", run: runDeadLetters, subs: deadLettersSubs},
	"schemas":     {summary: "schemas register|check: register every record schema in the registry, or check that each is compatible with its subject", run: runSchemas, subs: schemasSubs},
	"refresh":     {summary: "refresh --workspace W: reconcile one workspace from Lark history now, even if no longer firing", run: runRefresh},
}

// The subcommands of the commands that have them.
var (
	topicsSubs      = []string{"ensure", "print"}
	configSubs      = []string{"check"}
	workspacesSubs  = []string{"put", "status", "get", "publish"}
	bindSubs        = []string{"add", "remove", "list"}
	retentionSubs   = []string{"run"}
	deadLettersSubs = []string{"list", "redrive"}
	schemasSubs     = []string{"register", "check"}
)

// errUsage marks a command-line mistake: exit code 2.
var errUsage = errors.New("usage")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := dispatch(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "larkline: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	if err := cmd.run(ctx, args[1:], stdout, stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "larkline %s: %v\n", args[0], err)
		if errors.Is(err, errUsage) {
			return 2
		}
		return 1
	}
	return 0
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: larkline <command> [flags]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-11s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'larkline <command> -h' for a command's flags.")
}

// version is set at build time with -ldflags "-X main.version=…" (make build,
// deploy/Dockerfile); when it is not, buildVersion takes it from the module or VCS
// information the Go toolchain embeds.
var version = "dev"

func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("larkline version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	info, _ := debug.ReadBuildInfo()
	fmt.Fprintln(stdout, "larkline", buildVersion(version, info))
	return nil
}

// buildVersion is the version to print: the -ldflags value when set; else the main
// module's version (go install …@v1.2.3); else the VCS revision the toolchain
// recorded (12 hex digits, "-dirty" when the tree had changes); "dev" only when none
// is known (go run, go test).
func buildVersion(ldflags string, info *debug.BuildInfo) string {
	if ldflags != "" && ldflags != "dev" {
		return ldflags
	}
	if info == nil {
		return "dev"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, dirty string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "-dirty"
			}
		}
	}
	if rev == "" {
		return "dev"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	return rev + dirty
}

// subcommand splits args into a command's subcommand and its flags. It answers -h
// with the subcommands (flag.ErrHelp: exit 0) and a missing or unknown one with
// errUsage, before any configuration is read or any connection made.
func subcommand(name string, subs, args []string, stderr io.Writer) (string, []string, error) {
	usageLine := fmt.Sprintf("larkline %s %s [flags]", name, strings.Join(subs, "|"))
	if len(args) == 0 {
		return "", nil, fmt.Errorf("%w: %s", errUsage, usageLine)
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprintf(stderr, "usage: %s\n\nRun 'larkline %s <subcommand> -h' for its flags.\n", usageLine, name)
		return "", nil, flag.ErrHelp
	}
	if !slices.Contains(subs, args[0]) {
		return "", nil, fmt.Errorf("%w: unknown subcommand %q of %s (%s)", errUsage, args[0], name, strings.Join(subs, ", "))
	}
	return args[0], args[1:], nil
}
