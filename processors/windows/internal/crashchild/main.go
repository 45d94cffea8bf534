package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/lovoo/goka"
	"github.com/lovoo/goka/storage"

	"github.com/larkline/larkline/internal/kafka"
	"github.com/larkline/larkline/processors/windows"
	"github.com/larkline/larkline/schemas"
)

func main() { os.Exit(run()) }

// run runs one window processor until SIGTERM (or SIGKILL).
func run() int {
	env := func(k string) string { return os.Getenv("LARKLINE_WINDOWS_CHILD_" + k) }
	brokers := strings.Split(env("BROKERS"), ",")
	codecs, err := schemas.NewCodecs(schemas.Topics{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	kopts := kafka.Options{Brokers: brokers, ClientID: "windows-child",
		Consumer: kafka.ConsumerOptions{SessionTimeout: 6 * time.Second, RebalanceTimeout: 10 * time.Second}}
	g, err := kafka.NewGoka(kafka.GokaOptions{Options: kopts, TableReplication: 1, StreamReplication: 1})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	copts, err := kafka.NewClientOptions(kopts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	p, err := windows.New(windows.Options{
		Brokers: brokers, ProcessorVersion: env("VERSION"),
		EvidenceTopic: env("EVIDENCE"), ClosedTopic: env("CLOSED"), DeadLetterTopic: env("DEAD"),
		Window: 10 * time.Minute, Grace: time.Minute, Retention: 72 * time.Hour,
		ScanInterval: 300 * time.Millisecond, ReemitAfter: 5 * time.Second, Codecs: codecs,
		Client: copts, Emitter: g.EmitterOptions(),
		Goka: append(g.ProcessorOptions(), goka.WithStorageBuilder(storage.DefaultBuilder(env("STATE")))),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := p.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	_ = p.Close()
	return 0
}
