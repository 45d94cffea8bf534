package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/connectors/deadletters"
	"github.com/larkline/larkline/schemas/ids"
)

// runDeadLetters is `larkline deadletters list|redrive` (issue #19).
func runDeadLetters(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const usage = "larkline deadletters list [--stage S] [--reason R] [--since T] [--format text|json] | redrive --stage S [--reason R] [--since T] [--format json|text] [--apply]"
	sub, args, err := subcommand("deadletters", deadLettersSubs, args, stderr)
	if err != nil {
		return err
	}
	fs, path := newFlags("deadletters "+sub, stderr)
	stageName := fs.String("stage", "", "only dead letters parked by this stage (sink, windows, synthesis, workspaces)")
	reason := fs.String("reason", "", "only dead letters of this reason code")
	since := fs.String("since", "", "only dead letters parked at or after this time (RFC 3339, or a duration back from now such as 24h)")
	defaultFormat := "text" // list: a table; redrive: its JSON report, as before --format applied to it
	if sub == "redrive" {
		defaultFormat = "json"
	}
	format := fs.String("format", defaultFormat, "output: text or json")
	apply := fs.Bool("apply", false, "redrive: write; without it a dry run checks and reports what it would do (issue #29)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	from, err := deadletters.ParseSince(*since, time.Now())
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	var stage ids.Stage
	if *stageName != "" {
		if stage, err = ids.ParseStage(*stageName); err != nil {
			return fmt.Errorf("%w: --stage: %v", errUsage, err)
		}
	}
	f := deadletters.Filter{Stage: stage, Reason: *reason, Since: from}
	if sub == "redrive" && stage == "" {
		return fmt.Errorf("%w: redrive needs --stage: %s", errUsage, usage)
	}
	if *format != "text" && *format != "json" {
		return fmt.Errorf("%w: --format must be text or json", errUsage)
	}
	required := []string{}
	if sub == "redrive" && (stage == ids.StageSink || stage == ids.StageSynthesis) {
		required = append(required, "postgres.dsn") // the store, or the bindings the checks read
	}
	rt, cfg, err := oneShotRuntime(*path, stderr, required...)
	if err != nil {
		return err
	}
	defer rt.close()
	cl, err := newKafkaClient(cfg, "deadletters")
	if err != nil {
		return err
	}
	defer cl.Close()
	if sub == "list" {
		return listDeadLetters(ctx, stdout, rt, cl, f, *format)
	}
	topics := cfg.Kafka.Topics
	r := deadletters.RedriverOptions{Client: cl, Codecs: rt.codecs, DeadLetterTopic: topics.DeadLetter, Logger: rt.log,
		SourceTopics: map[ids.Stage]string{ids.StageSink: topics.Evidence,
			ids.StageSynthesis: topics.WindowsClosed, ids.StageWorkspaces: topics.Workspaces}}
	if stage == ids.StageSink || stage == ids.StageSynthesis {
		st, err := rt.store(ctx)
		if err != nil {
			return err
		}
		r.Store, r.Bindings = st, st
	}
	red, err := deadletters.NewRedriver(r)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	rep, err := red.Redrive(ctx, f, *apply)
	var perr error
	if *format == "text" {
		perr = writeRedriveTable(stdout, rep)
	} else {
		perr = printJSON(stdout, rep)
	}
	if perr != nil && err == nil {
		err = perr
	}
	// The summary, on stderr so that stdout stays one document.
	what := "dry run (nothing written; --apply to re-drive)"
	if *apply {
		what = "re-drive"
	}
	fmt.Fprintf(stderr, "%s of stage %s: %d selected, outcomes %v\n", what, rep.Stage, rep.Selected, rep.Outcomes)
	return err
}

// writeRedriveTable prints a re-drive report as text: one line per dead letter
// (stage, reason, key: ids only) and the outcome counts.
func writeRedriveTable(w io.Writer, rep deadletters.Report) error {
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "FAILED_AT\tSTAGE\tREASON\tKEY\tOUTCOME\tDETAIL")
	for _, r := range rep.Results {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.FailedAt.Format(time.RFC3339), r.Stage, r.Reason, r.Key, r.Outcome, r.Detail)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	outcomes := make([]string, 0, len(rep.Outcomes))
	for o := range rep.Outcomes {
		outcomes = append(outcomes, o)
	}
	sort.Strings(outcomes)
	fmt.Fprintf(w, "stage %s: %d selected", rep.Stage, rep.Selected)
	for _, o := range outcomes {
		fmt.Fprintf(w, ", %s %d", o, rep.Outcomes[o])
	}
	_, err := fmt.Fprintln(w)
	return err
}

// listDeadLetters prints the dead letters f selects: stage, reason, key (ids only)
// and time, as a table or JSON; never a value or an error text.
func listDeadLetters(ctx context.Context, stdout io.Writer, rt *runtime, cl *kgo.Client, f deadletters.Filter, format string) error {
	all, err := deadletters.Scan(ctx, cl, rt.codecs.DeadLetter, rt.opts.topics.DeadLetter)
	if err != nil {
		return err
	}
	sel := deadletters.Select(all, f)
	if format == "json" {
		if sel == nil {
			sel = []deadletters.Entry{}
		}
		return printJSON(stdout, sel)
	}
	tw := tabwriter.NewWriter(stdout, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "FAILED_AT\tSTAGE\tREASON\tKEY\tSOURCE\tREDRIVEN")
	for _, e := range sel {
		red := e.Redriven
		if red == "" {
			red = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s/%d@%d\t%s\n", e.FailedAt.Format(time.RFC3339), e.Stage, e.Reason, e.Key,
			e.SourceTopic, e.SourcePart, e.SourceOffset, red)
	}
	return tw.Flush()
}
