package workspaces

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Feed outcomes (label outcome of larkline_workspaces_feed_records_total).
const (
	outcomeApplied      = "applied"
	outcomeIgnoredOlder = "ignored_older"
	outcomeTombstone    = "tombstone"
	outcomeDeadLettered = "dead_lettered"
)

// Retried operations (label operation of larkline_workspaces_feed_retries_total).
const (
	opApply      = "apply"
	opDecode     = "decode"
	opDeadLetter = "dead_letter"
)

// register registers c on reg and returns it, or returns the collector already
// registered under the same descriptor (two components built on one registry share
// their counters). A nil registry registers nothing.
func register[C prometheus.Collector](reg *prometheus.Registry, c C) (C, error) {
	if reg == nil {
		return c, nil
	}
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		return c, fmt.Errorf("%w: registering metrics: %w", ErrInvalidOptions, err)
	}
	return c, nil
}

type feedMetrics struct {
	records      *prometheus.CounterVec
	deadLettered *prometheus.CounterVec
	retries      *prometheus.CounterVec
	fetchErrors  prometheus.Counter
	commitErrors prometheus.Counter
}

func newFeedMetrics(reg *prometheus.Registry) (*feedMetrics, error) {
	var (
		m   feedMetrics
		err error
	)
	if m.records, err = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "larkline_workspaces_feed_records_total",
		Help: "Workspace feed records processed, by outcome (applied, ignored_older: a version not newer than the stored one, tombstone, dead_lettered).",
	}, []string{"outcome"})); err != nil {
		return nil, err
	}
	for _, o := range []string{outcomeApplied, outcomeIgnoredOlder, outcomeTombstone, outcomeDeadLettered} {
		m.records.WithLabelValues(o)
	}
	if m.deadLettered, err = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "larkline_workspaces_feed_dead_lettered_total",
		Help: "Workspace feed records parked in the dead-letter topic, by reason code.",
	}, []string{"reason"})); err != nil {
		return nil, err
	}
	if m.retries, err = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "larkline_workspaces_feed_retries_total",
		Help: "Retries of a workspace feed record after a retryable failure, by operation (apply: Postgres, decode: schema registry, dead_letter: Kafka).",
	}, []string{"operation"})); err != nil {
		return nil, err
	}
	if m.fetchErrors, err = register(reg, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "larkline_workspaces_feed_fetch_errors_total",
		Help: "Errors fetching the workspace feed (the client retries them).",
	})); err != nil {
		return nil, err
	}
	if m.commitErrors, err = register(reg, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "larkline_workspaces_feed_commit_errors_total",
		Help: "Failed offset commits of the workspace feed (the records are applied again, idempotently).",
	})); err != nil {
		return nil, err
	}
	return &m, nil
}

type publishMetrics struct {
	published *prometheus.CounterVec
}

// Publish results (label result of larkline_workspaces_published_total).
const (
	resultOK      = "ok"
	resultInvalid = "invalid"
	resultError   = "error"
)

func newPublishMetrics(reg *prometheus.Registry) (*publishMetrics, error) {
	c, err := register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "larkline_workspaces_published_total",
		Help: "Workspace records and tombstones published to the feed, by result (ok, invalid, error).",
	}, []string{"result"}))
	if err != nil {
		return nil, err
	}
	return &publishMetrics{published: c}, nil
}

type adminMetrics struct {
	requests *prometheus.CounterVec
}

func newAdminMetrics(reg *prometheus.Registry) (*adminMetrics, error) {
	c, err := register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "larkline_admin_requests_total",
		Help: "Admin API requests, by route pattern (unmatched for unknown paths) and HTTP status code.",
	}, []string{"route", "code"}))
	if err != nil {
		return nil, err
	}
	return &adminMetrics{requests: c}, nil
}
