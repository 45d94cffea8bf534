package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/larkline/larkline/internal/config"
	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/schemas/ids"
)

// docGrants returns the SQL of docs/operations.md "A runtime user with DML rights
// only", with its variables substituted.
func docGrants(t *testing.T, vars map[string]string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "docs/operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n### A runtime user with DML rights only\n")
	if !ok {
		t.Fatal(`docs/operations.md has no "### A runtime user with DML rights only" section`)
	}
	_, block, ok := strings.Cut(section, "```sql\n")
	block, _, ok2 := strings.Cut(block, "```")
	if !ok || !ok2 {
		t.Fatal("the DML user section has no sql block")
	}
	var stmts []string
	for _, line := range strings.Split(block, "\n") {
		if line = strings.TrimSpace(line); line == "" {
			continue
		}
		line = regexp.MustCompile(`\$\{([A-Z_]+)\}`).ReplaceAllStringFunc(line, func(v string) string {
			name := v[2 : len(v)-1]
			val, ok := vars[name]
			if !ok {
				t.Fatalf("docs/operations.md: unknown variable %s in %q", v, line)
			}
			return val
		})
		stmts = append(stmts, strings.TrimSuffix(line, ";"))
	}
	return stmts
}

// TestRolesRunAsDMLOnlyUser: a role refuses to start on a database whose schema is
// behind, naming `larkline migrate`; after `migrate` as the owner and the GRANTs of
// docs/operations.md, a role runs as a user with DML rights only (it writes and
// reads evidence through the bulk path) and that user cannot migrate (issue #32).
func TestRolesRunAsDMLOnlyUser(t *testing.T) {
	ctx := context.Background()
	cfg := roleConfig(t)
	const token = "dml-test-token"
	sum := sha256.Sum256([]byte(token))
	cfg.HTTP.APITokens = []config.APIToken{{Name: "t", SHA256: fmt.Sprintf("%x", sum), Workspaces: []string{"*"}}}
	ownerDSN := cfg.Postgres.DSN.Value()
	log := slog.New(slog.DiscardHandler)

	// behind: the role refuses, and migrates nothing
	if r, err := startRoles(ctx, cfg, log, []ids.Stage{ids.StageAPI}); err == nil {
		_ = r.stop()
		t.Fatal("the api role started on an unmigrated database")
	} else if !errors.Is(err, store.ErrSchemaBehind) || !strings.Contains(err.Error(), "larkline migrate") {
		t.Fatalf("api role on an unmigrated database: %v, want store.ErrSchemaBehind naming larkline migrate", err)
	}

	if _, stderr, code := runCLI(t, "migrate", "--config", writeConfig(t, cfg)); code != 0 {
		t.Fatalf("migrate as the owner: exit %d\n%s", code, stderr)
	}
	pc, err := pgx.ParseConfig(ownerDSN)
	if err != nil {
		t.Fatal(err)
	}
	appUser := fmt.Sprintf("larkline_app_%x", time.Now().UnixNano())
	const appPassword = "dml-only-password"
	owner, err := pgx.Connect(ctx, ownerDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close(ctx)
	for _, stmt := range docGrants(t, map[string]string{"APP_USER": appUser, "APP_PASSWORD": appPassword,
		"DATABASE": pgx.Identifier{pc.Database}.Sanitize(), "OWNER": pgx.Identifier{pc.User}.Sanitize()}) {
		if _, err := owner.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), ownerDSN)
		if err != nil {
			return
		}
		defer c.Close(context.Background())
		_, _ = c.Exec(context.Background(), "DROP OWNED BY "+appUser)
		_, _ = c.Exec(context.Background(), "DROP ROLE "+appUser)
	})
	u, err := url.Parse(ownerDSN)
	if err != nil {
		t.Fatalf("the harness DSN is not a URL: %v", err)
	}
	u.User = url.UserPassword(appUser, appPassword)
	cfg.Postgres.DSN = config.Secret(u.String())

	// the role runs as the DML-only user; evidence goes in one row and in bulk
	pool, err := openPool(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	st, err := store.New(pool)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.CheckSchema(ctx, pool); err != nil {
		t.Fatalf("CheckSchema as the DML-only user: %v", err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	putEvidence(t, st, "ws-dml", "om_dml", "written by the runtime user", now)
	bulk := make([]store.Evidence, 300) // the COPY path: ids drawn from the sequence
	for i := range bulk {
		msg := fmt.Sprintf("om_bulk_%03d", i)
		bulk[i] = store.Evidence{
			WorkspaceID: "ws-dml", Source: ids.SourceLark, SourceType: ids.SourceTypeLarkMessage,
			SourceKey: ids.MessageSourceKey("oc_roles", ids.MessageID(msg)), OccurredAt: now,
			ContentHash: msg, SynthesisEligible: true,
		}
	}
	if _, err := st.UpsertEvidence(ctx, bulk); err != nil {
		t.Fatalf("a bulk batch as the DML-only user: %v", err)
	}
	r, _ := startTestRoles(t, cfg, "api")
	if r == nil {
		t.Fatal("no running roles")
	}

	// the runtime user cannot change the schema
	if _, stderr, code := runCLI(t, "migrate", "--config", writeConfig(t, cfg)); code == 0 {
		t.Fatal("migrate as the DML-only user succeeded: it can change the schema")
	} else if !strings.Contains(stderr, "permission denied") {
		t.Fatalf("migrate as the DML-only user: exit %d, want permission denied:\n%s", code, stderr)
	}
}
