package provision

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/larkline/larkline/internal/pgcluster"
)

const postgresReadyTimeout = 60 * time.Second

// postgresReady waits until the DSN accepts a connection and answers a query.
func postgresReady(ctx context.Context, s *Service) error {
	ctx, cancel := context.WithTimeout(ctx, postgresReadyTimeout)
	defer cancel()
	cfg, err := pgx.ParseConfig(s.Endpoint)
	if err != nil {
		return fmt.Errorf("%w: parsing the PostgreSQL DSN: %v", ErrBadEnv, err)
	}
	cfg.ConnectTimeout = 5 * time.Second
	for {
		err = pingPostgres(ctx, cfg)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("postgres at %s did not answer within %s: %w", RedactDSN(s.Endpoint), postgresReadyTimeout, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func pingPostgres(ctx context.Context, cfg *pgx.ConnConfig) error {
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var one int
	return conn.QueryRow(ctx, "SELECT 1").Scan(&one)
}

// startPostgresLocal makes a throwaway cluster with the machine's initdb and
// pg_ctl (LARKLINE_TEST_PG_BIN names their directory; otherwise pgcluster finds
// them) on a free port, as the "postgres" user when root.
func startPostgresLocal(ctx context.Context, o Options) (*Service, error) {
	return startPostgres(ctx, KindLocal, pgcluster.Options{Kind: pgcluster.KindLocal, BinDir: o.getenv(EnvPGBin)})
}

// startPostgresEmbedded starts PostgreSQL from the binaries that
// embedded-postgres downloads (and caches in ~/.embedded-postgres-go). It
// runs initdb as the current user, so it is unavailable to root. Its start is
// bounded by its own timeouts rather than ctx.
func startPostgresEmbedded(ctx context.Context, _ Options) (*Service, error) {
	return startPostgres(ctx, KindEmbedded, pgcluster.Options{Kind: pgcluster.KindEmbedded})
}

// startPostgres starts a throwaway pgcluster in a fresh temporary directory; its
// Stop, or its reaper if this process dies first, removes the directory.
func startPostgres(ctx context.Context, kind Kind, po pgcluster.Options) (*Service, error) {
	dir, err := os.MkdirTemp("", "larkline-pg-")
	if err != nil {
		return nil, fmt.Errorf("creating the cluster directory: %w", err)
	}
	po.Dir, po.Throwaway = dir, true
	c, err := pgcluster.Start(ctx, po)
	switch {
	case errors.Is(err, pgcluster.ErrBadBinDir):
		return nil, errors.Join(fmt.Errorf("%w: %s=%s holds no initdb and pg_ctl", ErrBadEnv, EnvPGBin, po.BinDir), os.RemoveAll(dir))
	case errors.Is(err, pgcluster.ErrUnavailable):
		return nil, errors.Join(unavailable("%v", err), os.RemoveAll(dir))
	case err != nil:
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	return newService(postgresSpec, kind, c.DSN(), c.Stop), nil
}
