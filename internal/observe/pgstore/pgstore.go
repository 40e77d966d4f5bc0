package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/retrycap/retrycap/internal/observe"
)

// Run connects to dsn (a libpq connection string or URL), runs the list and summary queries
// over table in one read-only transaction (one snapshot: the summary counts the same rows as
// the list) and returns the report.
func Run(ctx context.Context, dsn, table string, threshold, limit int) (*observe.Report, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	list, err := observe.ListQuery(observe.Postgres, table, threshold, limit)
	if err != nil {
		return nil, err
	}
	sumQ, err := observe.SummaryQuery(observe.Postgres, table, threshold)
	if err != nil {
		return nil, err
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("--postgres: %w", err)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting to PostgreSQL at %s: %w", where(cfg), err)
	}
	defer conn.Close(context.Background())
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL at %s: %w", where(cfg), err)
	}
	defer tx.Rollback(context.Background()) //nolint:errcheck // read-only: nothing to keep
	rows, err := tx.Query(ctx, list)
	if err != nil {
		return nil, fmt.Errorf("querying table %s: %w", table, err)
	}
	keys, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (observe.KeyRow, error) {
		var k observe.KeyRow
		err := row.Scan(&k.Key, &k.Kind, &k.Attempts, &k.ChainLinks, &k.Failures, &k.First, &k.SpanUS, &k.Services,
			&k.Deepest, &k.Amplification, &k.Callers, &k.Methods)
		return k, err
	})
	if err != nil {
		return nil, fmt.Errorf("querying table %s: %w", table, err)
	}
	var s observe.SummaryRow
	if err := tx.QueryRow(ctx, sumQ).Scan(&s.AttemptsRead, &s.Keyless, &s.Keys, &s.Over, &s.Peak, &s.PeakKey,
		&s.PeakAmplification, &s.PeakAt, &s.LongestSpanUS, &s.LongestKey); err != nil {
		return nil, fmt.Errorf("summary of table %s: %w", table, err)
	}
	return observe.StoreReport(keys, s, threshold)
}

func where(cfg *pgx.ConnConfig) string {
	return fmt.Sprintf("%s:%d database %s", cfg.Host, cfg.Port, cfg.Database)
}
