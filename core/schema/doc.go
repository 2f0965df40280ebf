// Package schema owns the tree database's tables: numbered, embedded,
// forward-only SQL migrations that are identical on every host.
//
// Migrate reads the stored version before writing anything and refuses a
// database written by a newer schema (storage.ErrNewerSchema), so an old
// build rolled back onto a newer database cannot damage it.
//
// Tables are of two kinds. Projections (sessions, prompts, messages, jobs)
// are rebuilt from the event log by core's projectors and compared with the
// stored ones by a test. Bookkeeping tables (tree, claims, schema_migrations)
// are not derived from events and are listed as excluded in that test.
package schema
