// Package pgstore runs observe's aggregation in PostgreSQL (observe --postgres DSN --table T):
// the queries internal/observe prints with -o sql, sent through pgx in one read-only
// transaction, their rows rendered as a Report like a file run's. It is the only part of
// observe that imports a database client.
package pgstore
