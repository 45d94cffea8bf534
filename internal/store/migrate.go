package store

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed migrations/*.sql
var embeddedMigrations embed.FS

// migrationLockKey is the advisory lock (scoped to the current database) that serialises
// migrations across processes: the ASCII bytes of "larkline" read as a big-endian int64.
const migrationLockKey int64 = 0x6c61726b6c696e65

// ErrMigration is returned (wrapped) when the migration set is malformed, a migration
// fails, or an applied migration's checksum no longer matches its file.
var ErrMigration = errors.New("migration failed")

// ErrSchemaBehind is returned (wrapped) by CheckSchema when a migration this binary
// needs is not applied: run `larkline migrate` (as the schema's owner) first.
var ErrSchemaBehind = errors.New("database schema is behind this binary")

var migrationName = regexp.MustCompile(`^([0-9]{4})_([a-z0-9_]+)\.sql$`)

type migration struct {
	version  int64
	name     string
	sql      string
	checksum string
}

// Migrate brings the database schema up to date with the migrations embedded in this
// binary and reports how many it applied.
//
// Migrations run one at a time while this process holds a Postgres advisory lock, so
// two processes cannot migrate at once (the second waits, then finds nothing to do).
// Each migration runs in its own transaction together with its schema_migrations row: a
// failing migration rolls back and leaves the schema as it was. Running Migrate again is
// a no-op. An applied migration whose file changed (checksum mismatch) is an error, and
// nothing is applied. Versions recorded in the database that this binary does not know
// (a newer binary migrated first) are left alone: migrations are additive.
func Migrate(ctx context.Context, pool *pgxpool.Pool) (applied int, err error) {
	if pool == nil {
		return 0, fmt.Errorf("%w: nil pool", ErrInvalid)
	}
	return migrateFS(ctx, pool, embeddedMigrations, "migrations")
}

// CheckSchema returns nil when every migration embedded in this binary is applied
// with the same checksum, and changes nothing: it needs only SELECT on
// schema_migrations, so roles can run as a user with DML rights only while
// `larkline migrate`, the one path that changes the schema, runs as the owner. A
// missing migration is ErrSchemaBehind naming them; a changed one is ErrMigration.
func CheckSchema(ctx context.Context, pool *pgxpool.Pool) error {
	if pool == nil {
		return fmt.Errorf("%w: nil pool", ErrInvalid)
	}
	return checkSchemaFS(ctx, pool, embeddedMigrations, "migrations")
}

func checkSchemaFS(ctx context.Context, pool *pgxpool.Pool, fsys fs.FS, dir string) error {
	migrations, err := loadMigrations(fsys, dir)
	if err != nil {
		return err
	}
	done := map[int64]string{}
	var exists bool
	if err := pool.QueryRow(ctx, "SELECT to_regclass('schema_migrations') IS NOT NULL").Scan(&exists); err != nil {
		return fmt.Errorf("checking the schema version: %w", err)
	}
	if exists {
		if done, err = appliedMigrations(ctx, pool); err != nil {
			return fmt.Errorf("checking the schema version: %w", err)
		}
	}
	var missing []string
	for _, m := range migrations {
		sum, ok := done[m.version]
		switch {
		case !ok:
			missing = append(missing, fmt.Sprintf("%04d_%s", m.version, m.name))
		case sum != m.checksum:
			return fmt.Errorf("%w: migration %04d_%s was applied with checksum %s but this binary has %s",
				ErrMigration, m.version, m.name, sum, m.checksum)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: migrations %v are not applied; run `larkline migrate` with the schema owner's credentials, then start the roles", ErrSchemaBehind, missing)
	}
	return nil
}

func loadMigrations(fsys fs.FS, dir string) ([]migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("%w: read migrations: %w", ErrMigration, err)
	}
	var out []migration
	seen := map[int64]string{}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		m := migrationName.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("%w: migration file %q is not named NNNN_name.sql", ErrMigration, e.Name())
		}
		version, _ := strconv.ParseInt(m[1], 10, 64) // four digits: cannot fail
		if version == 0 {
			return nil, fmt.Errorf("%w: migration file %q: versions start at 0001", ErrMigration, e.Name())
		}
		if prev, dup := seen[version]; dup {
			return nil, fmt.Errorf("%w: migrations %q and %q share version %d", ErrMigration, prev, e.Name(), version)
		}
		seen[version] = e.Name()
		body, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("%w: read %s: %w", ErrMigration, e.Name(), err)
		}
		sum := sha256.Sum256(body)
		out = append(out, migration{version: version, name: m[2], sql: string(body), checksum: hex.EncodeToString(sum[:])})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	return out, nil
}

func migrateFS(ctx context.Context, pool *pgxpool.Pool, fsys fs.FS, dir string) (applied int, err error) {
	migrations, err := loadMigrations(fsys, dir)
	if err != nil {
		return 0, err
	}
	pc, err := pool.Acquire(ctx)
	if err != nil {
		return 0, fmt.Errorf("migrate: acquire connection: %w", err)
	}
	// The advisory lock belongs to this session. Unlocking may fail if ctx is already
	// done; closing the connection then releases the lock for certain.
	conn := pc.Hijack()
	defer func() {
		unlockCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = conn.Close(unlockCtx)
	}()

	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", migrationLockKey); err != nil {
		return 0, fmt.Errorf("migrate: take advisory lock: %w", err)
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    bigint      PRIMARY KEY,
		name       text        NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now(),
		checksum   text        NOT NULL)`); err != nil {
		return 0, fmt.Errorf("migrate: create schema_migrations: %w", err)
	}
	done, err := appliedMigrations(ctx, conn)
	if err != nil {
		return 0, err
	}
	for _, m := range migrations {
		if sum, ok := done[m.version]; ok && sum != m.checksum {
			return 0, fmt.Errorf("%w: migration %04d_%s was applied with checksum %s but the file now has %s",
				ErrMigration, m.version, m.name, sum, m.checksum)
		}
	}
	for _, m := range migrations {
		if _, ok := done[m.version]; ok {
			continue
		}
		if err := applyMigration(ctx, conn, m); err != nil {
			return applied, err
		}
		applied++
	}
	return applied, nil
}

// appliedMigrations reads schema_migrations through a connection or a pool.
func appliedMigrations(ctx context.Context, conn interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}) (map[int64]string, error) {
	rows, err := conn.Query(ctx, "SELECT version, checksum FROM schema_migrations")
	if err != nil {
		return nil, fmt.Errorf("migrate: read schema_migrations: %w", err)
	}
	done := map[int64]string{}
	var (
		v   int64
		sum string
	)
	if _, err := pgx.ForEachRow(rows, []any{&v, &sum}, func() error {
		done[v] = sum
		return nil
	}); err != nil {
		return nil, fmt.Errorf("migrate: read schema_migrations: %w", err)
	}
	return done, nil
}

func applyMigration(ctx context.Context, conn *pgx.Conn, m migration) error {
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		// No arguments: the simple protocol runs every statement of the file.
		if _, err := tx.Exec(ctx, m.sql); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
			m.version, m.name, m.checksum)
		return err
	})
	if err != nil {
		return fmt.Errorf("%w: apply %04d_%s (rolled back): %w", ErrMigration, m.version, m.name, err)
	}
	return nil
}
