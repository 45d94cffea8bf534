package testenv

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/larkline/larkline/internal/testenv/provision"
)

// PostgresDSN creates a fresh, empty UTF-8 database named t_<random> on the
// binary's PostgreSQL (starting it on first use), drops it when the test ends
// (disconnecting anyone still connected), and returns a DSN for it. It fails
// the test if the database cannot be created.
func PostgresDSN(t testing.TB) string {
	t.Helper()
	svc, err := postgresService.get()
	if err != nil {
		t.Fatalf("testenv: postgres: %v", err)
	}
	suffix, err := randomHex(8)
	if err != nil {
		t.Fatalf("testenv: PostgresDSN: %v", err)
	}
	name := "t_" + suffix
	dsn, err := withDatabase(svc.Endpoint, name)
	if err != nil {
		t.Fatalf("testenv: PostgresDSN: %v", err)
	}
	ident := pgx.Identifier{name}.Sanitize()
	if err := adminExec(svc.Endpoint, "CREATE DATABASE "+ident+" TEMPLATE template0 ENCODING 'UTF8'"); err != nil {
		t.Fatalf("testenv: creating database %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := adminExec(svc.Endpoint, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)"); err != nil {
			t.Errorf("testenv: dropping database %s: %v", name, err)
		}
	})
	return dsn
}

// adminExec runs one statement on the server's maintenance database.
func adminExec(adminDSN, sql string) error {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, adminDSN)
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", provision.RedactDSN(adminDSN), err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, sql); err != nil {
		return err
	}
	return nil
}

// withDatabase returns dsn pointed at database db. It understands both DSN
// forms pgx accepts: URLs (the path is replaced) and keyword/value strings
// (a later dbname= wins over an earlier one).
func withDatabase(dsn, db string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", fmt.Errorf("parsing the PostgreSQL URL %s: %w", provision.RedactDSN(dsn), err)
		}
		u.Path = "/" + db
		u.RawPath = ""
		q := u.Query()
		if q.Has("dbname") {
			q.Set("dbname", db)
			u.RawQuery = q.Encode()
		}
		return u.String(), nil
	}
	if _, err := pgx.ParseConfig(dsn); err != nil {
		return "", fmt.Errorf("parsing the PostgreSQL DSN %s: %w", provision.RedactDSN(dsn), err)
	}
	return strings.TrimSpace(dsn) + " dbname=" + db, nil
}
