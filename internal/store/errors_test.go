package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/larkline/larkline/internal/freeport"
)

func TestIsRetryable(t *testing.T) {
	t.Parallel()
	pg := func(code string) error { return &pgconn.PgError{Code: code, Message: "x"} }
	wrap := func(err error) error { return fmt.Errorf("upsert evidence: %w", err) }
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"connection exception 08000", pg("08000"), true},
		{"connection failure 08006", pg("08006"), true},
		{"unable to connect 08001", wrap(pg("08001")), true},
		{"serialization failure", wrap(pg("40001")), true},
		{"deadlock", pg("40P01"), true},
		{"other transaction rollback 40002", pg("40002"), false},
		{"lock not available", pg("55P03"), true},
		{"statement timeout", pg("57014"), true},
		{"too many connections 53300", pg("53300"), true},
		{"disk full 53100", pg("53100"), true},
		{"out of memory 53200", pg("53200"), true},
		{"admin shutdown", pg("57P01"), true},
		{"crash shutdown", pg("57P02"), true},
		{"cannot connect now", pg("57P03"), true},
		{"unique violation", wrap(pg("23505")), false},
		{"foreign key violation", pg("23503"), false},
		{"check violation", pg("23514"), false},
		{"not null violation", pg("23502"), false},
		{"invalid text representation", pg("22P02"), false},
		{"character not in repertoire (NUL)", pg("22021"), false},
		{"division by zero", pg("22012"), false},
		{"undefined table", pg("42P01"), false},
		{"syntax error", pg("42601"), false},
		{"context deadline", wrap(context.DeadlineExceeded), true},
		{"context canceled", wrap(context.Canceled), false},
		{"canceled beats a pg code", errors.Join(context.Canceled, pg("57014")), false},
		{"unexpected EOF", wrap(io.ErrUnexpectedEOF), true},
		{"EOF", io.EOF, true},
		{"connection reset", wrap(&net.OpError{Op: "read", Err: syscall.ECONNRESET}), true},
		{"connection refused", syscall.ECONNREFUSED, true},
		{"broken pipe", wrap(syscall.EPIPE), true},
		{"net timeout", &net.DNSError{IsTimeout: true}, true},
		{"not found", wrap(ErrNotFound), false},
		{"conflict", wrap(ErrConflict), false},
		{"human owned", ErrHumanOwned, false},
		{"invalid input", &InvalidEvidenceError{Index: 3, Err: ErrInvalid}, false},
		{"empty window", ErrEmptyWindow, false},
		{"too many", ErrTooMany, false},
		{"no rows", pgx.ErrNoRows, false},
		{"tx closed", pgx.ErrTxClosed, false},
		{"plain error", errors.New("boom"), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := IsRetryable(c.err); got != c.want {
				t.Fatalf("IsRetryable(%v) = %v, want %v", c.err, got, c.want)
			}
		})
	}
}

// A real connection failure, as the driver reports it, is retryable.
func TestIsRetryableRealConnectFailure(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := freeport.Reserve() // nothing listens there, and no other test binds it
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release()
	addr := p.Addr()
	_, err = OpenPool(ctx, PoolConfig{DSN: "postgres://nobody@" + addr + "/x?sslmode=disable", ConnectTimeout: 2 * time.Second})
	if err == nil {
		t.Fatal("OpenPool to a closed port succeeded")
	}
	if !IsRetryable(err) {
		t.Fatalf("IsRetryable(%v) = false, want true", err)
	}
}

func TestOpenPoolValidates(t *testing.T) {
	t.Parallel()
	secret := "s3cr3t-pw"
	cases := []struct {
		name string
		cfg  PoolConfig
	}{
		{"empty DSN", PoolConfig{}},
		{"malformed DSN", PoolConfig{DSN: "postgres://u:" + secret + "@host:notaport/db"}},
		{"negative lifetime", PoolConfig{DSN: "postgres://u@h/db", MaxConnLifetime: -time.Second}},
		{"min above max", PoolConfig{DSN: "postgres://u@h/db", MaxConns: 2, MinConns: 3}},
		{"negative max", PoolConfig{DSN: "postgres://u@h/db", MaxConns: -1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := OpenPool(context.Background(), c.cfg)
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("OpenPool = %v, want ErrInvalid", err)
			}
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("error leaks the password: %v", err)
			}
		})
	}
	if _, err := New(nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("New(nil) = %v, want ErrInvalid", err)
	}
}

// TestOpenPoolSessionSettings: every connection of the store's pool names the
// application and runs without JIT (D47).
func TestOpenPoolSessionSettings(t *testing.T) {
	t.Parallel()
	pool := newTestPool(t)
	for _, want := range []struct{ name, value string }{{"jit", "off"}, {"application_name", "larkline"}} {
		var got string
		if err := pool.QueryRow(context.Background(), "SELECT current_setting($1)", want.name).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want.value {
			t.Errorf("%s = %q, want %q", want.name, got, want.value)
		}
	}
}
