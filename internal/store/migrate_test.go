package store

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/jackc/pgx/v5/pgxpool"
)

func tableExists(t *testing.T, pool *pgxpool.Pool, name string) bool {
	t.Helper()
	var ok bool
	if err := pool.QueryRow(context.Background(), "SELECT to_regclass($1) IS NOT NULL", name).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

func appliedVersions(t *testing.T, pool *pgxpool.Pool) []int64 {
	t.Helper()
	rows, err := pool.Query(context.Background(), "SELECT version FROM schema_migrations ORDER BY version")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var v int64
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

func TestMigrateTwiceIsNoop(t *testing.T) {
	t.Parallel()
	pool := newTestPool(t)
	ctx := context.Background()
	want, err := loadMigrations(embeddedMigrations, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	n, err := Migrate(ctx, pool)
	if err != nil || n != len(want) {
		t.Fatalf("first Migrate = %d, %v; want %d, nil", n, err, len(want))
	}
	for _, table := range []string{"workspaces", "workspace_chat_bindings", "workspace_timeline_evidence",
		"workspace_timeline_sync_states", "workspace_timeline_entries", "workspace_timeline_entry_evidence",
		"workspace_timeline_summaries", "schema_migrations"} {
		if !tableExists(t, pool, table) {
			t.Errorf("table %s missing after Migrate", table)
		}
	}
	n, err = Migrate(ctx, pool)
	if err != nil || n != 0 {
		t.Fatalf("second Migrate = %d, %v; want 0, nil", n, err)
	}
	if got := appliedVersions(t, pool); len(got) != len(want) {
		t.Fatalf("schema_migrations has %v, want %d versions", got, len(want))
	}
}

func TestMigrateConcurrentProcessesApplyOnce(t *testing.T) {
	t.Parallel()
	pool := newTestPool(t)
	want, err := loadMigrations(embeddedMigrations, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	const runners = 4
	var (
		wg    sync.WaitGroup
		total [runners]int
		errs  [runners]error
	)
	for i := range runners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			total[i], errs[i] = Migrate(context.Background(), pool)
		}()
	}
	wg.Wait()
	sum := 0
	for i := range runners {
		if errs[i] != nil {
			t.Fatalf("runner %d: %v", i, errs[i])
		}
		sum += total[i]
	}
	if sum != len(want) {
		t.Fatalf("runners applied %v migrations in total, want %d", total, len(want))
	}
}

func TestMigrateFailingMigrationLeavesSchemaUnchanged(t *testing.T) {
	t.Parallel()
	pool := newTestPool(t)
	ctx := context.Background()
	good := fstest.MapFS{
		"m/0001_first.sql": {Data: []byte(`CREATE TABLE first_t (id int PRIMARY KEY);`)},
	}
	if n, err := migrateFS(ctx, pool, good, "m"); err != nil || n != 1 {
		t.Fatalf("migrate good set = %d, %v", n, err)
	}
	bad := fstest.MapFS{
		"m/0001_first.sql": good["m/0001_first.sql"],
		// Creates a table, alters another, then fails: all of it must roll back.
		"m/0002_broken.sql": {Data: []byte(`CREATE TABLE second_t (id int);
ALTER TABLE first_t ADD COLUMN extra text;
INSERT INTO first_t (id) VALUES (1);
SELECT 1 / 0;`)},
		"m/0003_later.sql": {Data: []byte(`CREATE TABLE third_t (id int);`)},
	}
	n, err := migrateFS(ctx, pool, bad, "m")
	if !errors.Is(err, ErrMigration) || n != 0 {
		t.Fatalf("migrate broken set = %d, %v; want 0, ErrMigration", n, err)
	}
	if tableExists(t, pool, "second_t") || tableExists(t, pool, "third_t") {
		t.Error("tables of the failed (or a later) migration exist")
	}
	var cols, rows int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM information_schema.columns WHERE table_name = 'first_t'`).Scan(&cols); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM first_t`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if cols != 1 || rows != 0 {
		t.Errorf("first_t has %d columns and %d rows after the rollback, want 1 and 0", cols, rows)
	}
	if got := appliedVersions(t, pool); len(got) != 1 || got[0] != 1 {
		t.Errorf("schema_migrations = %v, want [1]", got)
	}
	if IsRetryable(err) {
		t.Errorf("IsRetryable(division by zero in a migration) = true")
	}

	fixed := fstest.MapFS{
		"m/0001_first.sql":  good["m/0001_first.sql"],
		"m/0002_broken.sql": {Data: []byte(`CREATE TABLE second_t (id int);`)},
	}
	if n, err := migrateFS(ctx, pool, fixed, "m"); err != nil || n != 1 {
		t.Fatalf("migrate fixed set = %d, %v; want 1, nil", n, err)
	}
}

func TestMigrateChangedChecksumIsAnError(t *testing.T) {
	t.Parallel()
	pool := newTestPool(t)
	ctx := context.Background()
	set := fstest.MapFS{"m/0001_a.sql": {Data: []byte(`CREATE TABLE a_t (id int);`)}}
	if _, err := migrateFS(ctx, pool, set, "m"); err != nil {
		t.Fatal(err)
	}
	changed := fstest.MapFS{
		"m/0001_a.sql": {Data: []byte(`CREATE TABLE a_t (id bigint);`)},
		"m/0002_b.sql": {Data: []byte(`CREATE TABLE b_t (id int);`)},
	}
	n, err := migrateFS(ctx, pool, changed, "m")
	if !errors.Is(err, ErrMigration) || n != 0 {
		t.Fatalf("migrate with a changed applied file = %d, %v; want 0, ErrMigration", n, err)
	}
	if tableExists(t, pool, "b_t") {
		t.Error("a later migration ran although an applied one changed")
	}
}

func TestLoadMigrationsRejectsMalformedSets(t *testing.T) {
	t.Parallel()
	cases := map[string]fstest.MapFS{
		"bad name":          {"m/first.sql": {Data: []byte("SELECT 1")}},
		"version zero":      {"m/0000_zero.sql": {Data: []byte("SELECT 1")}},
		"duplicate version": {"m/0001_a.sql": {Data: []byte("SELECT 1")}, "m/0001_b.sql": {Data: []byte("SELECT 1")}},
		"upper case name":   {"m/0001_Add.sql": {Data: []byte("SELECT 1")}},
		"missing dir":       {},
	}
	for name, fsys := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := loadMigrations(fsys, "m"); !errors.Is(err, ErrMigration) {
				t.Fatalf("loadMigrations = %v, want ErrMigration", err)
			}
		})
	}
	t.Run("embedded set is well formed and ordered", func(t *testing.T) {
		ms, err := loadMigrations(embeddedMigrations, "migrations")
		if err != nil || len(ms) == 0 {
			t.Fatalf("embedded migrations: %d, %v", len(ms), err)
		}
		for i := 1; i < len(ms); i++ {
			if ms[i].version <= ms[i-1].version {
				t.Fatalf("versions not increasing: %d then %d", ms[i-1].version, ms[i].version)
			}
		}
	})
}

// TestCheckSchema: CheckSchema names the migrations not applied (ErrSchemaBehind),
// accepts a schema with every one applied, rejects a changed one (ErrMigration), and
// never changes the schema.
func TestCheckSchema(t *testing.T) {
	t.Parallel()
	pool := newTestPool(t)
	ctx := context.Background()
	v1 := fstest.MapFS{"m/0001_a.sql": {Data: []byte(`CREATE TABLE a_t (id int);`)}}
	v2 := fstest.MapFS{
		"m/0001_a.sql": {Data: []byte(`CREATE TABLE a_t (id int);`)},
		"m/0002_b.sql": {Data: []byte(`CREATE TABLE b_t (id int);`)},
	}
	changed := fstest.MapFS{"m/0001_a.sql": {Data: []byte(`CREATE TABLE a_t (id bigint);`)}}
	if err := checkSchemaFS(ctx, pool, v1, "m"); !errors.Is(err, ErrSchemaBehind) || !strings.Contains(err.Error(), "0001_a") {
		t.Fatalf("unmigrated database: %v, want ErrSchemaBehind naming 0001_a", err)
	}
	if tableExists(t, pool, "schema_migrations") {
		t.Fatal("CheckSchema created schema_migrations")
	}
	if _, err := migrateFS(ctx, pool, v1, "m"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		set  fstest.MapFS
		want error
	}{
		{"up to date", v1, nil},
		{"a newer binary", v2, ErrSchemaBehind},
		{"an applied file changed", changed, ErrMigration},
	} {
		err := checkSchemaFS(ctx, pool, tc.set, "m")
		if (tc.want == nil && err != nil) || (tc.want != nil && !errors.Is(err, tc.want)) {
			t.Errorf("%s: CheckSchema = %v, want %v", tc.name, err, tc.want)
		}
	}
	if tableExists(t, pool, "b_t") {
		t.Error("CheckSchema applied a migration")
	}
}
