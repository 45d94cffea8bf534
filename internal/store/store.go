package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/larkline/larkline/internal/options"
	"github.com/larkline/larkline/schemas/ids"
)

// Store is larkline's Postgres repository. It is safe for concurrent use; it does not
// own the pool (the caller closes it).
type Store struct {
	pool *pgxpool.Pool
}

// New returns a Store over pool. The schema must be migrated (Migrate).
func New(pool *pgxpool.Pool) (*Store, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: nil pool", ErrInvalid)
	}
	return &Store{pool: pool}, nil
}

// Pool returns the underlying pool.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// PoolConfig configures OpenPool. Zero fields take the documented defaults.
type PoolConfig struct {
	// DSN is a libpq connection string or URL. Required.
	DSN string
	// MaxConns defaults to 10.
	MaxConns int32
	// MinConns defaults to 0; must not exceed MaxConns.
	MinConns int32
	// MaxConnLifetime defaults to 1h.
	MaxConnLifetime time.Duration
	// MaxConnIdleTime defaults to 15m.
	MaxConnIdleTime time.Duration
	// HealthCheckPeriod defaults to 30s.
	HealthCheckPeriod time.Duration
	// ConnectTimeout bounds each new connection; defaults to 10s.
	ConnectTimeout time.Duration
	// ApplicationName is reported in pg_stat_activity; defaults to "larkline".
	ApplicationName string
	// AllowInsecure lets a DSN reach a host that is not loopback with an sslmode
	// below require (disable, allow, prefer: chat text may cross the network in
	// clear). Off, that is refused (issue #29).
	AllowInsecure bool
}

// Check reports a DSN that does not parse, or reaches a host that is not loopback
// without TLS required (unless AllowInsecure), as an *options.Error naming DSN.
func (cfg PoolConfig) Check() error {
	var p options.Problems
	pc, err := pgxpool.ParseConfig(cfg.DSN)
	switch {
	case cfg.DSN == "":
		p.Add("DSN", nil, "is required")
	case err != nil:
		p.Add("DSN", nil, "is malformed") // may hold a password: say nothing more
	case !cfg.AllowInsecure && !tlsRequired(pc.ConnConfig):
		p.Add("DSN", nil, "reaches a host that is not loopback with an sslmode below require: set sslmode=require or verify-full (or set allowInsecure)")
	}
	return p.Err(ErrInvalid)
}

// tlsRequired reports whether every host the config may connect to is loopback or
// reached with TLS and no plaintext fallback (sslmode require or above).
func tlsRequired(c *pgx.ConnConfig) bool {
	if !options.LoopbackHost(c.Host) && c.TLSConfig == nil {
		return false
	}
	for _, f := range c.Fallbacks {
		if !options.LoopbackHost(f.Host) && f.TLSConfig == nil {
			return false
		}
	}
	return true
}

// OpenPool validates cfg, opens a pool and pings the server once.
func OpenPool(ctx context.Context, cfg PoolConfig) (*pgxpool.Pool, error) {
	if cfg.DSN == "" {
		return nil, fmt.Errorf("%w: empty postgres DSN", ErrInvalid)
	}
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	pc, err := pgxpool.ParseConfig(cfg.DSN)
	if err != nil {
		// The DSN may hold a password, and parse errors may quote it: say nothing more.
		return nil, fmt.Errorf("%w: postgres DSN is malformed", ErrInvalid)
	}
	def := func(d, v time.Duration) time.Duration {
		if d == 0 {
			return v
		}
		return d
	}
	for name, d := range map[string]time.Duration{"MaxConnLifetime": cfg.MaxConnLifetime, "MaxConnIdleTime": cfg.MaxConnIdleTime,
		"HealthCheckPeriod": cfg.HealthCheckPeriod, "ConnectTimeout": cfg.ConnectTimeout} {
		if d < 0 {
			return nil, fmt.Errorf("%w: %s %s < 0", ErrInvalid, name, d)
		}
	}
	if cfg.MaxConns == 0 {
		cfg.MaxConns = 10
	}
	if cfg.MaxConns < 1 || cfg.MinConns < 0 || cfg.MinConns > cfg.MaxConns {
		return nil, fmt.Errorf("%w: need 0 <= MinConns (%d) <= MaxConns (%d), MaxConns >= 1", ErrInvalid, cfg.MinConns, cfg.MaxConns)
	}
	if cfg.ApplicationName == "" {
		cfg.ApplicationName = "larkline"
	}
	pc.MaxConns, pc.MinConns = cfg.MaxConns, cfg.MinConns
	pc.MaxConnLifetime = def(cfg.MaxConnLifetime, time.Hour)
	pc.MaxConnIdleTime = def(cfg.MaxConnIdleTime, 15*time.Minute)
	pc.HealthCheckPeriod = def(cfg.HealthCheckPeriod, 30*time.Second)
	pc.ConnConfig.ConnectTimeout = def(cfg.ConnectTimeout, 10*time.Second)
	pc.ConnConfig.RuntimeParams["application_name"] = cfg.ApplicationName
	// JIT compiles a statement whose estimated cost is high, which a table without
	// statistics gives the store's short statements: 20 ms to 1.4 s per call for
	// statements that run in a millisecond (D47). No larkline query is analytic.
	pc.ConnConfig.RuntimeParams["jit"] = "off"
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("open postgres pool: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("ping postgres %s:%d/%s: %w", pc.ConnConfig.Host, pc.ConnConfig.Port, pc.ConnConfig.Database, err)
	}
	return pool, nil
}

// querier is what both the pool and a transaction offer.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

var (
	_ querier = (*pgxpool.Pool)(nil)
	_ querier = (pgx.Tx)(nil)
)

func validWorkspace(ws ids.WorkspaceID) error {
	if _, err := ids.ParseWorkspaceID(string(ws)); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

func validChat(c ids.ChatID) error {
	if _, err := ids.ParseChatID(string(c)); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

// checkText accepts what a Postgres text column stores: valid UTF-8 without NUL bytes,
// at most max bytes.
func checkText(field, v string, max int, required bool) error {
	switch {
	case required && v == "":
		return fmt.Errorf("%w: %s is empty", ErrInvalid, field)
	case len(v) > max:
		return fmt.Errorf("%w: %s is %d bytes > %d", ErrInvalid, field, len(v), max)
	case !utf8.ValidString(v):
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalid, field)
	case strings.IndexByte(v, 0) >= 0:
		return fmt.Errorf("%w: %s contains a NUL byte", ErrInvalid, field)
	}
	return nil
}

// checkJSONObject accepts empty (meaning {}) or a JSON object that jsonb stores: at
// most max bytes, no \u0000 escape.
func checkJSONObject(field string, v json.RawMessage, max int) error {
	if len(v) == 0 {
		return nil
	}
	if len(v) > max {
		return fmt.Errorf("%w: %s is %d bytes > %d", ErrInvalid, field, len(v), max)
	}
	if !json.Valid(v) {
		return fmt.Errorf("%w: %s is not valid JSON", ErrInvalid, field)
	}
	if t := bytes.TrimLeft(v, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return fmt.Errorf("%w: %s is not a JSON object", ErrInvalid, field)
	}
	if bytes.Contains(v, []byte(`\u0000`)) {
		return fmt.Errorf("%w: %s contains \\u0000, which jsonb rejects", ErrInvalid, field)
	}
	return nil
}

// jsonObject returns v, or {} when empty, as text for a ::jsonb parameter.
func jsonObject(v json.RawMessage) string {
	if len(v) == 0 {
		return "{}"
	}
	return string(v)
}

// truncateUTF8 cuts s to at most max bytes without splitting a rune.
func truncateUTF8(s string, max int) string {
	if len(s) <= max {
		return s
	}
	s = s[:max]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// rawJSON is the scan target of a jsonb column read into m. pgx decodes into a
// json.RawMessage with json.Unmarshal, which validates and copies every value: a
// third of the synthesis worker's CPU went to the entries' ai_metadata that way. As
// a *[]byte the text is copied as it is; jsonb only ever holds valid JSON.
func rawJSON(m *json.RawMessage) *[]byte { return (*[]byte)(m) }
